"""The experiment file: YAML validated into typed objects before any work starts."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    StrictInt,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from rbench.core.configfile import (
    ConfigPath,
    count_values,
    format_validation_error,
    load_mapping_text,
    validate_params,
)
from rbench.core.errors import ConfigError
from rbench.core.locations import DEFAULT_STORE, default_tracking_uri
from rbench.core.secrets import redact
from rbench.evaluation.names import MEASURES
from rbench.llm.config import LLMConfig
from rbench.retrievers.base import RetrieverSpec

PositiveInt = Annotated[StrictInt, Field(gt=0)]  # strict: `depth: true` is an error, not 1
NAME_LENGTH = 100


def _safe_name(value: str) -> str:
    """A name that becomes part of paths, MLflow keys and Prefect run names: printable, at most
    :data:`NAME_LENGTH` characters, no leading or trailing space, and, read as a path of ``/``-separated
    parts, no empty, ``.`` or ``..`` part and no backslash (MLflow refuses a key that resolves to another)."""
    parts = value.split("/")
    if (len(value) > NAME_LENGTH or value != value.strip() or "\\" in value or not value.isprintable()
            or any(part in ("", ".", "..") for part in parts)):
        raise ValueError(
            f"{value[:NAME_LENGTH]!r} cannot name anything here: a name is at most {NAME_LENGTH} printable characters, "
            "without leading or trailing spaces or backslashes, and its '/'-separated parts are neither empty, '.' "
            "nor '..' (it becomes part of store paths, MLflow keys and Prefect run names); such as 'fetaqa', "
            "'beir/scifact' or 'dense-minilm'")
    return value


SafeName = Annotated[str, AfterValidator(_safe_name)]
"""A dataset, retriever, experiment or MLflow experiment name (see :func:`_safe_name`)."""
TRACKING_SCHEMES = ("http", "https", "sqlite", "file", "databricks", "postgresql", "mysql", "mssql")


class Strict(BaseModel):
    """Base for config objects: unknown keys are errors, objects are immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


class SubsampleConfig(Strict):
    """TF-IDF k-means query subsampling: keep the query nearest each of ``size`` centroids."""

    size: PositiveInt | Literal["all"] = 500
    """Queries kept (all of them when the dataset has fewer); ``all`` scores every judged query (so does
    ``subsample: all``). Left unset, a dataset whose adapter scores every query by default (``beir``, as
    BEIR's own evaluation does) keeps all of them."""
    seed: StrictInt = Field(0, ge=0, lt=2**32)
    """The k-means seed (32 bits)."""
    method: Literal["members", "arm"] = "members"
    """``members``: sublinear TF-IDF, one k-means start, per cluster its member nearest the centroid
    (distinct queries); ``arm``: the ARM reproduction's ``src/utils/sample_queries.py`` (default
    TF-IDF, scikit-learn's default starts, per centroid the nearest query of all, so a query nearest
    two centroids counts twice; queries without gold documents dropped first)."""

    def for_dataset(self, every_query: bool) -> "SubsampleConfig":
        """The sample a dataset takes: every query where its adapter scores all of them by default
        (``every_query``) and the file sets no ``size``; else this one."""
        if every_query and "size" not in self.model_fields_set:
            return self.model_copy(update={"size": "all"})
        return self

    def count(self, queries: int) -> int:
        """How many of ``queries`` queries this sample asks for."""
        return queries if self.size == "all" else self.size


