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
    params: dict[str, Any]

    @classmethod
    def of(cls, retriever: RetrieverConfig) -> "IndexConfig":
        """The index config of a configured retriever."""
        instance = get_retriever_class(retriever.name)(retriever.params)
        return cls(retriever=retriever.name, params=instance.index_params())


def build_index(folder: Path, inputs: list[Artifact], config: IndexConfig) -> dict:
    """Build the retriever's index of the prepared corpus into ``folder``."""
    (prepared,) = inputs
    retriever = get_retriever_class(config.retriever)(config.params)
    return retriever.index(prepared.file("corpus.parquet"), folder)


INDEX = Stage("index", 1, build_index)
