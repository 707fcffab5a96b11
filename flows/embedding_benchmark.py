"""The embedding-model benchmark: every dense retriever of an experiment on every dataset,
compared on recall@k, queries/s, encoder passages/s and index build time."""

from __future__ import annotations

import time
from dataclasses import replace

from prefect import flow

from rbench.core.errors import ConfigError
from rbench.core.secrets import redact
from rbench.evaluation.report_embeddings import write_comparison
from rbench.experiment import config_text, experiment_for_flow
from rbench.flows.benchmark import finish, log_to_mlflow, run_with_runner
from rbench.orchestration.graph import summarize_results
from rbench.results import FlowSummary
from rbench.tasks.evaluate import model_rows


@flow(name="rbench-embedding-benchmark", log_prints=True)
def embedding_benchmark(config_path: str, mirror: str | None = None, store: str | None = None, k: int | None = None,
                        tracking_uri: str | None = None, runner: str | None = None, address: str | None = None,
                        ) -> FlowSummary:
    """Run the experiment (each model's index cached on its own) and write the model comparison
    at recall@``k`` (default 5, or the largest of ``metrics.k`` where 5 is not among them). Its
    settings resolve as :func:`rbench.flows.benchmark.benchmark`'s do."""
    cfg, described = experiment_for_flow("embeddings", config_path, mirror=mirror, store=store,
                                         tracking_uri=tracking_uri, runner=runner, address=address)
    if not any(r.name == "dense" for r in cfg.retrievers):
        raise ConfigError(f"{config_path}: the embedding benchmark needs retrievers named 'dense', one per model")
    k = k or (5 if 5 in cfg.metrics.k else max(cfg.metrics.k))
    if k not in cfg.metrics.k:
        raise ConfigError(f"{config_path}: the models are compared at recall@{k}, but metrics.k is {cfg.metrics.k}: "
                          f"add {k} to metrics.k")
    results, failures, report = run_with_runner(cfg, described)
    rows = model_rows(results, k)
    out = cfg.store / "reports" / f"embeddings-{time.strftime('%Y%m%d-%H%M%S')}"
    write_comparison(rows, out, k)
    run_id = log_to_mlflow(cfg, results, report, redact(config_text(cfg, config_path)), out, failures)
    return finish(cfg, replace(summarize_results(cfg, results, report, run_id, failures), models=tuple(rows),
                               report_folder=str(out)))
