"""Published results as shipped data, and a run lined up against them.

A published table (``evaluation/published/<name>.yaml``) holds the numbers a paper, a README
or a regression page prints, with its source, the study config that reproduces it and, per
system and dataset, ``metric@k: value``; optionally how many queries each published mean is
over (stated, or inferred and marked so), what each system and dataset must be in a run to be
comparable, the decimals printed, throughput and printed averages. :func:`compare` puts a
run's per-query scores beside it: measured mean, published value, delta, a percentile
bootstrap 95% interval of the run's mean and, where the published sample size is known, a 95%
interval of the difference that accounts for both samples and the published rounding. Each
cell gets a verdict: ``inside``, ``outside``, ``not comparable`` (with the reason) or
``missing``; a cell whose run is the same computation as the published one (the table's ``exact``
requirements: a model-free method, the same corpus form, protocol and query sample) gets
``equal`` (at the printed digits) or ``off by q of N queries`` instead of an interval. Reviewed
notes (``published/notes/<name>.yaml``) explain measured deviations.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from datetime import date
from pathlib import Path
from typing import Mapping, Protocol, Sequence

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from rbench.core.configfile import validate_file
from rbench.core.errors import ConfigError, RbenchError
from rbench.evaluation.names import METRICS

PUBLISHED = Path(__file__).resolve().parent / "published"


class Source(BaseModel):
    """Where the numbers were read: a citation, an address pinned to a version where the
    source has versions, the date read, and per-dataset addresses where each has its own."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    reference: str = Field(min_length=1)
    url: str = Field(pattern=r"^https://")
    read: date
    per_dataset: dict[str, str] = Field(default_factory=dict)
    table: str | None = None
    columns: str | None = None


class Sample(BaseModel):
    """How many queries a published mean is over: ``n``, whether the source states it or it is
    ``inferred`` from the printed values, and the ``basis`` of that number."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    n: int = Field(gt=0)
    inferred: bool = False
    basis: str = Field(min_length=1)


class Erratum(BaseModel):
    """A published cell, kept as printed, that breaks an identity every correct table holds
    (``cell``: ``system/dataset@k``), and which identity."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    cell: str = Field(pattern=r"^[^/]+/[^@]+@\d+$")
    text: str = Field(min_length=1)


class Rounded(BaseModel):
    """A printed cell that rounds another table's already rounded value: ``metric`` (``metric@k``)
    of ``system`` on ``dataset`` is ``value`` as ``source`` printed it at ``decimals``. Rounding twice
    can move a value by a unit (a mean of .0947 is printed .095, then .10, where it rounds to .09 at
    once), so a run is compared with ``value`` at ``decimals``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    system: str = Field(min_length=1)
    dataset: str = Field(min_length=1)
    metric: str
    value: float = Field(ge=0, le=1)
    decimals: int = Field(ge=1, le=6)
    source: str = Field(min_length=1)

    @field_validator("metric")
    @classmethod
    def _metric_at_k(cls, metric: str) -> str:
        parse_cell(metric)
        return metric


class Requirement(BaseModel):
    """What a published system or dataset was: a ``description``, and the run parameters (as
    MLflow logs them on a child run, e.g. ``retriever.params.model``) that must all hold for a
    run's cell to be comparable; ``any_of``: alternative sets of such parameters, one of which
    must hold (the same corpus built by two adapters)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    description: str = ""
    requires: dict[str, str | int | float | bool] = Field(default_factory=dict)
    any_of: list[dict[str, str | int | float | bool]] = Field(default_factory=list)
    exact: list[dict[str, str | int | float | bool]] | None = None
    """Alternative sets of further run parameters, one of which makes a comparable cell the same
    computation as the published one (``[{}]``: whenever it is comparable); unset: never (a stand-in
    model). A cell is exact when its system and its dataset both are."""


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
    protocol: str | None = None
    decimals: int | None = Field(None, ge=1, le=6)
    queries: dict[str, Sample] = Field(default_factory=dict)
    systems: dict[str, Requirement] = Field(default_factory=dict)
    datasets: dict[str, Requirement] = Field(default_factory=dict)
    values: dict[str, dict[str, dict[str, float]]] = Field(min_length=1)
    averages: dict[str, dict[str, float]] = Field(default_factory=dict)
    qps: dict[str, dict[str, float | None]] = Field(default_factory=dict)
    errata: list[Erratum] = Field(default_factory=list)
    rounded: list[Rounded] = Field(default_factory=list)

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
        systems = set(self.values)
        for field, names, known in (("source.per_dataset", self.source.per_dataset, datasets),
                                    ("queries", set(self.queries) - {"*"}, datasets),
                                    ("datasets", self.datasets, datasets), ("systems", self.systems, systems),
                                    ("averages", self.averages, systems), ("qps", self.qps, systems)):
            unknown = sorted(set(names) - known)
            if unknown:
                raise ValueError(f"{field} names {unknown}, which no value has; the table has {sorted(known)}")
        for system, cells in self.averages.items():
            for name in cells:
                parse_cell(name)
        for r in self.rounded:
            if r.metric not in self.values.get(r.system, {}).get(r.dataset, {}):
                raise ValueError(f"rounded names {r.system}/{r.dataset}/{r.metric}, which the table does not print")
        return self

    def rounded_from(self, system: str, dataset: str, metric: str, k: int) -> "Rounded | None":
        """The value a printed cell rounds again, where the table lists one."""
        return next((r for r in self.rounded if (r.system, r.dataset, r.metric) == (system, dataset, f"{metric}@{k}")),
                    None)

    def sample(self, dataset: str) -> Sample | None:
        """The published sample of ``dataset``'s cells (its own entry, else ``*``), or None."""
        return self.queries.get(dataset) or self.queries.get("*")

    def rounding(self) -> float:
        """Half a unit of the last printed decimal (0 when the table does not say)."""
        return 0.5 * 10.0 ** -self.decimals if self.decimals else 0.0

    def cells(self) -> list[tuple[str, str, str, int, float]]:
        """``(system, dataset, metric, k, value)`` for every published number, in file order."""
        return [(s, d, *parse_cell(c), v) for s, ds in self.values.items() for d, cs in ds.items()
                for c, v in cs.items()]


