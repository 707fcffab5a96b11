"""Prepare stage: a dataset adapter's objects and queries, streamed into Parquet tables."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Iterable, Iterator

import pyarrow as pa
import pyarrow.parquet as pq

from rbench.config import DatasetConfig
from rbench.errors import DataError
from tasks.cache import Artifact, Stage
from tasks.datasets import get_adapter
from tasks.datasets.base import object_id

log = logging.getLogger("rbench")

CORPUS_SCHEMA = pa.schema(
    [
        ("object_id", pa.string()),
        ("text", pa.string()),
        ("doc_id", pa.string()),
        ("page_title", pa.string()),
        ("source", pa.string()),
        ("modality", pa.string()),
        ("metadata", pa.string()),
    ]
)
QUERY_SCHEMA = pa.schema(
    [("query_id", pa.string()), ("text", pa.string()), ("gold_doc_ids", pa.list_(pa.string()))]
)
BATCH = 10_000


def write_batches(path: Path, schema: pa.Schema, rows: Iterable[dict], batch: int = BATCH) -> int:
    """Write dict rows to Parquet in batches so memory does not grow with the table; return the count."""
    count = 0
    with pq.ParquetWriter(path, schema) as writer:
        buffer: list[dict] = []
        for row in rows:
            buffer.append(row)
            if len(buffer) >= batch:
                writer.write_table(pa.Table.from_pylist(buffer, schema=schema))
                count += len(buffer)
                buffer.clear()
        if buffer:
            writer.write_table(pa.Table.from_pylist(buffer, schema=schema))
            count += len(buffer)
    return count


def build_prepare(folder: Path, inputs: list[Artifact], config: DatasetConfig) -> dict:
    """Write ``corpus.parquet`` and ``queries.parquet``; refuse empty or unusable data."""
    (raw,) = inputs
    adapter = get_adapter(config.adapter)
    params = adapter.Params.model_validate(config.params)
    stats = {"docs": set(), "ids": set(), "duplicates": 0, "empty": 0}

    def corpus_rows() -> Iterator[dict]:
        for obj in adapter.objects(raw.path, params):
            if not obj.text.strip():
                stats["empty"] += 1
                continue
            oid = object_id(obj.doc_id, obj.position, obj.text)
            if oid in stats["ids"]:
                stats["duplicates"] += 1
                continue
            stats["ids"].add(oid)
            stats["docs"].add(obj.doc_id)
            yield {
                "object_id": oid, "text": obj.text, "doc_id": obj.doc_id,
                "page_title": obj.page_title, "source": obj.source, "modality": obj.modality,
                "metadata": json.dumps(obj.metadata, ensure_ascii=False, sort_keys=True),
            }

    n_objects = write_batches(folder / "corpus.parquet", CORPUS_SCHEMA, corpus_rows())
    if n_objects == 0:
        raise DataError(f"dataset {config.name!r} produced an empty corpus: check its files and field names")
    missing_gold = 0
    query_ids: set[str] = set()

    def query_rows() -> Iterator[dict]:
        nonlocal missing_gold
        for q in adapter.queries(raw.path, params):
            if q.query_id in query_ids:
                raise DataError(f"dataset {config.name!r}: query id {q.query_id!r} appears twice")
            query_ids.add(q.query_id)
            if not any(g in stats["docs"] for g in q.gold_doc_ids):
                missing_gold += 1
            yield q.model_dump()

    n_queries = write_batches(folder / "queries.parquet", QUERY_SCHEMA, query_rows())
    if n_queries == 0:
        raise DataError(f"dataset {config.name!r} has no queries: check its queries file")
    if missing_gold == n_queries:
        raise DataError(
            f"dataset {config.name!r}: none of the {n_queries} queries has a gold document in the "
            "corpus, so every metric would be 0. Check that the gold ids match the corpus doc ids "
            "(for jsonl: doc_id_fields and gold_field)"
        )
    if missing_gold:
        log.warning("%s: %d of %d queries have no gold document in the corpus", config.name, missing_gold, n_queries)
    return {
        "objects": n_objects, "documents": len(stats["docs"]), "queries": n_queries,
        "queries_without_gold_in_corpus": missing_gold, "empty_skipped": stats["empty"],
        "duplicates_skipped": stats["duplicates"],
    }


PREPARE = Stage("prepare", 1, build_prepare)
