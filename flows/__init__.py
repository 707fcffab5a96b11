"""Prefect flows: each wires stages together and nothing else."""