def shipped_file(name_or_path: str, folder: Path, what: str) -> Path:
    """The YAML file of a shipped ``what`` named ``name_or_path`` in ``folder``, or the path itself
    when it names a YAML file; an unknown name is a ConfigError listing the shipped ones."""
    path = Path(name_or_path)
    if path.suffix in (".yaml", ".yml"):
        return path
    path = folder / f"{name_or_path}.yaml"
    if not path.is_file():
        import difflib

        names = sorted(p.stem for p in folder.glob("*.yaml"))
        close = difflib.get_close_matches(name_or_path, names, n=1, cutoff=0.75)
        guess = f" Did you mean {close[0]!r}?" if close else ""
        raise ConfigError(f"no {what} named {name_or_path!r};{guess} rbench ships {', '.join(names)} (or pass the path "
                          "of a YAML file in their shape)")
    return path


def consistent_sample_sizes(shares: Sequence[float], decimals: int, limit: int) -> list[int]:
    """Every query count ``n <= limit`` for which each printed share (a fraction of queries, such
    as perfect recall, rounded to ``decimals``) is some ``j / n``: how a published table's sample
    size is inferred when the source does not state it."""
    half = 0.5 * 10.0 ** -decimals + 1e-9
    return [n for n in range(1, limit + 1) if all(abs(round(v * n) / n - v) <= half for v in shares)]


def published_names() -> list[str]:
    """The names of the tables rbench ships."""
    return sorted(p.stem for p in PUBLISHED.glob("*.yaml"))


def load_published(name_or_path: str) -> PublishedTable:
    """A shipped table by name (``anserini-bright-bm25``), or a YAML file of the same shape."""
    path = shipped_file(name_or_path, PUBLISHED, "published table")
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
    published_queries: int | None = None
    published_queries_inferred: bool = False
    diff_low: float | None = None
    diff_high: float | None = None
    verdict: str = "missing"
    reason: str = ""
    note: str = ""
    exact: bool = False
    off_by: int | None = None


def _renames(pairs: Sequence[str], known: set[str]) -> dict[str, str]:
    """``--map PUBLISHED=RUN`` pairs as a dict; either name may hold ``=`` (Table 9's
    ``spider[granularity=schema]``): the pair is split at the one ``=`` that leaves a published name on its
    left. A name the table lacks is an error listing its names."""
    renames = {}
    for pair in pairs:
        cuts = [i for i, c in enumerate(pair) if c == "=" and 0 < i < len(pair) - 1]
        if not cuts:
            raise RbenchError(f"--map {pair!r} is not PUBLISHED=RUN (e.g. --map biology=bright-biology)")
        fits = [i for i in cuts if pair[:i] in known]
        if len(fits) > 1:
            raise RbenchError(f"--map {pair!r} splits into a published name and a run name in {len(fits)} ways: "
                              "rename the run so that its name holds no published name followed by '='")
        cut = fits[0] if fits else cuts[0]
        published, run = pair[:cut], pair[cut + 1:]
        if published not in known:
            raise RbenchError(f"--map {pair!r}: the published table has no system or dataset {published!r}; it "
                              f"has {', '.join(sorted(known))}")
        renames[published] = run
    return renames