class MetricsConfig(Strict):
    """Cut-offs and the definitional choices that differ between papers (the docs' evaluation page)."""

    k: list[PositiveInt] = Field(default_factory=lambda: [1, 3, 5, 10], min_length=1)
    """Cut-offs: every metric is reported at each k (over the first k unique documents)."""
    precision_denominator: Literal["k", "retrieved"] = "k"
    """``k``: precision@k divides by k; ``retrieved``: by the documents kept (fewer when a ranking is short;
    the ARM reproduction's)."""
    recall_denominator: Literal["gold", "capped"] = "gold"
    """``gold``: recall@k divides by the gold documents; ``capped``: by min(k, gold) (TARGET's)."""
    ties: Literal["retrieved", "trec_eval"] = "retrieved"
    """How documents of exactly equal score are ordered before scoring: ``retrieved``, as the retriever
    returned them (Lucene's order for BM25, as Pyserini's run lists it; ARM's evaluator reads this order);
    ``trec_eval``, by document id, descending, as trec_eval and pytrec_eval re-sort a run (how Pyserini's
    2CR, BEIR and MTEB numbers are scored; protocol ``trec``)."""
    standard: list[Literal["map", "success", "rprec"]] = Field(default_factory=list)
    """trec_eval's measures, computed by pytrec_eval beside rbench's: ``map`` (at each k, and over the whole
    ranking as ``@all``), ``success`` (at each k) and ``rprec`` (R-precision, ``@all``); see the evaluation page."""

    @field_validator("k")
    @classmethod
    def _sorted_unique(cls, v: list[int]) -> list[int]:
        return sorted(set(v))


class DatasetConfig(Strict):
    """One dataset: a registered adapter and its parameters.

    ``max_missing_gold``: the largest share of queries allowed to have no gold document
    in the corpus before preparation refuses the dataset; ``max_object_bytes``: the largest
    text of one object (8 MB by default).
    """

    name: SafeName = Field(min_length=1)
    """The dataset's name in results (unique in the experiment); also the adapter when ``adapter`` is unset."""
    adapter: str | None = None
    """A registered dataset adapter (see Dataset adapters below); default: ``name``."""
    params: dict[str, Any] = Field(default_factory=dict)
    """The adapter's parameters, validated by its ``Params``."""
    max_missing_gold: float = Field(0.5, ge=0, le=1)
    """The largest share of queries allowed to have no gold document in the corpus."""
    max_object_bytes: PositiveInt = 8_000_000
    """The largest text of one corpus object, in bytes (UTF-8): a larger one is refused, naming its file and
    line (one 200 MB line was indexed for over 15 minutes); cut such texts with a chunker, or raise it."""

    @model_validator(mode="after")
    def _check_adapter(self, info: ValidationInfo) -> "DatasetConfig":
        from rbench.dataset_adapters.base import ADAPTERS

        adapter = ADAPTERS.get(self.adapter or self.name)
        params = validate_params(adapter.Params, self.params, info.context)
        object.__setattr__(self, "adapter", adapter.name)
        object.__setattr__(self, "params", params)
        return self


class RetrieverConfig(RetrieverSpec):
    """One retriever of an experiment: a :class:`RetrieverSpec` (the one model of a retriever
    reference, also used inside composites' params) with a unique ``label`` (default: its name)."""

    label: SafeName | None = None
    """The retriever's name in results (unique in the experiment); default: ``name``."""

    @model_validator(mode="after")
    def _default_label(self) -> "RetrieverConfig":
        if self.label is None:
            object.__setattr__(self, "label", self.name)
        return self


class ExecutionConfig(Strict):
    """How the flow runs its tasks; nothing here changes results or cache keys.

    ``runner``: ``threads`` (default), ``sequential``, ``dask`` or ``ray`` (extras of the same
    names); ``address``: an existing Dask scheduler or Ray cluster (default: start a local
    one); ``max_workers``: threads or local workers; ``gpus``: GPUs per worker; tasks that
    run a model on a GPU are limited to that many at once; ``shard_size``: corpus rows per
    dense-encoding shard (shards are cached units that run in parallel and resume);
    ``stage_processes``: with the threads and sequential runners, builds that load torch,
    FAISS or an LLM client run in stage processes, so that the flow's process only
    orchestrates and handles signals (``false`` runs them in its threads, for debugging).
    """

    runner: Literal["threads", "sequential", "dask", "ray"] = "threads"
    address: str | None = None
    max_workers: PositiveInt | None = None
    gpus: StrictInt = Field(0, ge=0)
    shard_size: PositiveInt = 50_000
    stage_processes: bool = True

    @model_validator(mode="after")
    def _address_needs_cluster(self) -> "ExecutionConfig":
        if self.address and self.runner not in ("dask", "ray"):
            raise ValueError(f"execution.address {self.address!r} needs runner 'dask' or 'ray' (got {self.runner!r})")
        return self

    def in_process(self) -> bool:
        """Whether stage tasks run in this process's threads (threads, sequential), not a cluster's workers."""
        return self.runner in ("threads", "sequential")

    def native_builds_apart(self) -> bool:
        """Whether builds that load a native runtime go to stage processes (see ``stage_processes``)."""
        return self.in_process() and self.stage_processes


