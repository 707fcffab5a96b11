"""Index stage: one index per (dataset, retriever family, index-shaping params)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel

from rbench.config import RetrieverConfig
from retrievers.registry import get_retriever_class
from tasks.cache import Artifact, Stage


class IndexConfig(BaseModel):
    """Only what shapes the index: the retriever name and its index params."""

    retriever: str
    version: int
    params: dict[str, Any]

    @classmethod
    def all_of(cls, retriever: RetrieverConfig) -> list["IndexConfig"]:
        """The indexes a configured retriever searches: its own, or its components' (in order).
        A component's index has the same key as that retriever's own, so it is shared."""
        instance = get_retriever_class(retriever.name)(retriever.params)
        return [cls(retriever=leaf.name, version=leaf.index_version, params=leaf.index_params())
                for leaf in instance.leaves()]


def build_index(folder: Path, inputs: list[Artifact], config: IndexConfig) -> dict:
    """Build the retriever's index of the prepared corpus into ``folder``."""
    (prepared,) = inputs
    retriever = get_retriever_class(config.retriever)(config.params)
    return retriever.index(prepared.file("corpus.parquet"), folder)


INDEX = Stage("index", 1, build_index)
