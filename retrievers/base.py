"""The retriever interface: build an index from a corpus, save it, load it, search it."""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from functools import lru_cache
from pathlib import Path
from typing import Any, ClassVar, Mapping, Sequence

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, model_validator

from rbench.core.configfile import validate_params
from rbench.core.hashing import canonical_json
from rbench.core.identity import class_digest
from rbench.core.registry import Registry

Hits = list[tuple[str, float]]
Run = dict[str, Hits]

RUNTIME_FIELDS = ("device", "batch_size")
"""Params that must not change results (where and how fast it runs): they enter no key."""

RETRIEVERS: Registry = Registry("retriever", package="rbench.retrievers", group="rbench.retrievers")
"""Every retriever class by name: the modules of ``rbench.retrievers`` register theirs with
``@RETRIEVERS.register``; another package adds one through the ``rbench.retrievers`` entry-point group."""


def make_retriever(name: str, params: BaseModel | Mapping[str, Any] | None = None) -> "Retriever":
    """Instantiate a registered retriever with validated params."""
    return RETRIEVERS.get(name)(params)


class RetrieverSpec(BaseModel):
    """A reference to a retriever: a registered name and its params, validated once by the
    retriever's ``Params`` (an experiment's retrievers and composites' components alike)."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    name: str
    """A registered retriever's name (``rbench list retrievers``; plugins add theirs)."""
    params: dict[str, Any] = Field(default_factory=dict)
    """The retriever's settings, as its section below lists them; unset keys take their defaults."""

    @model_validator(mode="after")
    def _known(self, info: ValidationInfo) -> "RetrieverSpec":
        cls = RETRIEVERS.get(self.name)
        if not cls.searchable:
            raise ValueError(f"{self.name!r} is not a retriever: {cls.description}")
        undeclared = cls.undeclared_fields()
        if undeclared:
            raise ValueError(
                f"retriever {self.name!r} ({cls.__module__}.{cls.__qualname__}) lists index_fields but not "
                f"{', '.join(map(repr, undeclared))} there or in search_fields, so whether a change to it rebuilds the "
                "index is unknown: add each to index_fields (it shapes the index) or search_fields (only search "
                "reads it), or drop index_fields so that every param shapes the index")
        object.__setattr__(self, "params", validate_params(cls.Params, self.params, info.context))
        return self

    def typed_params(self) -> BaseModel:
        """The params as the retriever's ``Params`` object, parsed once per process (``params`` is
        their JSON form, which cache keys hash)."""
        return _typed_params(self.name, canonical_json(self.params))

    def build(self) -> "Retriever":
        """Instantiate the retriever with the typed params (no second validation)."""
        return RETRIEVERS.get(self.name)(self.typed_params())


@lru_cache(maxsize=512)
def _typed_params(name: str, params: str) -> BaseModel:
    return RETRIEVERS.get(name).Params.model_validate(json.loads(params))


