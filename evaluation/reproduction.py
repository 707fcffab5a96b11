"""Published results as shipped data, and a run lined up against them.

A published table (``evaluation/published/<name>.yaml``) holds the numbers a paper, a README
or a regression page prints, with its source, the study config that reproduces it and, per
system and dataset, ``metric@k: value``. :func:`compare` puts a run's per-query scores beside
it: measured mean, published value, delta, a percentile bootstrap 95% interval of the mean
over the run's queries, and whether the published value lies inside that interval.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from datetime import date
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from rbench.core.configfile import validate_file
from rbench.core.errors import ConfigError, RbenchError
from rbench.evaluation.metrics import METRICS

PUBLISHED = Path(__file__).resolve().parent / "published"


class Source(BaseModel):
    """Where the numbers were read: a citation, an address pinned to a version where the
    source has versions, the date read, and per-dataset addresses where each has its own."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    reference: str = Field(min_length=1)
    url: str = Field(pattern=r"^https://")
    read: date
    per_dataset: dict[str, str] = Field(default_factory=dict)


def parse_cell(name: str) -> tuple[str, int]:
    """``"ndcg@10"`` -> ``("ndcg", 10)``; a metric rbench does not compute, or a bad cut-off, is
    a ValueError naming the known metrics."""
    metric, _, k = name.partition("@")
    if metric not in METRICS or not k.isdigit() or int(k) < 1:
        raise ValueError(f"{name!r} is not metric@k with a metric of {', '.join(METRICS)} and k >= 1 (e.g. ndcg@10)")
    return metric, int(k)


class PublishedTable(BaseModel):
    """One published table: ``values[system][dataset]["metric@k"]`` in [0, 1]."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9_.-]*$")
    title: str = Field(min_length=1)
    source: Source
    study: str | None = None
    notes: str = ""
    values: dict[str, dict[str, dict[str, float]]] = Field(min_length=1)

    @field_validator("values")
    @classmethod
    def _cells(cls, values: dict[str, dict[str, dict[str, float]]]) -> dict[str, dict[str, dict[str, float]]]:
        for system, datasets in values.items():
            for dataset, cells in datasets.items():
                for name, value in cells.items():
                    parse_cell(name)
                    if not 0 <= value <= 1 or math.isnan(value):
                        raise ValueError(f"{system}/{dataset}/{name}: {value} is not in [0, 1]; write fractions, "
                                         "not percentages")
        return values

    @model_validator(mode="after")
    def _sources_name_datasets(self) -> "PublishedTable":
        datasets = {d for ds in self.values.values() for d in ds}
        unknown = sorted(set(self.source.per_dataset) - datasets)
        if unknown:
            raise ValueError(f"source.per_dataset names {unknown}, which no value has; the datasets are "
                             f"{sorted(datasets)}")
        return self

    def cells(self) -> list[tuple[str, str, str, int, float]]:
        """``(system, dataset, metric, k, value)`` for every published number, in file order."""
        return [(s, d, *parse_cell(c), v) for s, ds in self.values.items() for d, cs in ds.items()
                for c, v in cs.items()]


def published_names() -> list[str]:
    """The names of the tables rbench ships."""
    return sorted(p.stem for p in PUBLISHED.glob("*.yaml"))


def load_published(name_or_path: str) -> PublishedTable:
    """A shipped table by name (``anserini-bright-bm25``), or a YAML file of the same shape."""
    path = Path(name_or_path)
    if path.suffix not in (".yaml", ".yml"):
        path = PUBLISHED / f"{name_or_path}.yaml"
        if not path.is_file():
            raise ConfigError(f"no published table named {name_or_path!r}; rbench ships {', '.join(published_names())} "
                              "(or pass the path of a YAML file in their shape)")
    table = validate_file(PublishedTable, path, "published table")
    if path.parent == PUBLISHED and table.name != path.stem:
        raise ConfigError(f"published table {path} is named {table.name!r}: name it {path.stem!r} like its file")
    return table


def bootstrap_interval(values: Sequence[float], trials: int = 10_000, seed: int = 0,
                       level: float = 0.95) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean: resample the queries with replacement
    ``trials`` times and take the ``(1 - level) / 2`` and ``(1 + level) / 2`` quantiles (linear
    interpolation) of the resampled means."""
    scores = np.asarray(values, dtype=float)
    if not scores.size:
        raise ValueError("a bootstrap interval needs at least one query's score")
    if trials < 1 or not 0 < level < 1:
        raise ValueError(f"trials must be >= 1 and level in (0, 1); got {trials} and {level}")
    means = np.empty(trials)
    rng = np.random.default_rng(seed)
    for start in range(0, trials, 1000):
        stop = min(trials, start + 1000)
        means[start:stop] = scores[rng.integers(0, scores.size, size=(stop - start, scores.size))].mean(axis=1)
    tail = (1 - level) / 2
    low, high = np.quantile(means, [tail, 1 - tail])
    return float(low), float(high)