def difference_interval(per_query: Sequence[float], published: float, n_published: int,
                        rounding: float = 0.0, z: float = 1.959964) -> tuple[float, float]:
    """A 95% interval of (run mean - published mean) when both are means over independent query
    samples: ``delta +- z * sqrt(s_run^2 / n_run + s_pub^2 / n_pub)``, widened by the published
    value's rounding. A binary metric (every run score 0 or 1) takes the published sample's
    variance as ``p (1 - p)`` of the published value; otherwise the published sample is assumed
    to spread like the run's (its per-query scores are not published)."""
    scores = np.asarray(per_query, dtype=float)
    if not scores.size or n_published < 1:
        raise ValueError("a difference interval needs the run's scores and a published sample size >= 1")
    mean = float(scores.mean())
    var_run = float(scores.var(ddof=1)) if scores.size > 1 else 0.0
    binary = bool(np.all((scores == 0) | (scores == 1)))
    var_pub = published * (1 - published) if binary else var_run
    half = z * math.sqrt(var_run / scores.size + var_pub / n_published) + rounding
    return mean - published - half, mean - published + half


def queries_off(per_query: Sequence[float], published: float, half_unit: float) -> int:
    """The fewest queries whose score must change to bring the mean of ``per_query`` (each in
    [0, 1]) within ``half_unit`` of ``published``: each changed query moves the sum by at most
    its room (``1 - v`` up, ``v`` down), so the queries with the most room are changed first.
    0 when the mean already rounds to the published value."""
    scores = np.asarray(per_query, dtype=float)
    total, n = float(scores.sum()), scores.size
    low, high = n * (published - half_unit), n * (published + half_unit)
    eps = 1e-9 * max(1, n)
    if low - eps <= total <= high + eps:
        return 0
    need, room = (low - total, np.sort(1 - scores)[::-1]) if total < low else (total - high, np.sort(scores)[::-1])
    moved = np.cumsum(room)
    reach = np.flatnonzero(moved >= need - eps)
    return int(reach[0]) + 1 if reach.size else n


def exact_verdict(per_query: Sequence[float], published: float, decimals: int) -> tuple[str, int]:
    """``("equal", 0)`` when the mean of ``per_query`` rounds to ``published`` at ``decimals``,
    else ``("off by q of N queries", q)`` with q from :func:`queries_off`."""
    q = queries_off(per_query, published, 0.5 * 10.0 ** -decimals)
    return ("equal", 0) if q == 0 else (f"off by {q} of {len(per_query)} queries", q)


EXEMPT: dict[str, str] = {
    "dataset.name": "the dataset's name in results",
    "retriever.label": "the retriever's name in results",
    "dataset.max_missing_gold": "a gate: it refuses a dataset, never changes a number of one it accepts",
    "dataset.max_object_bytes": "a gate: it refuses a dataset, never changes a number of one it accepts",
    "dataset.params.path": "the folder the files are read from: which benchmark they hold is the published "
                           "dataset's name, and their bytes the download stage's digest",
    "metrics.k": "the cut-offs reported: a cell reads its own k, and one the run lacks is reported missing",
    "*.device": "where a model runs (the same weights and inputs)",
    "*.batch_size": "how many inputs a model takes at once",
    "*.threads": "CPU threads a backend uses",
    "*.max_concurrency": "requests in flight to an LLM server",
    "*.timeout": "how long a request may take before it is retried",
    "*.max_retries": "how often a failed request is retried",
    "*.api_key_env": "the name of the variable that holds a secret",
    "*.basic_auth_env": "the name of the variable that holds a secret",
    "*.on_disk": "whether a FAISS index is memory-mapped: the same vectors, searched the same way",
}
"""The settings that cannot change a published number, each with its reason: the one list
:func:`differences` skips (a key, or ``*.name`` for that last part under any prefix). Every other
resolved setting of a run is part of the computation."""


