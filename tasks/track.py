"""Log an experiment to MLflow: one parent run per flow run, a child per dataset x retriever."""

from __future__ import annotations

from typing import Any, Sequence

from rbench.config import ExperimentConfig
from tasks.cache import Artifact
from tasks.evaluate import read_aggregate


def metric_name(metric: str, k: int) -> str:
    """MLflow-safe metric key, e.g. ``recall_at_5``."""
    return f"{metric}_at_{k}"


def _flatten(prefix: str, value: Any) -> dict[str, Any]:
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for k, v in value.items():
            out.update(_flatten(f"{prefix}.{k}" if prefix else str(k), v))
        return out
    return {prefix: value}


def _experiment_id(mlflow, cfg: ExperimentConfig) -> str:
    existing = mlflow.get_experiment_by_name(cfg.mlflow.experiment)
    if existing is not None:
        return existing.experiment_id
    location = None
    if cfg.mlflow.tracking_uri is None:
        location = (cfg.store.resolve() / "mlflow-artifacts").as_uri()
    return mlflow.create_experiment(cfg.mlflow.experiment, artifact_location=location)


def log_experiment(
    cfg: ExperimentConfig, results: Sequence[dict], report: Sequence[dict], config_text: str
) -> str:
    """Log params, metrics and artifacts; return the parent run id.

    ``results`` items hold ``dataset``, ``retriever`` (a RetrieverConfig) and
    ``evaluation`` (the evaluate stage's Artifact).
    """
    import mlflow

    mlflow.set_tracking_uri(cfg.tracking_uri())
    experiment_id = _experiment_id(mlflow, cfg)
    with mlflow.start_run(experiment_id=experiment_id, run_name=cfg.name) as parent:
        parent_id = parent.info.run_id
        mlflow.log_params(
            {"experiment": cfg.name, "datasets": ",".join(d.name for d in cfg.datasets),
             "retrievers": ",".join(r.label for r in cfg.retrievers), "depth": cfg.depth,
             **_flatten("subsample", cfg.subsample.model_dump(mode="json")),
             **_flatten("metrics", cfg.metrics.model_dump(mode="json"))}
        )
        mlflow.log_text(config_text, "experiment.yaml")
        mlflow.log_dict({"stages": list(report)}, "stages.json")
        mlflow.log_metrics({
            "stages_ran": sum(1 for r in report if r["status"] == "ran"),
            "stages_cached": sum(1 for r in report if r["status"] == "cached"),
        })
        for result in results:
            evaluation: Artifact = result["evaluation"]
            retriever = result["retriever"]
            dataset = next(d for d in cfg.datasets if d.name == result["dataset"])
            with mlflow.start_run(
                experiment_id=experiment_id, run_name=f"{dataset.name}/{retriever.label}",
                nested=True, parent_run_id=parent_id,
            ):
                mlflow.set_tags({"rbench.dataset": dataset.name, "rbench.retriever": retriever.label,
                                 "rbench.evaluate_key": evaluation.key})
                mlflow.log_params({
                    **_flatten("dataset", dataset.model_dump(mode="json")),
                    **_flatten("retriever", retriever.model_dump(mode="json")),
                    "depth": cfg.depth,
                })
                mlflow.log_metrics(
                    {metric_name(a["metric"], a["k"]): a["value"] for a in read_aggregate(evaluation)}
                )
                for name in ("per_query.parquet", "aggregate.parquet", "run.trec"):
                    mlflow.log_artifact(str(evaluation.file(name)))
    return parent_id
