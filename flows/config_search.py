"""Configuration search over one retriever's parameters (RAGO-style): grid, random or TPE.

Each trial is an ordinary cached pipeline run of that retriever, so trials that share an
index (BM25's k1/b, dense thresholds) build it once, and a rerun with a larger budget finds
every finished trial cached.
"""

from __future__ import annotations

from statistics import fmean

from prefect import flow

from rbench.config.search import load_search_config, propose, trial_config
from rbench.core.secrets import redact
from rbench.experiment import preflight, reopened
from rbench.flows.benchmark import run_with_runner
from rbench.results import SearchSummary
from rbench.tasks.evaluate import read_aggregate, read_ir_values
from rbench.core.configfile import flatten
from rbench.tracking.write import log_search


@flow(name="rbench-config-search", log_prints=True)
def config_search(config_path: str, mirror: str | None = None, store: str | None = None) -> SearchSummary:
    """Run the search; log each trial as an MLflow child run; return the best setting and history.
    Each trial's stages run on the task runner of the experiment's ``execution`` section."""
    opened = None if mirror is not None or store is not None else reopened("search", config_path)
    if opened is None:
        opened = load_search_config(config_path, mirror, store)
        preflight(opened[0])
    cfg, search = opened
    trials: list[dict] = []

    def objective(params: dict) -> float:
        results, failures, report = run_with_runner(trial_config(cfg, search, params))
        if failures:
            raise RuntimeError(f"search trial {params} failed: {failures[0].error}")
        if search.ir_measure:
            value = fmean(fmean(read_ir_values(r.evaluation, search.metric)) for r in results)
        else:
            value = fmean(a["value"] for r in results for a in read_aggregate(r.evaluation)
                          if a["metric"] == search.metric and a["k"] == search.k)
        trials.append({"trial": len(trials), "params": params, "value": value,
                       "stages_ran": sum(1 for s in report if s.status == "ran")})
        return value

    propose(search, objective)
    best = max(trials, key=lambda t: t["value"])
    run_id = log_search(cfg, search, trials, best, subject=search.retriever, target=search.target_key,
                        params={"retriever": search.retriever,
                                **flatten("execution", cfg.execution.model_dump(mode="json"))})
    return SearchSummary(best=best, trials=tuple(trials), mlflow_run_id=run_id, tracking_uri=redact(cfg.tracking_uri()))