def exempt(key: str) -> str:
    """Why setting ``key`` (``retriever.params.first_stage.params.device``) cannot change a number, or ""."""
    return EXEMPT.get(key) or EXEMPT.get(f"*.{key.rsplit('.', 1)[-1]}", "")


class Settings(Protocol):
    """What the comparison asks of the layers above it (``rbench.config.exact``): a rule's stated
    settings completed as a run completes its own, and the settings a named protocol fixes."""

    def resolved(self, prefix: str, stated: Mapping[str, object], run: Mapping[str, str],
                 protocol: str | None = None) -> Mapping[str, object]:
        """The complete settings under ``prefix`` (``dataset`` or ``retriever``), flattened as a child run
        logs them, of the component that ``stated`` (``retriever.name``, ``retriever.params.k1``, ...)
        describes, every unstated setting at the default an experiment under ``protocol`` gives it;
        ``run`` lends the exempt values a validation needs and no rule can state (a BEIR folder)."""
        ...

    def protocol(self, name: str) -> Mapping[str, object]:
        """The parent-run settings (``depth``, ``metrics.recall_denominator``, ...) that protocol ``name`` fixes."""
        ...


_UNSET = object()


def _shown(value: object) -> str:
    return "unset" if value is _UNSET else str(value)


def differences(rule: Mapping[str, object], run: Mapping[str, str], settings: Settings,
                protocol: str | None = None) -> list[str]:
    """Every resolved setting, bar :data:`EXEMPT`, where a child run's logged ``run`` params differ from
    the computation ``rule`` states (``key: the published computation has X, the run Y``): the rule's
    dataset and retriever completed by ``settings`` at their defaults under the table's ``protocol``, so
    that a setting the rule does not name is compared too, a new one included."""
    out = []
    for prefix in ("dataset", "retriever"):
        stated = {k: v for k, v in rule.items() if k.startswith(f"{prefix}.")}
        try:
            reference = {k: str(v) for k, v in settings.resolved(prefix, stated, run, protocol).items()}
        except (ValueError, RbenchError) as e:
            given = ", ".join(f"{k} = {v}" for k, v in stated.items()) or "no settings"
            out.append(f"the published {prefix} ({given}) cannot be resolved here: {e}")
            continue
        ran = {k: v for k, v in run.items() if k.startswith(f"{prefix}.")}
        for key in sorted(set(reference) | set(ran)):
            want, got = reference.get(key, _UNSET), ran.get(key, _UNSET)
            if not exempt(key) and (want is _UNSET or got is _UNSET or str(want) != str(got)):
                out.append(f"{key}: the published computation has {_shown(want)}, the run {_shown(got)}")
    return out


def _merged(*parts: Mapping[str, object]) -> dict[str, object] | None:
    """The union of ``parts``, or None when two of them give one key different values."""
    out: dict[str, object] = {}
    for part in parts:
        for key, value in part.items():
            if key in out and str(out[key]) != str(value):
                return None
            out[key] = value
    return out


def _options(rule: Requirement) -> list[dict[str, object]]:
    """A rule's whole computations: each ``exact`` option with its ``requires`` and the ``any_of``
    option it agrees with (the adapter's ``split``, say, that the exact option leaves to ``any_of``)."""
    return [merged for option in rule.exact or [] for alternative in rule.any_of or [{}]
            if (merged := _merged(rule.requires, alternative, option)) is not None]


def exact_rules(table: "PublishedTable", system: str, dataset: str) -> list[dict[str, object]]:
    """The alternative whole computations a cell's ``exact`` rules state: each of its system's with
    each of its dataset's (none when either has no ``exact``: a stand-in model)."""
    sys_rule, ds_rule = table.systems.get(system), table.datasets.get(dataset)
    if sys_rule is None or ds_rule is None or sys_rule.exact is None or ds_rule.exact is None:
        return []
    return [merged for s in _options(sys_rule) for d in _options(ds_rule) if (merged := _merged(s, d)) is not None]


BEFORE = {"metrics.ties": "retrieved"}
"""Parent-run settings added after runs were logged, read at the value every earlier run computed with."""


def protocol_differences(table: "PublishedTable", parent: Mapping[str, str], settings: Settings) -> str:
    """Why a run's parent params do not evaluate as the table's protocol does ("" when they do):
    judged by what the protocol fixes (depth, metric definitions, query sample), not by its name."""
    name = table.protocol or "standard"  # a table of no protocol is scored with the default definitions
    for key, want in settings.protocol(name).items():
        got = parent.get(key, BEFORE.get(key))
        if exempt(key) or str(got) == str(want) or (got is None and not table.protocol):
            continue
        fix = f"set protocol: {name} in the experiment file" if table.protocol else f"remove {key} from the file"
        return (f"the published cells follow protocol {name!r}, which fixes {key} = {want}; the run has "
                f"{'none' if got is None else got} ({fix})")
    return ""


