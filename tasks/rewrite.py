"""Rewrite stage: an LLM rewrites every query of a subsample (decomposition, keyword queries,
expansion). Its output (per query the rewritten queries, the master query, the raw answer
and the parse status) is what LLM retrievers read, so changing a first stage or a reranker
asks the LLM nothing, and changing the prompt reruns only this and what depends on it.
Answers go to the store's call cache as they return: a killed build resumes with the
queries it had not asked."""

from __future__ import annotations

import time
from pathlib import Path

import pyarrow.parquet as pq

from rbench.core.store import Artifact, Stage, Store
from rbench.llm.cache import CallCache
from rbench.llm.client import LLMSession
from rbench.llm.rewrite import RewriteSpec, rewrite, rewrites_table


def build_rewrite(folder: Path, inputs: list[Artifact], config: RewriteSpec, store: Store) -> dict:
    """Rewrite the subsample's queries into ``rewrites.parquet``; return the LLM accounting."""
    (queries_artifact,) = inputs
    table = pq.read_table(queries_artifact.file("queries.parquet"), columns=["query_id", "text"])
    queries = dict(zip(table.column(0).to_pylist(), table.column(1).to_pylist()))
    session = LLMSession(CallCache(store.root))
    started = time.perf_counter()
    rewritten = rewrite(config, queries, session.llm(config.llm))
    seconds = time.perf_counter() - started
    pq.write_table(rewrites_table(queries, rewritten), folder / "rewrites.parquet")
    return {"queries": len(queries), "kind": config.kind, "rewrite_seconds": round(seconds, 2),
            "queries_per_second": round(len(queries) / seconds, 2) if seconds else None,
            "call_cache_damaged": session.cache.corrupt, **session.accounting.summary()}


def rewrite_key_view(config: RewriteSpec) -> dict:
    """The stage key's view of the spec (see :meth:`RewriteSpec.key_view`)."""
    return config.key_view()


def calls_llm(config: RewriteSpec) -> bool:
    """A rewrite always calls an LLM (in this process with transformers, or a server's client)."""
    return True


REWRITE = Stage("rewrite", 2, build_rewrite, key_view=rewrite_key_view, uses_store=True, native=calls_llm)
