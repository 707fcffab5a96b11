"""Retrievers registered by name."""

from __future__ import annotations

from rbench.errors import ConfigError
from retrievers.arm import ARM
from retrievers.base import Retriever
from retrievers.bm25 import BM25
from retrievers.bm25_sparse import BM25s
from retrievers.decompose import Decompose
from retrievers.dense import Dense
from retrievers.fusion import Fusion
from retrievers.llm_rerank import LLMRerank
from retrievers.multi_query import MultiQuery
from retrievers.ngrams import NgramIndex
from retrievers.rerank import Rerank
from retrievers.react import ReAct
from retrievers.xrr2 import XRR2

RETRIEVERS: dict[str, type[Retriever]] = {
    cls.name: cls
    for cls in (BM25, BM25s, Dense, Rerank, Fusion, Decompose, MultiQuery, XRR2, LLMRerank, ReAct, ARM,
                NgramIndex)
}


def get_retriever_class(name: str) -> type[Retriever]:
    """The retriever class registered as ``name``; a ConfigError lists the known names otherwise."""
    try:
        return RETRIEVERS[name]
    except KeyError:
        raise ConfigError(f"unknown retriever {name!r}; known retrievers: {sorted(RETRIEVERS)}") from None


def make_retriever(name: str, params: dict | None = None) -> Retriever:
    """Instantiate a registered retriever with validated params."""
    return get_retriever_class(name)(params)