class Retriever(ABC):
    """A retrieval method over corpus objects.

    Subclasses set ``name``, ``description`` and a pydantic ``Params`` model. Every param shapes
    the index (enters the index's cache key and the params :meth:`index` is built with) unless the
    class names it in ``search_fields`` (read only at search time; it enters the run's key);
    a class that lists ``index_fields`` instead must place every param in one of the two, or
    the configuration check refuses it by name (:meth:`undeclared_fields`). Keys follow the code of
    the retriever's module and everything it imports (:meth:`code_identity`); ``version`` and
    ``index_version`` are kept for intent (bump them to mark a change of meaning). Params named ``device`` or
    ``batch_size`` never enter a key: they must not change results (``searchable = False``
    marks an index that only a composite reads, such as ARM's n-grams). ``index`` writes everything ``load`` needs into a folder; ``search``
    returns, per query id, ``(object_id, score)`` pairs best first. Retrievers built
    on others (rerankers, fusion) subclass :class:`Composite` instead.
    """

    name: ClassVar[str]
    description: ClassVar[str]
    Params: ClassVar[type[BaseModel]]
    index_fields: ClassVar[tuple[str, ...] | None] = None
    """The params that shape the index; None: every param but ``search_fields`` and :data:`RUNTIME_FIELDS`."""
    search_fields: ClassVar[tuple[str, ...]] = ()
    """The params only search reads (they enter the run's key, not the index's)."""
    index_version: ClassVar[int] = 1
    version: ClassVar[int] = 1
    shard_fields: ClassVar[tuple[str, ...]] = ()
    shard_version: ClassVar[int] = 1
    uses_model: ClassVar[bool] = False
    native: ClassVar[bool] = False
    """Whether it loads a native runtime itself (torch, FAISS, a tokenizer's model): the flow
    then builds its index and searches in a stage process (:mod:`rbench.core.processes`)."""
    asks_llm: ClassVar[bool] = False
    """Whether it calls an LLM itself: its retrieve stage then gives it the stage's LLM session and call cache."""
    searchable: ClassVar[bool] = True
    conformance: ClassVar[dict[str, dict[str, Any]]] = {"": {}}
    """Params that make the conformance test (``tests/integration/retrievers/test_conformance.py``)
    fast on its six-object corpus, by case ("" and variants such as ``hnsw``). ``$SMOLLM2``
    stands for an in-process SmolLM2-135M, ``$TINY_CROSS_ENCODER`` for a local one-layer
    cross-encoder the test builds; a case with either has no known answers (a 135M model or
    random weights reorder)."""

    def __init__(self, params: BaseModel | Mapping[str, Any] | None = None):
        if isinstance(params, self.Params):
            self.params = params
        else:
            self.params = self.Params.model_validate(dict(params or {}))

    @classmethod
    def keyed_index_fields(cls) -> tuple[str, ...]:
        """The params that shape the index: ``index_fields``, else every param but ``search_fields``
        and :data:`RUNTIME_FIELDS`."""
        if cls.index_fields is not None:
            return cls.index_fields
        return tuple(f for f in cls.Params.model_fields if f not in cls.search_fields and f not in RUNTIME_FIELDS)

    @classmethod
    def undeclared_fields(cls) -> list[str]:
        """The params of a class that lists ``index_fields`` and places them in neither that list nor
        ``search_fields``: whether they shape the index is unknown, so the configuration check refuses them."""
        if cls.index_fields is None:
            return []
        declared = {*cls.index_fields, *cls.search_fields, *RUNTIME_FIELDS}
        return [f for f in cls.Params.model_fields if f not in declared]

    def index_params(self) -> dict[str, Any]:
        """The params that determine the index (the rest only affect search)."""
        dumped = self.params.model_dump(mode="json")
        return {k: dumped[k] for k in self.keyed_index_fields()}

    def shard_params(self) -> dict[str, Any]:
        """The params that determine a shard's encoding (empty: the index is built in one piece)."""
        dumped = self.params.model_dump(mode="json")
        return {k: dumped[k] for k in self.shard_fields}

    def sharded(self) -> bool:
        """Whether the index is built from encode shards (``shard_fields``; not over an existing index)."""
        return bool(self.shard_fields)

    def encode_shard(self, corpus: Path, start: int, stop: int, folder: Path, checkpoint=None) -> dict:
        """Encode corpus rows ``start:stop`` into ``folder`` (retrievers with ``shard_fields``)."""
        raise TypeError(f"{self.name} does not build its index from shards")

    def index_from_shards(self, corpus: Path, shards: Sequence[Path], folder: Path) -> dict:
        """Build the index from encoded shards, in corpus order (retrievers with ``shard_fields``)."""
        raise TypeError(f"{self.name} does not build its index from shards")

    def model(self) -> str | None:
        """The model this retriever runs itself, as its params name it (a registry id, alias, hub id
        or folder); None for one that runs none (lexical retrievers, composites)."""
        return None

    def model_identities(self) -> list[str]:
        """The identity of each model this retriever runs itself (see ``rbench.retrievers.models.model_identity``)."""
        return []

    @classmethod
    def code_identity(cls, version: int | None = None) -> str:
        """``version`` (default: the search ``version``) and the digest of the import closure of
        the module that defines the class (of the class's own code where it was defined in a
        notebook or script: :func:`~rbench.core.identity.object_digest`): what a cache key holds
        for this retriever's code."""
        return f"{cls.version if version is None else version}:{class_digest(cls)}"


    def code_versions(self) -> dict[str, str]:
        """The search-code identity of this retriever and of every component."""
        return {self.name: self.code_identity()}

    def loads_native(self) -> bool:
        """Whether this retriever or a component is :attr:`native`."""
        return self.native

    def calls_llm(self) -> bool:
        """Whether this retriever or a component :attr:`asks_llm` (its retrieve stage then holds an LLM session)."""
        return self.asks_llm

    def needs_gpu(self) -> bool:
        """Whether this retriever (or a component) runs a neural model on a GPU-capable device."""
        device = getattr(self.params, "device", None)
        return self.uses_model and (device is None or str(device).startswith("cuda"))

    def warm_up(self) -> None:
        """Start now, in the background, what building this retriever's index needs where that takes
        seconds (a worker process and its runtime): rbench calls it while its flow starts, for an
        index the run will build in this process. Default: nothing."""

    @abstractmethod
    def index(self, corpus: Path, folder: Path) -> dict:
        """Index the corpus Parquet file into ``folder``; return a summary (counts, timings)."""

    @abstractmethod
    def load(self, folder: Path) -> None:
        """Load an index written by :meth:`index`."""

    @abstractmethod
    def search(self, queries: Mapping[str, str], k: int) -> Run:
        """Top-``k`` objects per query, best first."""

    def leaves(self) -> list["Retriever"]:
        """The retrievers whose indexes this one searches (itself, for an indexing retriever)."""
        return [self]

    def parts(self) -> list["Retriever"]:
        """This retriever and, for a composite, every component, recursively."""
        return [self]

    def open(self, folders: Sequence[Path], corpus: Path) -> None:
        """Load the indexes of :meth:`leaves` (in that order); ``corpus`` is the prepared corpus."""
        (folder,) = folders
        self.load(folder)

    def stats(self) -> dict[str, Any]:
        """Counters gathered while searching (reported with the run); none by default."""
        return {}

    def content_digests(self) -> dict[str, str]:
        """Digests of files whose content changes results (prompts, synonym maps), by role."""
        return {}

    def take_traces(self) -> list[dict]:
        """Per-query records of how results were reached (agents' turns), gathered since the
        last call; each has a ``query_id``. None by default."""
        return []

    def own_rewrites(self) -> list:
        """The query rewrites (``rbench.llm.rewrite.RewriteSpec``) this retriever reads itself."""
        return []

    def rewrites(self) -> list:
        """The rewrites this retriever and its components read, in the order of :meth:`use_llm`."""
        return self.own_rewrites()

    def use_llm(self, session, tables: Sequence[Path]) -> None:
        """Hand over the stage's ``LLMSession`` and the rewrite tables of :meth:`rewrites`."""
        self.bind_llm(session, tables)

    def bind_llm(self, session, tables: Sequence[Path]) -> None:
        """Take this retriever's own share of :meth:`use_llm` (LLM-driven retrievers)."""