class MlflowConfig(Strict):
    """Where results are tracked; the default is a sqlite file inside the store."""

    tracking_uri: str | None = None
    """An MLflow tracking URI (``http(s)://``, ``sqlite:///``, ``file://``, ...); default ``sqlite:///<store>/mlflow.db``;
    ``MLFLOW_TRACKING_URI`` wins."""
    experiment: SafeName = Field("rbench", min_length=1, pattern=r"\S")
    """The MLflow experiment runs are logged to."""
    headline: list[str] = Field(default_factory=lambda: ["recall", "ndcg"])
    """The measures the parent run carries for each system, as ``<dataset>.<system>.<metric>_at_<k>``,
    so that runs compare at parent level in MLflow's runs table (each child run holds every measure):
    a measure name at every k (``recall``) or at one (``recall@5``, ``map@all``)."""

    @field_validator("headline")
    @classmethod
    def _headline(cls, names: list[str]) -> list[str]:
        for name in names:
            metric, at, k = name.partition("@")
            if metric not in MEASURES or (at and k != "all" and not (k.isdigit() and int(k) >= 1)):
                raise ValueError(f"headline measure {name!r} must be one of {', '.join(MEASURES)}, alone (every k) or "
                                 "as NAME@K or NAME@all")
        return names

    @field_validator("tracking_uri")
    @classmethod
    def _scheme(cls, uri: str | None) -> str | None:
        if uri is None:
            return None
        scheme = uri.split("://", 1)[0].split("+", 1)[0] if "://" in uri else ""
        if scheme not in TRACKING_SCHEMES:
            raise ValueError(f"tracking URI {redact(uri)!r} has no known scheme; use one of "
                             f"{', '.join(s + '://' for s in TRACKING_SCHEMES)} (e.g. http://mlflow:5000)")
        return uri


def _shown(value: Any) -> Any:
    """A swept value in a label: a retriever by its name, else the value."""
    return value.get("name", value) if isinstance(value, dict) else value


PROTOCOLS: dict[str, dict[str, Any]] = {
    "standard": {},
    "arm": {"depth": 30, "metrics": {"k": [1, 3, 5, 10], "precision_denominator": "retrieved",
                                     "recall_denominator": "gold", "ties": "retrieved"},
            "subsample": {"method": "arm", "size": 100, "seed": 42}},
    "trec": {"metrics": {"ties": "trec_eval"}},
}
"""Named evaluation protocols: the settings each one fixes. ``arm`` is the ARM reproduction's
(apostolhskouk/ARM at 5a6cb92): its evaluator (``scripts/run_all_evaluation.py``,
``src/utils/evaluator.py``): 30 objects per query, mapped to document ids, de-duplicated in rank
order, the first k unique documents scored, precision over the documents kept; and its query
sample (``scripts/run_benchmark_subsampling.py`` line 13: ``subsample_json(..., k=100,
skip_field="document_ids")``; ``src/utils/sample_queries.py`` line 33: ``KMeans(random_state=42)``);
its evaluator reads each ranking in the order retrieved (``ties: retrieved``). ``trec`` is trec_eval's
(Pyserini's 2CR runs scored by ``trec_eval -c``, BEIR's and MTEB's by pytrec_eval): documents of equal
score ordered by id, descending. Datasets whose adapter has a ``form`` take ``form: target`` under
``arm`` unless the file names another (see :data:`PROTOCOL_FORMS`)."""

PROTOCOL_FORMS: dict[str, str] = {"arm": "target"}
"""The corpus form a protocol gives each dataset whose adapter has a ``form`` parameter, unless
the dataset sets one: ``target`` is TARGET's corpus serialized by ARM's
``scripts/target/serialize_tables.py``. Another form (a measured variant) stays allowed; the
published tables mark its cells as not the same computation."""


