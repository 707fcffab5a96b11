"""Configuration search over one retriever's parameters (RAGO-style): grid, random or TPE.

Each trial is an ordinary cached pipeline run of that retriever, so trials that share an
index (BM25's k1/b, dense thresholds) build it once, and a rerun with a larger budget finds
every finished trial cached.
"""

from __future__ import annotations

from pathlib import Path
from statistics import fmean

from prefect import flow
from pydantic import ValidationError

from rbench.config import ExperimentConfig, RetrieverConfig, parse_config
from rbench.core.configfile import format_validation_error, load_mapping
from rbench.core.errors import ConfigError
from rbench.core.locations import ENV_MIRROR, ENV_STORE, ENV_TRACKING, flag_or_env
from rbench.flows.benchmark import run_stages
from rbench.tasks.evaluate import read_aggregate
from rbench.tasks.search_space import SearchConfig, propose
from rbench.tasks.track import log_search


def load_search_config(path: str | Path, mirror: str | None = None, store: str | None = None
                       ) -> tuple[ExperimentConfig, SearchConfig]:
    """An experiment YAML with a ``search:`` section, validated; the tuned retriever must exist."""
    path = Path(path)
    raw = load_mapping(path, "search config", " with a 'search:' section")
    if "search" not in raw:
        raise ConfigError(f"{path} needs a 'search:' section (retriever, space, strategy, budget, metric, k)")
    search_raw = raw.pop("search")
    tracking_uri = flag_or_env(None, ENV_TRACKING)
    if tracking_uri:
        raw["mlflow"] = {**(raw.get("mlflow") or {}), "tracking_uri": tracking_uri}
    cfg = parse_config(raw, base=path.resolve().parent, source=str(path), mirror=flag_or_env(mirror, ENV_MIRROR),
                       store=flag_or_env(store, ENV_STORE))
    try:
        search = SearchConfig.model_validate(search_raw)
    except ValidationError as e:
        raise ConfigError(format_validation_error(e, f"{path} (search)")) from None
    labels = [r.label for r in cfg.retrievers]
    if search.retriever not in labels:
        raise ConfigError(f"search.retriever {search.retriever!r} is not a retriever label of {path}; labels: {labels}")
    if search.k not in cfg.metrics.k:
        raise ConfigError(f"search.k {search.k} is not among metrics.k {cfg.metrics.k}: add it there")
    return cfg, search


def trial_config(cfg: ExperimentConfig, search: SearchConfig, params: dict) -> ExperimentConfig:
    """The experiment restricted to the tuned retriever with ``params`` (``depth`` is the experiment's)."""
    base = next(r for r in cfg.retrievers if r.label == search.retriever)
    retriever_params = {**base.params, **{k: v for k, v in params.items() if k != "depth"}}
    try:
        retriever = RetrieverConfig.model_validate({"name": base.name, "label": base.label, "params": retriever_params})
        return ExperimentConfig.model_validate({**cfg.model_dump(), "retrievers": [retriever.model_dump()],
                                                "depth": params.get("depth", cfg.depth)})
    except ValidationError as e:
        raise ConfigError(format_validation_error(e, f"search trial {params}")) from None


@flow(name="rbench-config-search", log_prints=True)
def config_search(config_path: str, mirror: str | None = None, store: str | None = None) -> dict:
    """Run the search; log each trial as an MLflow child run; return the best setting and history."""
    cfg, search = load_search_config(config_path, mirror, store)
    trials: list[dict] = []

    def objective(params: dict) -> float:
        results, failures, report = run_stages(trial_config(cfg, search, params))
        if failures:
            raise RuntimeError(f"search trial {params} failed: {failures[0]['error']}")
        value = fmean(a["value"] for r in results for a in read_aggregate(r["evaluation"])
                      if a["metric"] == search.metric and a["k"] == search.k)
        trials.append({"trial": len(trials), "params": params, "value": value,
                       "stages_ran": sum(1 for s in report if s["status"] == "ran")})
        return value

    propose(search, objective)
    best = max(trials, key=lambda t: t["value"])
    run_id = log_search(cfg, search, trials, best)
    return {"best": best, "trials": trials, "mlflow_run_id": run_id, "tracking_uri": cfg.tracking_uri()}