class Composite(Retriever):
    """A retriever that searches through other retrievers and owns no index itself: its own params
    are all read at search time (its components' indexes are keyed by their own)."""

    index_fields = ()

    @classmethod
    def undeclared_fields(cls) -> list[str]:
        return []

    def index(self, corpus: Path, folder: Path) -> dict:
        raise TypeError(f"{self.name} has no index of its own: index its components ({self.leaves()})")

    def load(self, folder: Path) -> None:
        raise TypeError(f"{self.name} has no index of its own: use open() with its components' folders")

    @abstractmethod
    def components(self) -> list[Retriever]:
        """The retrievers this one combines, in the order their index folders are passed."""

    def leaves(self) -> list[Retriever]:
        return [leaf for c in self.components() for leaf in c.leaves()]

    def parts(self) -> list[Retriever]:
        return [self, *(p for c in self.components() for p in c.parts())]

    def needs_gpu(self) -> bool:
        return super().needs_gpu() or any(c.needs_gpu() for c in self.components())

    def loads_native(self) -> bool:
        return self.native or any(c.loads_native() for c in self.components())

    def calls_llm(self) -> bool:
        return self.asks_llm or any(c.calls_llm() for c in self.components())

    def model_identities(self) -> list[str]:
        return [m for c in self.components() for m in c.model_identities()]

    def stats(self) -> dict[str, Any]:
        """The components' counters (an approximate dense index's recall among them)."""
        out: dict[str, Any] = {}
        for c in self.components():
            out.update(c.stats())
        return out

    def code_versions(self) -> dict[str, str]:
        versions = {self.name: self.code_identity()}
        for c in self.components():
            versions.update(c.code_versions())
        return versions

    def content_digests(self) -> dict[str, str]:
        digests = {}
        for i, c in enumerate(self.components()):
            digests.update({f"{i}.{role}": d for role, d in c.content_digests().items()})
        return digests

    def rewrites(self) -> list:
        return self.own_rewrites() + [r for c in self.components() for r in c.rewrites()]

    def take_traces(self) -> list[dict]:
        return [t for c in self.components() for t in c.take_traces()]

    def use_llm(self, session, tables: Sequence[Path]) -> None:
        start = len(self.own_rewrites())
        self.bind_llm(session, tables[:start])
        for c in self.components():
            count = len(c.rewrites())
            c.use_llm(session, tables[start:start + count])
            start += count

    def open(self, folders: Sequence[Path], corpus: Path) -> None:
        start = 0
        for component in self.components():
            count = len(component.leaves())
            component.open(folders[start : start + count], corpus)
            start += count


class FirstStage(Composite):
    """A composite that works on the hits of one first-stage retriever, the one its params'
    ``first_stage`` names (rerankers, query rewriters): built once, its one component."""

    def __init__(self, params=None):
        super().__init__(params)
        self._first = self.params.first_stage.build()

    def components(self) -> list[Retriever]:
        return [self._first]
