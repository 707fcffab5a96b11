"""The chunking grid: chunk size x overlap x N retrieved, each a cached stage, scored at span level."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Literal

from prefect import flow
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PositiveInt,
    ValidationError,
    field_validator,
)

from rbench.config import MlflowConfig
from rbench.core.configfile import (
    ConfigPath,
    PathOrName,
    format_validation_error,
    load_mapping,
)
from rbench.core.errors import ConfigError
from rbench.core.locations import DEFAULT_STORE, ENV_MIRROR, ENV_STORE, ENV_TRACKING, flag_or_env
from rbench.evaluation.chunking_report import write_grid_report
from rbench.retrievers.models import Encoding, canonical_id
from rbench.tasks.chunkers import SpanChunkerConfig
from rbench.tasks.chunking_eval import (
    CHUNK_EMBED,
    CHUNK_EVAL,
    ChunkEmbedConfig,
    ChunkEvalConfig,
    chroma_files,
    load_eval_set,
)
from rbench.tasks.datasets.base import FileSpec, local_file
from rbench.tasks.datasets.chunking import cl100k
from rbench.tasks.download import DOWNLOAD, DownloadConfig
from rbench.tasks.orchestration import call_stage
from rbench.tasks.search_space import Dimension, propose
from rbench.tasks.track import log_chunking_grid


class ChunkingSearch(BaseModel):
    """A search over the chunker instead of the full grid: ``space`` over ``chunk_size``,
    ``overlap`` (a fraction of the size) and ``n``; the others stay at their first grid value."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    space: dict[Literal["chunk_size", "overlap", "n"], Dimension] = Field(min_length=1)
    """The settings to vary (``chunk_size``, ``overlap``, ``n``), each with its range or choices."""
    strategy: Literal["grid", "random", "tpe"] = "tpe"
    """How trials are proposed: ``grid``, ``random`` or ``tpe`` (Optuna)."""
    budget: PositiveInt = 20
    """The most trials run."""
    seed: int = 0
    """The seed of ``random`` and ``tpe`` proposals."""
    grid_points: PositiveInt = 5
    """``grid``: values per range dimension."""
    metric: Literal["recall", "precision", "f1", "iou"] = "iou"
    """The span measure the search maximises: ``iou`` (intersection over union), ``recall``, ``precision`` or ``f1``."""


