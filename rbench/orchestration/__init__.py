"""Prefect glue: the stage graph of an experiment (``graph``), stages as Prefect tasks on a task runner
(``runner``), retried flow runs (``attempts``) and the deployments' pull step (``clone``)."""