def unmet(requirement: "Requirement | None", params: Mapping[str, str], what: str) -> str:
    """Why a run's child-run ``params`` do not meet a published system's or dataset's requirements ("" if they do)."""
    if requirement is None:
        return ""
    if requirement.any_of and not any(all(str(params.get(k)) == str(v) for k, v in option.items())
                                      for option in requirement.any_of):
        options = " or ".join(", ".join(f"{k} = {v}" for k, v in o.items()) for o in requirement.any_of)
        return f"{what}: the published cell has {options}; the run has none of these ({requirement.description})"
    for key, wanted in requirement.requires.items():
        got = params.get(key)
        if got is None or str(got) != str(wanted):
            why = f"{what}: the published cell has {key} = {wanted}, the run {'does not set it' if got is None else got}"
            return f"{why} ({requirement.description})" if requirement.description else why
    return ""


def compare(table: PublishedTable, scores: Mapping[tuple[str, str], Mapping[tuple[str, int, str], float]],
            maps: Sequence[str] = (), trials: int = 10_000, seed: int = 0,
            params: Mapping[tuple[str, str], Mapping[str, str]] | None = None,
            parent: Mapping[str, str] | None = None, settings: Settings | None = None,
            notes: Sequence["Note"] = ()) -> list[Cell]:
    """Each published cell beside the run's per-query ``scores[(dataset, retriever)][(metric,
    k, query_id)]``. A published system or dataset is looked up under its own name, or the name
    ``maps`` (``PUBLISHED=RUN`` strings, systems and datasets alike) gives it. ``params``: each
    child run's logged parameters, checked against the table's system and dataset
    requirements, and for a cell with ``exact`` rules every resolved setting against the rule's
    computation (:func:`differences`); ``parent``: the parent run's params, checked against what the
    table's protocol fixes; ``settings`` resolves both (needed with either). ``notes``: reviewed
    notes on measured deviations, attached to the cells they name."""
    if (params is not None or parent is not None) and settings is None:
        raise ValueError("compare: params or parent given without settings to resolve the published rules "
                         "(pass rbench.config.exact.SETTINGS)")
    if trials < 1:
        raise RbenchError(f"--trials {trials}: the bootstrap needs at least one resample (default 10,000)")
    cells = table.cells()
    renames = _renames(maps, {s for s, *_ in cells} | {d for _, d, *_ in cells})
    run_pairs = set(scores)
    out = []
    for system, dataset, metric, k, published in cells:
        run_system, run_dataset = renames.get(system, system), renames.get(dataset, dataset)
        sample = table.sample(dataset)
        note = next((f"{system} on {dataset}: {n.text} Measured with: {n.command}" for n in notes
                     if n.matches(system, dataset, metric, k)), "")
        base = dict(system=system, dataset=dataset, metric=metric, k=k, published=published,
                    run_system=run_system, run_dataset=run_dataset, note=note,
                    published_queries=sample.n if sample else None,
                    published_queries_inferred=bool(sample and sample.inferred))
        if (run_dataset, run_system) not in run_pairs:
            missing = (f"the run has no dataset {run_dataset!r}" if all(d != run_dataset for d, _ in run_pairs)
                       else f"the run has no retriever {run_system!r} on {run_dataset!r}")
            out.append(Cell(**base, missing=missing, reason=missing))
            continue
        per_query = [v for (m, kk, _), v in scores[(run_dataset, run_system)].items() if m == metric and kk == k]
        if not per_query:
            missing = f"the run has no {metric}@{k} (add {k} to metrics.k)"
            out.append(Cell(**base, missing=missing, reason=missing))
            continue
        measured = float(np.mean(per_query))
        low, high = bootstrap_interval(per_query, trials, seed)
        child = (params or {}).get((run_dataset, run_system), {})
        reason = protocol_differences(table, parent, settings) if parent is not None and settings else ""
        reason = reason or unmet(table.systems.get(system), child, system) or unmet(
            table.datasets.get(dataset), child, dataset)
        diff_low = diff_high = None
        exact, differs = False, ""
        rules = exact_rules(table, system, dataset) if table.decimals is not None else []
        if not reason and rules and settings is not None:
            if sample is None or sample.inferred:
                differs = "the published sample size is not stated, so the cells cannot be matched query for query"
            elif len(per_query) != sample.n:
                differs = f"the run scores {len(per_query)} queries, the published cells {sample.n}"
            else:
                nearest = min((differences(rule, child, settings, table.protocol) for rule in rules), key=len)
                exact = not nearest
                differs = "; ".join(nearest[:3]) + (f"; and {len(nearest) - 3} more" if len(nearest) > 3 else "")
        again = table.rounded_from(system, dataset, metric, k)
        if exact:
            value, decimals = (again.value, again.decimals) if again else (published, table.decimals or 0)
            verdict, off_by = exact_verdict(per_query, value, decimals)
            why = (f"the printed {published:g} rounds {again.source}'s {again.value:g} again; the run's mean "
                   f"{measured:.4f} is judged against {again.value:g} at {again.decimals} decimals") if again else ""
            out.append(Cell(**base, measured=measured, delta=measured - published, ci_low=low, ci_high=high,
                            inside=off_by == 0, queries=len(per_query), verdict=verdict, exact=True, off_by=off_by,
                            reason=why))
            continue
        value, rounding = (again.value, 0.5 * 10.0 ** -again.decimals) if again else (published, table.rounding())
        if sample is not None:
            low_value, high_value = difference_interval(per_query, value, sample.n, rounding)
            held = low_value <= 0 <= high_value
            diff_low, diff_high = low_value + value - published, high_value + value - published
        else:
            held = low - rounding <= value <= high + rounding
        verdict = "not comparable" if reason else ("inside" if held else "outside")
        out.append(Cell(**base, measured=measured, delta=measured - published, ci_low=low, ci_high=high,
                        inside=held, queries=len(per_query), diff_low=diff_low, diff_high=diff_high,
                        verdict=verdict, reason=reason or (f"not the published computation: {differs}" if differs
                                                           else "")))
    return out