PROTOCOL_RETRIEVER_PARAMS: dict[str, dict[str, dict[str, Any]]] = {"arm": {"bm25": {"lucene_ids": "position"}}}
"""Retriever params a protocol gives each retriever of that name, unless the file sets them:
under ``arm``, BM25 builds its Lucene index under ARM's ``doc_<n>`` ids over the corpus in the
order of ARM's serialized file (``src/retrieval/bm25.py`` line 60), so that equal scores fall in
the order they fell in the report's runs (Anserini breaks ties by document id)."""


def _apply_protocol(raw: dict) -> dict:
    """Fill in the settings a named protocol fixes; an explicit value that contradicts it is an
    error naming both, so that ``protocol: arm`` always means the same evaluation."""
    name = raw.get("protocol", "standard")
    if name not in PROTOCOLS:
        raise ValueError(f"protocol {name!r} is unknown; use one of {', '.join(PROTOCOLS)}")
    fixed = PROTOCOLS[name]
    out = dict(raw)
    for key, value in fixed.items():
        if isinstance(value, dict):
            given = out.get(key) or {}
            if not isinstance(given, dict):
                return out  # the field's own validation names the bad value
            for sub, v in value.items():
                if sub in given and given[sub] != v:
                    raise ValueError(f"protocol {name!r} fixes {key}.{sub} to {v!r}, but the file sets {given[sub]!r}; "
                                     f"remove {key}.{sub} or use protocol: standard")
            out[key] = {**given, **value}
        else:
            if key in out and out[key] != value:
                raise ValueError(f"protocol {name!r} fixes {key} to {value!r}, but the file sets {out[key]!r}; remove "
                                 f"{key} or use protocol: standard")
            out[key] = value
    form = PROTOCOL_FORMS.get(name)
    if form and isinstance(out.get("datasets"), list):
        out["datasets"] = [_with_form(ds, form) for ds in out["datasets"]]
    defaults = PROTOCOL_RETRIEVER_PARAMS.get(name, {})
    if defaults and isinstance(out.get("retrievers"), list):
        out["retrievers"] = [_with_params(r, defaults) for r in out["retrievers"]]
    return out


def _with_params(retriever: Any, defaults: dict[str, dict[str, Any]]) -> Any:
    """``retriever`` with the params a protocol gives its name added where the file does not set them
    (a prebuilt index keeps its own ids)."""
    if not isinstance(retriever, dict) or not isinstance(retriever.get("params", {}), dict):
        return retriever
    params = retriever.get("params") or {}
    given = defaults.get(retriever.get("name"), {})
    if not given or params.get("prebuilt"):
        return retriever
    return {**retriever, "params": {**given, **params}}


def _with_form(dataset: Any, form: str) -> Any:
    """``dataset`` with ``params.form`` set to ``form`` when its adapter has that parameter and
    the file does not set it."""
    from rbench.dataset_adapters.base import ADAPTERS

    if not isinstance(dataset, dict) or not isinstance(dataset.get("params", {}), dict):
        return dataset
    name = dataset.get("adapter") or dataset.get("name")
    if name not in ADAPTERS or "form" not in ADAPTERS.get(name).Params.model_fields:
        return dataset
    params = dataset.get("params") or {}
    return dataset if "form" in params else {**dataset, "params": {**params, "form": form}}


