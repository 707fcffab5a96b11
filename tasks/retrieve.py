"""Retrieve stage: search the subsampled queries and write the object-level run."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pydantic import BaseModel

from rbench.config import RetrieverConfig
from rbench.core.errors import DataError
from rbench.core.store import Artifact, Checkpoint, Stage, Store
from rbench.llm.cache import CallCache
from rbench.llm.client import LLMSession
from rbench.llm.config import RUNTIME_FIELDS as LLM_RUNTIME_FIELDS
from rbench.retrievers.base import RETRIEVERS

log = logging.getLogger("rbench")

HITS_SCHEMA = pa.schema(
    [("query_id", pa.string()), ("object_id", pa.string()), ("rank", pa.int32()), ("score", pa.float64())]
)
RUN_SCHEMA = pa.schema(
    [("query_id", pa.string()), ("object_id", pa.string()), ("doc_id", pa.string()),
     ("rank", pa.int32()), ("score", pa.float64())]
)
CORPUS_BATCH = 1 << 16
TRACE_SCHEMA = pa.schema([("query_id", pa.string()), ("trace", pa.string())])
QUERY_BATCH = 250


RUNTIME_FIELDS = frozenset({"device", "batch_size"}) | LLM_RUNTIME_FIELDS


class RetrieveConfig(BaseModel):
    """The retriever with all its params, how many objects to retrieve per query, the
    search-code version of each component and the identity of each model it runs."""

    retriever: str
    params: dict[str, Any]
    depth: int
    versions: dict[str, str] = {}
    models: list[str] = []
    contents: dict[str, str] = {}

    @classmethod
    def of(cls, retriever: RetrieverConfig, depth: int, instance: Any = None) -> "RetrieveConfig":
        """The retrieve config of a configured retriever (``instance``: built from it already, else built here)."""
        instance = instance if instance is not None else retriever.build()
        return cls(retriever=retriever.name, params=retriever.params, depth=depth,
                   versions=instance.code_versions(), models=instance.model_identities(),
                   contents=instance.content_digests())

    def key_view(self) -> dict[str, Any]:
        """The config without the params that cannot change results (devices, batch sizes,
        LLM server URLs and limits), with the digests of content files (prompts)."""
        view = {**self.model_dump(mode="json", exclude={"contents"}), "params": _without_runtime(self.params)}
        return {**view, "contents": self.contents} if self.contents else view


def _without_runtime(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_runtime(v) for k, v in value.items() if k not in RUNTIME_FIELDS}
    if isinstance(value, list):
        return [_without_runtime(v) for v in value]
    return value


def with_doc_ids(hits: pa.Table, corpus: Path, retriever: str) -> pa.Table:
    """``hits`` with each object's ``doc_id``, in their order (the run's schema), found in one
    streaming pass over the corpus: memory follows the hits, not the corpus. An object id the
    corpus does not hold is a named error."""
    wanted = pc.unique(hits.column("object_id"))
    found = []
    for batch in pq.ParquetFile(corpus).iter_batches(batch_size=CORPUS_BATCH, columns=["object_id", "doc_id"]):
        kept = batch.filter(pc.is_in(batch.column(0), value_set=wanted))
        if kept.num_rows:
            found.append(pa.Table.from_batches([kept]))
    docs = pa.concat_tables(found) if found else pa.table({"object_id": pa.array([], pa.string()),
                                                            "doc_id": pa.array([], pa.string())})
    ordered = hits.append_column("_row", pa.array(range(hits.num_rows), pa.int64()))
    joined = ordered.join(docs, "object_id", join_type="left outer").sort_by("_row")
    missing = joined.filter(pc.is_null(joined.column("doc_id")))
    if missing.num_rows:
        raise DataError(f"retriever {retriever!r} returned {missing.num_rows} hit(s) whose object id is not in "
                             f"the corpus, e.g. {missing.column('object_id')[0].as_py()!r} for query "
                             f"{missing.column('query_id')[0].as_py()!r}: its index belongs to another corpus")
    return joined.select(RUN_SCHEMA.names).cast(RUN_SCHEMA)


def build_retrieve(folder: Path, inputs: list[Artifact], config: RetrieveConfig, checkpoint: Checkpoint,
                   store: Store) -> dict:
    """Search every query to ``depth`` objects and write ``run.parquet`` (with doc ids).

    ``inputs``: the prepared dataset, the query subsample, one index per leaf retriever,
    then one rewrite table per rewrite the retriever reads. Each batch of queries is kept in
    ``checkpoint`` as it finishes (with the agents' traces, written to ``traces.parquet``),
    so a killed run resumes with the batches it had not
    searched; LLM answers are kept in the store's call cache as they return.
    """
    prepared, queries_artifact, *rest = inputs
    retriever = RETRIEVERS.get(config.retriever)(config.params)
    indexes, rewrites = rest[:len(retriever.leaves())], rest[len(retriever.leaves()):]
    session = LLMSession(CallCache(store.root))
    queries = pq.read_table(queries_artifact.file("queries.parquet"), columns=["query_id", "text"])
    qids, texts = queries.column(0).to_pylist(), queries.column(1).to_pylist()
    seconds, searched, resumed, opened = 0.0, 0, 0, False
    for start in range(0, len(qids), QUERY_BATCH):
        name = f"batch-{start:09d}.parquet"
        if checkpoint.done(name):
            resumed += 1
            continue
        if not opened:
            retriever.open([index.path for index in indexes], prepared.file("corpus.parquet"))
            retriever.use_llm(session, [r.file("rewrites.parquet") for r in rewrites])
            opened = True
        batch = dict(zip(qids[start : start + QUERY_BATCH], texts[start : start + QUERY_BATCH]))
        columns: dict[str, list] = {name: [] for name in HITS_SCHEMA.names}
        started = time.perf_counter()
        for qid, hits in retriever.search(batch, config.depth).items():
            for rank, (oid, score) in enumerate(hits, 1):
                columns["query_id"].append(qid)
                columns["object_id"].append(oid)
                columns["rank"].append(rank)
                columns["score"].append(score)
        seconds += time.perf_counter() - started
        searched += len(batch)
        traces = retriever.take_traces()
        if traces:
            checkpoint.write_parquet(f"traces-{start:09d}.parquet", pa.table(
                {"query_id": [t["query_id"] for t in traces],
                 "trace": [json.dumps(t, ensure_ascii=False) for t in traces]}, schema=TRACE_SCHEMA))
        checkpoint.write_parquet(name, pa.table(columns, schema=HITS_SCHEMA))
        log.info("%s: searched %d/%d queries", config.retriever, min(start + QUERY_BATCH, len(qids)), len(qids))
    batches = [checkpoint.read_parquet(f"batch-{start:09d}.parquet") for start in range(0, len(qids), QUERY_BATCH)]
    hits = pa.concat_tables(batches) if batches else HITS_SCHEMA.empty_table()
    run = with_doc_ids(hits, prepared.file("corpus.parquet"), config.retriever)
    pq.write_table(run, folder / "run.parquet")
    traces = [checkpoint.read_parquet(f"traces-{start:09d}.parquet") for start in range(0, len(qids), QUERY_BATCH)
              if checkpoint.done(f"traces-{start:09d}.parquet")]
    if traces:
        pq.write_table(pa.concat_tables(traces), folder / "traces.parquet")
    per_query: dict[str, int] = {}
    for qid in run.column("query_id").to_pylist():
        per_query[qid] = per_query.get(qid, 0) + 1
    return {
        "queries": len(qids), "rows": run.num_rows, "search_seconds": round(seconds, 2),
        "queries_per_second": round(searched / seconds, 1) if seconds else None,
        "queries_with_fewer_than_depth": sum(1 for q in qids if per_query.get(q, 0) < config.depth),
        "batches_resumed": resumed,
        "batches_redone": checkpoint.redone,
        **retriever.stats(),
        **(session.accounting.summary() if retriever.calls_llm() else {}),
    }


def loads_native(config: RetrieveConfig) -> bool:
    """Whether searching loads torch, FAISS or an LLM client (a model, a reranker, an LLM)."""
    return RETRIEVERS.get(config.retriever)(config.params).loads_native()


RETRIEVE = Stage("retrieve", 4, build_retrieve, resumable=True, key_view=RetrieveConfig.key_view,
                 input_parts=(("prepare", "corpus"),), uses_store=True, native=loads_native)