class Note(BaseModel):
    """A reviewed note on a measured deviation: the cells it explains (``systems``,
    ``datasets``, ``cells`` as ``metric@k``; empty means all), its text, the command that
    measured it, and the variants it measured (free-form rows)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    systems: list[str] = Field(default_factory=list)
    datasets: list[str] = Field(default_factory=list)
    cells: list[str] = Field(default_factory=list)
    text: str = Field(min_length=1)
    command: str = Field(min_length=1)
    measured: list[dict[str, str | int | float]] = Field(default_factory=list)
    date: date

    @field_validator("cells")
    @classmethod
    def _metric_at_k(cls, cells: list[str]) -> list[str]:
        for cell in cells:
            parse_cell(cell)
        return cells

    def matches(self, system: str, dataset: str, metric: str, k: int) -> bool:
        """Whether this note speaks of the cell."""
        return ((not self.systems or system in self.systems) and (not self.datasets or dataset in self.datasets)
                and (not self.cells or f"{metric}@{k}" in self.cells))


class Notes(BaseModel):
    """The notes file of a published table: ``published/notes/<table>.yaml``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    table: str
    notes: list[Note] = Field(default_factory=list)


def load_notes(table: PublishedTable) -> list[Note]:
    """The reviewed notes shipped for ``table`` (none when it has no notes file)."""
    path = PUBLISHED / "notes" / f"{table.name}.yaml"
    if not path.is_file():
        return []
    notes = validate_file(Notes, path, "notes on a published table")
    if notes.table != table.name:
        raise ConfigError(f"{path} says it is about table {notes.table!r}: name it {path.stem!r} like its file")
    return list(notes.notes)


def document(table: PublishedTable, cells: Sequence[Cell], run: str, trials: int, seed: int,
             ceilings: Mapping[str, Mapping[str, float | None]] | None = None) -> dict:
    """The comparison as one JSON-able document (logged to MLflow as ``reproduction/<name>.json``);
    ``ceilings``: per run dataset, what its evaluated queries' gold outside the corpus leaves a
    retriever (kept for the datasets the cells measured)."""
    measured = {c.run_dataset for c in cells if c.measured is not None}
    return {"run": run, "against": table.name, "title": table.title, "source": table.source.model_dump(mode="json"),
            "decimals": table.decimals, "bootstrap": {"trials": trials, "seed": seed, "level": 0.95},
            "cells": [asdict(c) for c in cells],
            "ceilings": {d: dict(v) for d, v in (ceilings or {}).items() if d in measured}}