class ExperimentConfig(Strict):
    """A whole experiment: datasets x retrievers, evaluated at the configured cut-offs.

    ``protocol``: ``standard`` (IR's usual definitions, the settings as given) or a named
    protocol of :data:`PROTOCOLS` that fixes depth and the metric definitions at once."""

    _text: str | None = PrivateAttr(default=None)
    name: SafeName = "experiment"
    """The experiment's name: the MLflow parent run and the Prefect flow run are named after it."""
    protocol: Literal["standard", "arm", "trec"] = "standard"
    """``standard``, or a named protocol (:data:`PROTOCOLS`) that fixes the evaluation's settings at once:
    ``arm`` (the ARM report's code), ``trec`` (trec_eval's order of equal scores)."""
    store: ConfigPath = DEFAULT_STORE
    """The artifact store (``--store`` and ``RBENCH_STORE`` win)."""
    mirror: ConfigPath | None = None
    """A local folder holding the datasets' files under their source paths (``--mirror`` and ``RBENCH_MIRROR`` win)."""
    depth: PositiveInt = 100
    """Objects retrieved per query (at least the largest k)."""
    subsample: SubsampleConfig = SubsampleConfig()
    """Which queries are evaluated."""
    metrics: MetricsConfig = MetricsConfig()
    """Cut-offs and metric definitions."""
    mlflow: MlflowConfig = MlflowConfig()
    """Where results are logged."""
    execution: ExecutionConfig = ExecutionConfig()
    """How tasks run (never part of a cache key)."""
    llms: dict[str, LLMConfig] = Field(default_factory=dict)
    """LLMs by name, referred to by retrievers as ``llm: NAME``."""
    sweep: dict[str, list[Any]] = Field(default_factory=dict)
    """A dataset or retriever parameter and its values: each dataset or retriever that has it runs once per value."""
    datasets: list[DatasetConfig] = Field(min_length=1)
    """The datasets."""
    retrievers: list[RetrieverConfig] = Field(min_length=1)
    """The retrievers, each run on every dataset."""

    @model_validator(mode="before")
    @classmethod
    def _protocol(cls, raw: Any) -> Any:
        return _apply_protocol(raw) if isinstance(raw, dict) else raw

    @field_validator("subsample", mode="before")
    @classmethod
    def _every_query(cls, value: Any) -> Any:
        """``subsample: all`` (or ``false``/``off``): every judged query is scored."""
        return {"size": "all"} if value == "all" or value is False or value == "off" else value

    @model_validator(mode="before")
    @classmethod
    def _resolve_llms(cls, raw: Any) -> Any:
        """``llm: NAME`` anywhere in a retriever's params becomes the ``llms.NAME`` section,
        so that one model is configured once and retrievers refer to it by name."""
        if not isinstance(raw, dict) or not isinstance(raw.get("retrievers"), list):
            return raw
        llms = raw.get("llms") or {}
        if not isinstance(llms, dict):
            raise ValueError("llms must be a mapping of names to LLM settings (backend, model, ...)")

        def resolve(value: Any, where: str) -> Any:
            if isinstance(value, dict):
                out = {}
                for k, v in value.items():
                    if k == "llm" and isinstance(v, str):
                        if v not in llms:
                            raise ValueError(f"{where}.llm: unknown LLM {v!r}; define it under llms: (known: "
                                             f"{sorted(llms) or 'none'})")
                        v = llms[v]
                    out[k] = resolve(v, f"{where}.{k}")
                return out
            if isinstance(value, list):
                return [resolve(v, f"{where}[{i}]") for i, v in enumerate(value)]
            return value

        return {**raw, "retrievers": [resolve(r, f"retrievers[{i}]") for i, r in enumerate(raw["retrievers"])]}

    @model_validator(mode="before")
    @classmethod
    def _expand_sweep(cls, raw: Any) -> Any:
        """``sweep: {granularity: [table, row, cell]}`` turns each dataset whose adapter has
        that parameter into one dataset per value, named ``name[granularity=row]``; a
        parameter of a retriever (``selection: [mip, rerank]``) turns each retriever that has
        it into one per value, labelled ``label[selection=rerank]``. Several keys: the grid."""
        if not isinstance(raw, dict) or not raw.get("sweep"):
            return raw
        from rbench.dataset_adapters.base import ADAPTERS
        from rbench.retrievers.base import RETRIEVERS

        def dataset_fields(ds):
            return ADAPTERS.get(ds.get("adapter") or ds.get("name")).Params.model_fields if isinstance(ds, dict) else {}

        def retriever_fields(r):
            known = isinstance(r, dict) and r.get("name") in RETRIEVERS
            return RETRIEVERS[r["name"]].Params.model_fields if known else {}

        datasets, retrievers = list(raw.get("datasets") or []), list(raw.get("retrievers") or [])
        for key, values in raw["sweep"].items():
            if not isinstance(values, list) or not values:
                raise ValueError(f"sweep.{key} must be a non-empty list of values")
            swept = False
            expanded = []
            for ds in datasets:
                if key not in dataset_fields(ds):
                    expanded.append(ds)
                    continue
                swept = True
                expanded += [{**ds, "name": f"{ds['name']}[{key}={value}]", "adapter": ds.get("adapter") or ds["name"],
                              "params": {**ds.get("params", {}), key: value}} for value in values]
            datasets, expanded = expanded, []
            for r in retrievers:
                if key not in retriever_fields(r):
                    expanded.append(r)
                    continue
                swept = True
                label = r.get("label") or r["name"]
                expanded += [{**r, "label": f"{label}[{key}={_shown(value)}]",
                              "params": {**(r.get("params") or {}), key: value}} for value in values]
            retrievers = expanded
            if not swept:
                raise ValueError(f"sweep.{key}: no dataset or retriever has a parameter {key!r} to sweep")
        return {**raw, "datasets": datasets, "retrievers": retrievers}

    @model_validator(mode="after")
    def _check(self) -> "ExperimentConfig":
        for kind, names in (
            ("dataset name", [d.name for d in self.datasets]),
            ("retriever label", [r.label for r in self.retrievers]),
        ):
            dupes = sorted({n for n in names if names.count(n) > 1})
            if dupes:
                raise ValueError(f"duplicate {kind} {dupes}: give each a unique one")
        if self.depth < max(self.metrics.k):
            raise ValueError(
                f"depth {self.depth} is smaller than the largest k {max(self.metrics.k)}: "
                "raise depth so each query retrieves at least k objects"
            )
        return self

    def tracking_uri(self) -> str:
        """The MLflow tracking URI: the configured one, or sqlite inside the store."""
        return self.mlflow.tracking_uri or default_tracking_uri(self.store)

    @property
    def file_text(self) -> str | None:
        """The YAML text this experiment was read from (:func:`load_config`), else None."""
        return self._text

    def overridden(self, tracking_uri: str | None = None, runner: str | None = None,
                   address: str | None = None) -> "ExperimentConfig":
        """This experiment with a tracking URI, a runner and a cluster address given from outside
        the file (a flag, the door's setting, the environment); None keeps the file's."""
        update: dict[str, Any] = {}
        if tracking_uri:
            update["mlflow"] = self.mlflow.model_copy(update={"tracking_uri": tracking_uri})
        if runner or address:
            execution = {**self.execution.model_dump(), **({"runner": runner} if runner else {}),
                         **({"address": address} if address else {})}
            try:
                update["execution"] = ExecutionConfig.model_validate(execution)
            except ValueError as e:
                raise ConfigError(f"execution settings: {e}") from None
        return self.model_copy(update=update) if update else self


