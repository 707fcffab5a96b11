"""The retriever interface: build an index from a corpus, save it, load it, search it."""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any, ClassVar, Iterator, Mapping

import pyarrow.parquet as pq
from pydantic import BaseModel

Hits = list[tuple[str, float]]
Run = dict[str, Hits]


def corpus_batches(corpus: Path, batch_size: int = 4096) -> Iterator[tuple[list[str], list[str]]]:
    """Stream ``(object_ids, texts)`` batches from a corpus Parquet file."""
    for batch in pq.ParquetFile(corpus).iter_batches(batch_size=batch_size, columns=["object_id", "text"]):
        yield batch.column(0).to_pylist(), batch.column(1).to_pylist()


class Retriever(ABC):
    """A retrieval method over corpus objects.

    Subclasses set ``name``, ``description``, a pydantic ``Params`` model and
    ``index_fields`` (the params that shape the index: only those enter the index's
    cache key). ``index`` writes everything ``load`` needs into a folder; ``search``
    returns, per query id, ``(object_id, score)`` pairs best first.
    """

    name: ClassVar[str]
    description: ClassVar[str]
    Params: ClassVar[type[BaseModel]]
    index_fields: ClassVar[tuple[str, ...]] = ()

    def __init__(self, params: BaseModel | Mapping[str, Any] | None = None):
        if isinstance(params, self.Params):
            self.params = params
        else:
            self.params = self.Params.model_validate(dict(params or {}))

    def index_params(self) -> dict[str, Any]:
        """The params that determine the index (the rest only affect search)."""
        dumped = self.params.model_dump(mode="json")
        return {k: dumped[k] for k in self.index_fields}

    @abstractmethod
    def index(self, corpus: Path, folder: Path) -> dict:
        """Index the corpus Parquet file into ``folder``; return a summary (counts, timings)."""

    @abstractmethod
    def load(self, folder: Path) -> None:
        """Load an index written by :meth:`index`."""

    @abstractmethod
    def search(self, queries: Mapping[str, str], k: int) -> Run:
        """Top-``k`` objects per query, best first."""
