"""Pipeline stages, one module per stage, as plain functions wrapped by thin Prefect tasks."""