def load_config(
    path: Path | str, *, mirror: Path | str | None = None, store: Path | str | None = None
) -> ExperimentConfig:
    """Read and validate an experiment YAML file.

    Relative paths inside the file (every path-typed field: store, mirror, dataset files,
    prompt and synonym files, model folders) resolve against the file's folder; ``mirror``
    and ``store`` arguments override the file's values.
    """
    path = Path(path)
    raw, text = load_mapping_text(path, "experiment config", " with keys such as 'datasets' and 'retrievers'")
    cfg = parse_config(raw, base=path.resolve().parent, source=str(path), mirror=mirror, store=store)
    cfg._text = text
    return cfg


def parse_config(
    raw: dict,
    *,
    base: Path | None = None,
    source: str = "<dict>",
    mirror: Path | str | None = None,
    store: Path | str | None = None,
) -> ExperimentConfig:
    """Validate a config mapping; see :func:`load_config`."""
    count_values(raw, source)
    raw = dict(raw)
    base = base or Path.cwd()
    for key, override in (("mirror", mirror), ("store", store)):
        if override is not None:
            raw[key] = str(Path(override).expanduser().resolve())
    raw.setdefault("store", str(DEFAULT_STORE.resolve()))  # the working directory's, as documented
    try:
        return ExperimentConfig.model_validate(raw, context={"base": base})
    except ValidationError as e:
        raise ConfigError(format_validation_error(e, source, model=ExperimentConfig)) from None