@dataclass(frozen=True)
class Cell:
    """One published number beside the run's: ``measured`` and the interval are None when the
    run lacks the dataset, the system or the cut-off (``missing`` says which)."""

    system: str
    dataset: str
    metric: str
    k: int
    published: float
    run_system: str
    run_dataset: str
    measured: float | None = None
    delta: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    inside: bool | None = None
    queries: int = 0
    missing: str = ""


def _renames(pairs: Sequence[str], known: set[str]) -> dict[str, str]:
    """``--map PUBLISHED=RUN`` pairs as a dict; a name the table lacks is an error listing its names."""
    renames = {}
    for pair in pairs:
        published, sep, run = pair.partition("=")
        if not sep or not published or not run:
            raise RbenchError(f"--map {pair!r} is not PUBLISHED=RUN (e.g. --map biology=bright-biology)")
        if published not in known:
            raise RbenchError(f"--map {pair!r}: the published table has no system or dataset {published!r}; it "
                              f"has {', '.join(sorted(known))}")
        renames[published] = run
    return renames


def compare(table: PublishedTable, scores: Mapping[tuple[str, str], Mapping[tuple[str, int, str], float]],
            maps: Sequence[str] = (), trials: int = 10_000, seed: int = 0) -> list[Cell]:
    """Each published cell beside the run's per-query ``scores[(dataset, retriever)][(metric,
    k, query_id)]``. A published system or dataset is looked up under its own name, or the name
    ``maps`` (``PUBLISHED=RUN`` strings, systems and datasets alike) gives it."""
    if trials < 1:
        raise RbenchError(f"--trials {trials}: the bootstrap needs at least one resample (default 10,000)")
    cells = table.cells()
    renames = _renames(maps, {s for s, *_ in cells} | {d for _, d, *_ in cells})
    run_pairs = set(scores)
    out = []
    for system, dataset, metric, k, published in cells:
        run_system, run_dataset = renames.get(system, system), renames.get(dataset, dataset)
        base = dict(system=system, dataset=dataset, metric=metric, k=k, published=published,
                    run_system=run_system, run_dataset=run_dataset)
        if (run_dataset, run_system) not in run_pairs:
            missing = (f"the run has no dataset {run_dataset!r}" if all(d != run_dataset for d, _ in run_pairs)
                       else f"the run has no retriever {run_system!r} on {run_dataset!r}")
            out.append(Cell(**base, missing=missing))
            continue
        per_query = [v for (m, kk, _), v in scores[(run_dataset, run_system)].items() if m == metric and kk == k]
        if not per_query:
            out.append(Cell(**base, missing=f"the run has no {metric}@{k} (add {k} to metrics.k)"))
            continue
        measured = float(np.mean(per_query))
        low, high = bootstrap_interval(per_query, trials, seed)
        out.append(Cell(**base, measured=measured, delta=measured - published, ci_low=low, ci_high=high,
                        inside=low <= published <= high, queries=len(per_query)))
    return out


def document(table: PublishedTable, cells: Sequence[Cell], run: str, trials: int, seed: int) -> dict:
    """The comparison as one JSON-able document (logged to MLflow as ``reproduction/<name>.json``)."""
    return {"run": run, "against": table.name, "title": table.title, "source": table.source.model_dump(mode="json"),
            "bootstrap": {"trials": trials, "seed": seed, "level": 0.95}, "cells": [asdict(c) for c in cells]}


HEADER = ("system", "dataset", "metric", "published", "measured", "delta", "95% interval", "inside", "queries")


def rows(doc: Mapping) -> list[list[str]]:
    """A comparison document's cells as table rows under :data:`HEADER`; a run's own name for
    a published system or dataset follows it in brackets."""
    out = []
    for c in doc["cells"]:
        names = [c["system"] if c["run_system"] == c["system"] else f"{c['system']} ({c['run_system']})",
                 c["dataset"] if c["run_dataset"] == c["dataset"] else f"{c['dataset']} ({c['run_dataset']})",
                 f"{c['metric']}@{c['k']}", f"{c['published']:.4f}"]
        if c["measured"] is None:
            out.append(names + [c["missing"], "", "", "", ""])
        else:
            interval = f"[{c['ci_low']:.4f}, {c['ci_high']:.4f}]"
            out.append(names + [f"{c['measured']:.4f}", f"{c['delta']:+.4f}", interval,
                                "yes" if c["inside"] else "no", str(c["queries"])])
    return out


def summary(doc: Mapping) -> str:
    """One line: how many measured cells hold the published value, how many are not in the run."""
    measured = [c for c in doc["cells"] if c["measured"] is not None]
    return (f"{sum(bool(c['inside']) for c in measured)} of {len(measured)} measured cells hold the published value "
            f"inside their 95% interval; {len(doc['cells']) - len(measured)} of {len(doc['cells'])} published cells "
            "are not in the run")


def caption(doc: Mapping) -> str:
    """The run, where the published numbers come from, and how the interval was drawn."""
    source, boot = doc["source"], doc["bootstrap"]
    return (f"Run {doc['run']}. Published: {source['reference']} ({source['url']}, read {source['read']}). "
            f"Interval: percentile bootstrap of the mean over the run's queries ({boot['trials']} resamples, seed "
            f"{boot['seed']}).")
