"""Search spaces over a retriever's parameters, the strategies that sample them, and the search
section of an experiment file.

Every strategy is deterministic for a seed and proposes trials in the same order whatever
the budget, so a search rerun with a larger budget repeats (and finds cached) every
finished trial before trying new ones.
"""

from __future__ import annotations

import itertools
import re
from pathlib import Path
from typing import Any, Callable, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, PositiveInt, ValidationError, field_validator, model_validator

from rbench.config import ExperimentConfig, RetrieverConfig, parse_config
from rbench.core.configfile import format_validation_error, load_mapping
from rbench.core.errors import ConfigError, MissingExtraError
from rbench.core.locations import door_settings, given_mirror, given_store, given_tracking_uri
from rbench.evaluation.metrics_ir import is_ir_measure, parse_measure
from rbench.evaluation.names import METRICS


class Dimension(BaseModel):
    """One parameter's range: ``low``..``high`` (floats, or ints with ``integer``), or ``choices``."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    low: float | None = None
    """The lowest value of a range."""
    high: float | None = None
    """The highest value of a range."""
    integer: bool = False
    """Whether a range takes whole numbers only."""
    choices: list[Any] | None = None
    """The values to try, instead of a range."""

    @model_validator(mode="after")
    def _check(self) -> "Dimension":
        if self.choices is not None:
            if not self.choices:
                raise ValueError("choices must not be empty")
        elif self.low is None or self.high is None or self.low > self.high:
            raise ValueError(f"a range needs low <= high (got low={self.low}, high={self.high}), or give choices")
        return self

    def grid(self, points: int) -> list[Any]:
        """Evenly spaced values (every integer or choice when fewer than ``points``)."""
        if self.choices is not None:
            return list(self.choices)
        if self.integer:
            values = range(int(self.low), int(self.high) + 1)
            return list(values) if len(values) <= points else sorted({int(round(v)) for v in np.linspace(self.low, self.high, points)})
        return [round(float(v), 6) for v in np.linspace(self.low, self.high, points)]


class SearchConfig(BaseModel):
    """Which retriever to tune, over which space, how, for how many trials, towards which metric."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    retriever: str
    """The ``label`` of the experiment's retriever to tune."""
    space: dict[str, Dimension] = Field(min_length=1)
    """The settings to vary: each a ``params`` key of that retriever, with its range or choices."""
    strategy: Literal["grid", "random", "tpe"] = "tpe"
    """How trials are proposed: ``grid`` (every combination, in order), ``random`` (uniform draws) or ``tpe`` (Optuna's
    Tree-structured Parzen Estimator)."""
    budget: PositiveInt = 20
    """The most trials run."""
    seed: int = 0
    """The seed of ``random`` and ``tpe`` proposals, so a search can be repeated."""
    grid_points: PositiveInt = 5
    """``grid``: values per range dimension, evenly spaced from ``low`` to ``high``."""
    metric: str = "recall"
    """The measure the search maximises, averaged over the tuning queries: one of rbench's
    (``precision``, ``recall``, ``f1``, ``perfect_recall``, ``ndcg``, ``mrr``, at ``k``) or an
    ir_measures name with its own cut-off (``nDCG@10``, ``AP``, ``P@5``; ``k`` is then unused)."""
    k: PositiveInt = 5
    """The cut-off of one of rbench's measures."""

    @field_validator("metric")
    @classmethod
    def _measure(cls, name: str) -> str:
        if name in METRICS:
            return name
        if is_ir_measure(parse_measure(name)):  # a ValueError names both forms
            return name
        raise ValueError(f"metric {name!r}: give one of rbench's measures by its name alone ({', '.join(METRICS)}; "
                         "its cut-off is k), or an ir_measures name (nDCG@10, AP, P@5)")

    @property
    def ir_measure(self) -> bool:
        """Whether ``metric`` is an ir_measures name (computed on each trial's run file and qrels)."""
        return self.metric not in METRICS

    @property
    def target(self) -> str:
        """The measure maximised, as shown: ``recall@5``, or the ir_measures name."""
        return self.metric if self.ir_measure else f"{self.metric}@{self.k}"

    @property
    def target_key(self) -> str:
        """:attr:`target` as an MLflow metric name (``recall_at_5``, ``nDCG_at_10``)."""
        return re.sub(r"[^\w\-. /:]", "_", self.target.replace("@", "_at_"))


def propose(cfg: SearchConfig, objective: Callable[[dict[str, Any]], float]) -> list[tuple[dict[str, Any], float]]:
    """Evaluate up to ``budget`` trials proposed by the strategy; return (params, value) in order."""
    if cfg.strategy == "grid":
        names = list(cfg.space)
        combos = itertools.product(*(cfg.space[n].grid(cfg.grid_points) for n in names))
        return [(p, objective(p)) for p in (dict(zip(names, c)) for c in itertools.islice(combos, cfg.budget))]
    if cfg.strategy == "random":
        rng = np.random.default_rng(cfg.seed)
        history = []
        for _ in range(cfg.budget):
            params = {n: _sample(d, rng) for n, d in cfg.space.items()}
            history.append((params, objective(params)))
        return history
    try:
        import optuna
    except ImportError:
        raise MissingExtraError("optuna", "search", "Bayesian (TPE) configuration search") from None
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(direction="maximize", sampler=optuna.samplers.TPESampler(seed=cfg.seed))
    history = []

    def trial_fn(trial) -> float:
        params = {n: _suggest(trial, n, d) for n, d in cfg.space.items()}
        value = objective(params)
        history.append((params, value))
        return value

    study.optimize(trial_fn, n_trials=cfg.budget)
    return history


def _sample(d: Dimension, rng) -> Any:
    if d.choices is not None:
        return d.choices[int(rng.integers(len(d.choices)))]
    if d.integer:
        return int(rng.integers(int(d.low), int(d.high) + 1))
    return round(float(rng.uniform(d.low, d.high)), 6)


def _suggest(trial, name: str, d: Dimension) -> Any:
    if d.choices is not None:
        return trial.suggest_categorical(name, d.choices)
    if d.integer:
        return trial.suggest_int(name, int(d.low), int(d.high))
    return round(trial.suggest_float(name, d.low, d.high), 6)


def load_search_config(path: str | Path, mirror: str | None = None, store: str | None = None
                       ) -> tuple[ExperimentConfig, SearchConfig]:
    """An experiment YAML with a ``search:`` section, validated; the tuned retriever must exist. The
    tracking URI, runner and address come from the door, else (the tracking URI) the environment."""
    path = Path(path)
    raw = load_mapping(path, "search config", " with a 'search:' section")
    if "search" not in raw:
        raise ConfigError(f"{path} needs a 'search:' section (retriever, space, strategy, budget, metric, k)")
    search_raw = raw.pop("search")
    cfg = parse_config(raw, base=path.resolve().parent, source=str(path), mirror=given_mirror(mirror),
                       store=given_store(store))
    door = door_settings()
    cfg = cfg.overridden(given_tracking_uri(), door.runner, door.address)
    try:
        search = SearchConfig.model_validate(search_raw)
    except ValidationError as e:
        raise ConfigError(format_validation_error(e, f"{path} (search)")) from None
    labels = [r.label for r in cfg.retrievers]
    if search.retriever not in labels:
        raise ConfigError(f"search.retriever {search.retriever!r} is not a retriever label of {path}; labels: {labels}")
    if not search.ir_measure and search.k not in cfg.metrics.k:
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
