"""The benchmark's stage chain, shared by the benchmark flow (each stage a Prefect task) and by
cached lookups (no Prefect: a rerun whose every stage is in the store imports no orchestration)."""

from __future__ import annotations

from typing import Callable

from rbench.config import ExperimentConfig
from rbench.core.errors import RbenchError
from rbench.core.store import Store
from rbench.orchestration.graph import CachedOnly, ExperimentGraph, NotCached


def experiment_stages(cfg: ExperimentConfig, sub, while_waiting: Callable[[], None] | None = None,
                      ) -> tuple[list[dict], list[dict], list[dict]]:
    """The pipeline of every dataset x retriever, submitted to ``sub`` (Prefect tasks, or cached
    lookups): returns (results, failures, stage report). Datasets run in parallel; retrieval and
    evaluation start as soon as their inputs exist; a failing stage fails only the pairs below it.
    ``while_waiting`` is called once every stage is submitted, as the wait for them begins."""
    graph = ExperimentGraph(cfg, sub)
    for ds in cfg.datasets:
        raw = graph.download(ds)
        prepared = graph.prepare(ds, raw)
        graph.subsample(ds, prepared)
    for ds, corpus in graph.prepared():
        for r in cfg.retrievers:
            indexes = graph.index(ds, r, corpus)
            rewrites = graph.rewrite(ds, r)
            run = graph.retrieve(ds, r, corpus, indexes, rewrites)
            graph.evaluate(ds, r, indexes, rewrites, run)
    return graph.outcome(while_waiting)


def cached_experiment(cfg: ExperimentConfig) -> tuple[list[dict], list[dict]] | None:
    """``(results, report)`` when every stage of the experiment is in the store, else None (looked up
    without Prefect)."""
    try:
        results, failures, report = experiment_stages(cfg, CachedOnly(Store(cfg.store)))
    except (NotCached, RbenchError):  # missing, or refused by a check: the flow builds it or reports it
        return None
    return (results, report) if not failures else None
