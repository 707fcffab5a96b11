"""The benchmark flow: download -> prepare -> subsample -> index -> retrieve -> evaluate -> MLflow."""

from __future__ import annotations

from pathlib import Path

from prefect import flow, task

from rbench.config import ExperimentConfig, load_config
from tasks.download import DOWNLOAD, DownloadConfig
from tasks.evaluate import EVALUATE, read_aggregate
from tasks.index import INDEX, IndexConfig
from tasks.orchestration import call_stage, stage_task
from tasks.prepare import PREPARE
from tasks.retrieve import RETRIEVE, RetrieveConfig
from tasks.subsample import SUBSAMPLE
from tasks.track import log_experiment

download, prepare, subsample, index, retrieve, evaluate = map(
    stage_task, (DOWNLOAD, PREPARE, SUBSAMPLE, INDEX, RETRIEVE, EVALUATE)
)
log_to_mlflow = task(log_experiment, name="mlflow")


def run_stages(cfg: ExperimentConfig) -> tuple[list[dict], list[dict]]:
    """Run the cached stages of every dataset x retriever; return (results, stage report).

    Each result holds ``dataset``, ``retriever`` (its config) and the ``indexes``, ``run``
    and ``evaluation`` artifacts.
    """
    root, report, results = str(cfg.store), [], []
    for ds in cfg.datasets:
        raw = call_stage(download, root, [], DownloadConfig.of(ds), ds.name, report, mirror=cfg.mirror)
        prepared = call_stage(prepare, root, [raw], ds, ds.name, report)
        queries = call_stage(subsample, root, [prepared], cfg.subsample, ds.name, report)
        for r in cfg.retrievers:
            label = f"{ds.name}/{r.label}"
            built = [call_stage(index, root, [prepared], leaf, f"{ds.name}/{leaf.retriever}", report)
                     for leaf in IndexConfig.all_of(r)]
            run = call_stage(retrieve, root, [prepared, queries, *built], RetrieveConfig.of(r, cfg.depth), label, report)
            scored = call_stage(evaluate, root, [queries, run], cfg.metrics, label, report)
            results.append({"dataset": ds.name, "retriever": r, "indexes": built, "run": run, "evaluation": scored})
    return results, report


def summarize_results(cfg: ExperimentConfig, results: list[dict], report: list[dict], run_id: str) -> dict:
    """The flow's return value: MLflow run, metrics rows and the stage report."""
    metrics = [
        {"dataset": r["dataset"], "retriever": r["retriever"].label, **row}
        for r in results
        for row in read_aggregate(r["evaluation"])
    ]
    return {"mlflow_run_id": run_id, "tracking_uri": cfg.tracking_uri(), "metrics": metrics, "stages": report}


@flow(name="rbench-benchmark", log_prints=True)
def benchmark(config_path: str, mirror: str | None = None, store: str | None = None) -> dict:
    """Run every configured retriever on every configured dataset; return metrics and stage report."""
    cfg = load_config(config_path, mirror=mirror, store=store)
    results, report = run_stages(cfg)
    run_id = log_to_mlflow(cfg, results, report, Path(config_path).read_text(encoding="utf-8"))
    return summarize_results(cfg, results, report, run_id)