class ChunkingGridConfig(BaseModel):
    """The grid: ``data`` is 'chroma' (Chroma's set, from the mirror or GitHub) or a folder in its format."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    name: str = "chunking-grid"
    """The grid's name, in its stage lines and MLflow runs."""
    store: ConfigPath = DEFAULT_STORE
    """The cache folder of the grid's stages (relative to the grid file)."""
    mirror: ConfigPath | None = None
    """A folder with the evaluation set's files, read instead of the network."""
    data: PathOrName = "chroma"
    """``chroma`` (Chroma's chunking evaluation set, pinned) or a folder in its layout (``corpora/*.md``,
    ``questions_df.csv``)."""
    model: PathOrName = "sentence-transformers/all-MiniLM-L6-v2"
    """The embedding model that encodes chunks and questions: registry id, alias, hub id or folder."""
    encoding: dict = Field(default_factory=dict)
    """The model's prompts and loading options, as [encoding](#encoding); a known model gets its authors' defaults."""
    chunker: Literal["tokens", "recursive", "chonky"] = "tokens"
    """``tokens`` (fixed windows), ``recursive`` (split at paragraph, line, sentence and word boundaries) or ``chonky``
    (semantic paragraphs)."""
    chunk_unit: Literal["characters", "cl100k_tokens"] | None = None
    """What chunk sizes count: ``characters`` or ``cl100k_tokens``; default: ``cl100k_tokens`` for ``tokens`` and
    ``chonky``, ``characters`` for ``recursive``."""
    chonky_model: PathOrName | None = None
    """``chonky``: the chonky model, a hub id or a local folder."""
    corpora: list[str] | None = Field(default=None, min_length=1)
    """The evaluation set's corpora to use, by file name without ``.md``; default: all."""
    chunk_sizes: list[PositiveInt] = Field(default_factory=lambda: [100, 200, 300, 400, 500], min_length=1)
    """The chunk sizes of the grid, in ``chunk_unit``s."""
    overlaps: list[float] = Field(default_factory=lambda: [0.1, 0.2, 0.3, 0.4, 0.5], min_length=1)
    """The overlaps of the grid, as fractions of the chunk size in [0, 1)."""
    n: list[PositiveInt] = Field(default_factory=lambda: [1, 3, 5, 7, 9], min_length=1)
    """How many chunks are retrieved per question, each value a cell of the grid."""
    scope: Literal["corpus", "pooled"] = "corpus"
    """``corpus``: each question searches its own corpus's chunks; ``pooled``: one collection of every corpus's chunks,
    as Chroma's code retrieves."""
    units: Literal["characters", "cl100k_tokens"] = "characters"
    """What the span metrics count: ``characters`` or ``cl100k_tokens``."""
    std: Literal["population", "sample"] = "population"
    """The standard deviation shown beside each mean: ``population`` (divides by n) or ``sample`` (by n - 1)."""
    mlflow: MlflowConfig = MlflowConfig(experiment="rbench-chunking")
    """Where the grid's runs are logged; its experiment defaults to ``rbench-chunking``."""
    search: ChunkingSearch | None = None
    """Search the chunker's settings instead of running the whole grid."""

    @field_validator("overlaps")
    @classmethod
    def _fractions(cls, values: list[float]) -> list[float]:
        bad = [v for v in values if not 0 <= v < 1]
        if bad:
            raise ValueError(f"overlaps are fractions of the chunk size in [0, 1); got {bad}")
        return values

    def chunkers(self) -> list[SpanChunkerConfig]:
        """Every chunker setting of the grid (overlap rounded to whole units)."""
        return [SpanChunkerConfig(kind=self.chunker, size=s, overlap=round(s * o), model=self.chonky_model,
                                  unit=self.chunk_unit)
                for s in self.chunk_sizes for o in self.overlaps]

    def embed_config(self, chunker: SpanChunkerConfig) -> ChunkEmbedConfig:
        """The chunk-and-embed stage's settings for one chunker."""
        return ChunkEmbedConfig(chunker=chunker, model=self.model, corpora=self.corpora,
                                encoding=Encoding.for_model(canonical_id(self.model), self.encoding))

    def eval_config(self, n: int) -> ChunkEvalConfig:
        """The retrieve-and-score stage's settings for one N."""
        return ChunkEvalConfig(n=n, scope=self.scope, units=self.units, corpora=self.corpora)

    def files(self) -> list[FileSpec]:
        """The evaluation set's files: Chroma's pinned set, or a local folder's files by digest."""
        if self.data == "chroma":
            return chroma_files(self.corpora)
        folder = Path(self.data)
        paths = sorted((folder / "corpora").glob("*.md")) + [folder / "questions_df.csv"]
        if not (folder / "questions_df.csv").is_file():
            raise ConfigError(f"data folder {folder} has no questions_df.csv; use 'chroma' or a folder in Chroma's format")
        return [local_file(f"chroma/{p.relative_to(folder).as_posix()}", p) for p in paths]


def load_grid_config(path: str | Path, mirror: str | None = None, store: str | None = None,
                     corpora: list[str] | None = None) -> ChunkingGridConfig:
    """Read a grid YAML file; relative paths resolve against its folder; ``corpora`` (the
    CLI's ``--corpus``) overrides the config's; mirror, store and tracking URI come from the
    arguments, else ``RBENCH_MIRROR`` / ``RBENCH_STORE`` / ``MLFLOW_TRACKING_URI``, else the file;
    bad values are ConfigErrors."""
    path = Path(path)
    raw = load_mapping(path, "chunking grid config", " (data, model, chunker, chunk_sizes, ...)")
    if corpora:
        raw["corpora"] = list(corpora)
    for key, override in (("mirror", flag_or_env(mirror, ENV_MIRROR)), ("store", flag_or_env(store, ENV_STORE))):
        if override is not None:
            raw[key] = str(Path(override).expanduser().resolve())
    raw.setdefault("store", str(DEFAULT_STORE.resolve()))
    tracking_uri = flag_or_env(None, ENV_TRACKING)
    if tracking_uri:
        raw["mlflow"] = {**(raw.get("mlflow") or {}), "tracking_uri": tracking_uri}
    try:
        cfg = ChunkingGridConfig.model_validate(raw, context={"base": path.resolve().parent})
        cfg.embed_config(cfg.chunkers()[0])
    except ValidationError as e:
        raise ConfigError(format_validation_error(e, str(path), "chunking grid config")) from None
    return cfg


