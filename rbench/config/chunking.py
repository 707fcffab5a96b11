"""The chunking grid's settings: chunk size x overlap x N over an evaluation set in Chroma's format,
or a search over them, read from a grid YAML file."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, PositiveInt, ValidationError, field_validator

from rbench.config import MlflowConfig
from rbench.config.search import Dimension
from rbench.core.configfile import ConfigPath, PathOrName, format_validation_error, load_mapping
from rbench.core.errors import ConfigError
from rbench.core.locations import DEFAULT_STORE, default_tracking_uri, given_mirror, given_store, given_tracking_uri
from rbench.dataset_adapters.chunking import ChunkerConfig
from rbench.retrievers.models import Encoding, canonical_id


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

    @property
    def size_unit(self) -> str:
        """What the grid's chunk sizes count."""
        return self.chunk_unit or ("characters" if self.chunker == "recursive" else "cl100k_tokens")

    def chunker_config(self, size: int, overlap: float) -> ChunkerConfig:
        """The chunker of one cell: ``overlap`` a fraction of ``size``, rounded to whole units."""
        return ChunkerConfig(kind=self.chunker, size=size, overlap=round(size * overlap), model=self.chonky_model,
                             unit=self.size_unit)

    def trial_chunker(self, params: dict) -> ChunkerConfig:
        """The chunker of one search trial: its ``chunk_size`` and ``overlap``, else the grid's first values."""
        size = int(params.get("chunk_size", self.chunk_sizes[0]))
        try:
            return self.chunker_config(size, params.get("overlap", self.overlaps[0]))
        except ValidationError as e:
            raise ConfigError(format_validation_error(e, f"chunking search trial {params}")) from None

    def tracking_uri(self) -> str:
        """The MLflow tracking URI: the configured one, or sqlite inside the store."""
        return self.mlflow.tracking_uri or default_tracking_uri(self.store)

    def chunkers(self) -> list[ChunkerConfig]:
        """Every chunker setting of the grid."""
        return [self.chunker_config(s, o) for s in self.chunk_sizes for o in self.overlaps]


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
    for key, override in (("mirror", given_mirror(mirror)), ("store", given_store(store))):
        if override is not None:
            raw[key] = str(Path(override).expanduser().resolve())
    raw.setdefault("store", str(DEFAULT_STORE.resolve()))
    tracking_uri = given_tracking_uri()
    if tracking_uri:
        raw["mlflow"] = {**(raw.get("mlflow") or {}), "tracking_uri": tracking_uri}
    try:
        cfg = ChunkingGridConfig.model_validate(raw, context={"base": path.resolve().parent})
        cfg.chunkers()
        Encoding.for_model(canonical_id(cfg.model), cfg.encoding)
    except ValidationError as e:
        raise ConfigError(format_validation_error(e, str(path), "chunking grid config", ChunkingGridConfig)) from None
    return cfg