@flow(name="rbench-chunking-grid", log_prints=True)
def chunking_grid(config_path: str, mirror: str | None = None, store: str | None = None,
                  corpora: list[str] | None = None) -> dict:
    """Chunk, embed, retrieve and score every grid combination; write the table and figures."""
    cfg = load_grid_config(config_path, mirror, store, corpora)
    root, report, results = str(cfg.store.resolve()), [], []
    files = DownloadConfig.resolved(cfg.files(), cfg.mirror)
    raw = call_stage(DOWNLOAD, root, [], files, "chunking-data", report, mirror=cfg.mirror)
    for chunker in cfg.chunkers():
        label = f"{chunker.kind}-{chunker.size}-{chunker.overlap}"
        embedded = call_stage(CHUNK_EMBED, root, [raw], cfg.embed_config(chunker), label, report)
        for n in cfg.n:
            scored = call_stage(CHUNK_EVAL, root, [raw, embedded], cfg.eval_config(n), f"{label}/N={n}", report)
            results.append({"chunk_size": chunker.size, "overlap": chunker.overlap, "n": n,
                            "summary": _summary(scored), "per_question": str(scored.file("per_question.parquet"))})
    texts, questions = load_eval_set(raw.path / "chroma", cfg.corpora)
    encoding = cl100k()
    lengths = [len(encoding.encode(texts[q.corpus_id][s:e], disallowed_special=())) for q in questions for s, e in q.references]
    out = cfg.store.resolve() / "reports" / f"chunking-{time.strftime('%Y%m%d-%H%M%S')}"
    settings = {"size_unit": cfg.chunkers()[0].size_unit, "metric_unit": cfg.units, "std": cfg.std,
                "scope": cfg.scope, "corpora": cfg.corpora or sorted(texts), "questions": len(questions)}
    best = write_grid_report(results, lengths, [len(q.references) for q in questions], out, settings)
    run_id = log_chunking_grid(cfg, results, best, out, report)
    return {"mlflow_run_id": run_id, "results": results, "best": {m: {k: r[k] for k in ("chunk_size", "overlap", "n")} for m, r in best.items()},
            "report_folder": str(out), "stages": report}


@flow(name="rbench-chunking-search", log_prints=True)
def chunking_search(config_path: str, mirror: str | None = None, store: str | None = None,
                    corpora: list[str] | None = None) -> dict:
    """Search the chunker's size, overlap and N for the best mean ``search.metric``; each trial is cached."""
    cfg = load_grid_config(config_path, mirror, store, corpora)
    if cfg.search is None:
        raise ConfigError(f"{config_path} has no 'search:' section; run it as a grid instead")
    root, report, trials = str(cfg.store.resolve()), [], []
    files = DownloadConfig.resolved(cfg.files(), cfg.mirror)
    raw = call_stage(DOWNLOAD, root, [], files, "chunking-data", report, mirror=cfg.mirror)

    def objective(params: dict) -> float:
        size = int(params.get("chunk_size", cfg.chunk_sizes[0]))
        try:
            chunker = SpanChunkerConfig(kind=cfg.chunker, size=size, model=cfg.chonky_model, unit=cfg.chunk_unit,
                                        overlap=round(size * params.get("overlap", cfg.overlaps[0])))
        except ValidationError as e:
            raise ConfigError(format_validation_error(e, f"chunking search trial {params}")) from None
        label = f"{chunker.kind}-{chunker.size}-{chunker.overlap}"
        embedded = call_stage(CHUNK_EMBED, root, [raw], cfg.embed_config(chunker), label, report)
        n = int(params.get("n", cfg.n[0]))
        scored = call_stage(CHUNK_EVAL, root, [raw, embedded], cfg.eval_config(n), f"{label}/N={n}", report)
        value = _summary(scored)[cfg.search.metric]["mean"]
        trials.append({"trial": len(trials), "params": params, "value": value})
        return value

    propose(cfg.search, objective)
    best = max(trials, key=lambda t: t["value"])
    return {"best": best, "trials": trials, "stages": report}


def _summary(artifact) -> dict:
    import json

    return json.loads(artifact.file("summary.json").read_text())
