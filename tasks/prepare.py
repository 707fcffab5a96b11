"""Prepare stage: a dataset adapter's objects and queries, streamed into Parquet tables."""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path
from typing import Iterable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from rbench.config import DatasetConfig
from rbench.core.errors import DataError
from rbench.core.identity import code_digest
from rbench.core.store import Artifact, Stage, write_atomic
from rbench.tasks.datasets.base import get_adapter, object_id
from rbench.tasks.validate import check_missing_gold, validate

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
GRADES = pa.field("gold_grades", pa.list_(pa.int32()))
EXCLUDED = pa.field("excluded_doc_ids", pa.list_(pa.string()))
PLACES = "_places.parquet"  # (hash, doc_id, position, origin) of every object, removed once checked
PLACES_SCHEMA = pa.schema([("key", pa.int64()), ("doc_id", pa.string()), ("position", pa.int64()),
                           ("origin", pa.string())])
BATCH = 10_000
CORPUS_KEY_COLUMNS = ["object_id", "text", "doc_id", "page_title", "source", "modality"]


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
    """Write ``corpus.parquet``, ``queries.parquet`` and ``validation.json``; refuse unusable data:
    an empty document or query id (it would write malformed TREC lines), a query id twice, two
    objects at one position of one document (two records sharing a document id)."""
    (raw,) = inputs
    adapter = get_adapter(config.adapter)
    params = adapter.Params.model_validate(config.params)
    empty, blank = 0, []
    places = folder / PLACES

    def where(item) -> str:
        return item.origin or f"dataset {config.name!r}"

    def corpus_rows() -> Iterator[dict]:
        nonlocal empty
        with pq.ParquetWriter(places, PLACES_SCHEMA) as side:
            buffer: list[dict] = []
            for obj in adapter.objects(raw.path, params):
                if not obj.doc_id.strip():
                    raise DataError(f"{where(obj)}: empty document id {obj.doc_id!r}: every object needs one "
                                    "(check the id fields, e.g. doc_id_fields for jsonl)")
                if not obj.text.strip():
                    empty += 1
                    continue
                buffer.append({"key": hash((obj.doc_id, obj.position)), "doc_id": obj.doc_id,
                               "position": obj.position, "origin": obj.origin})
                if len(buffer) >= BATCH:
                    side.write_table(pa.Table.from_pylist(buffer, schema=PLACES_SCHEMA))
                    buffer.clear()
                yield {
                    "object_id": object_id(obj.doc_id, obj.position, obj.text), "text": obj.text,
                    "doc_id": obj.doc_id, "page_title": obj.page_title, "source": obj.source,
                    "modality": obj.modality,
                    "metadata": json.dumps(obj.metadata, ensure_ascii=False, sort_keys=True) if obj.metadata else "{}",
                }
            if buffer:
                side.write_table(pa.Table.from_pylist(buffer, schema=PLACES_SCHEMA))

    def query_rows() -> Iterator[dict]:
        seen: set[str] = set()
        for q in adapter.queries(raw.path, params):
            if not q.query_id.strip():
                raise DataError(f"{where(q)}: empty query id {q.query_id!r}: every query needs one "
                                "(check the query id field, e.g. query_id_field for jsonl)")
            if q.query_id in seen:
                raise DataError(f"{where(q)}: query id {q.query_id!r} appears twice in dataset {config.name!r}")
            seen.add(q.query_id)
            if not q.text.strip():
                blank.append(q.query_id)
            yield q.model_dump(exclude={"origin"})

    write_batches(folder / "corpus.parquet", CORPUS_SCHEMA, corpus_rows())
    try:
        check_places(places, config.name)
    finally:
        places.unlink(missing_ok=True)
    query_schema = pa.schema([*QUERY_SCHEMA, *([GRADES] if adapter.graded else []),
                              *([EXCLUDED] if adapter.excludes else [])])
    write_batches(folder / "queries.parquet", query_schema, query_rows())
    digests = {"corpus": table_digest(folder / "corpus.parquet", CORPUS_KEY_COLUMNS),
               "queries": table_digest(folder / "queries.parquet", query_schema.names)}
    report = validate(folder / "corpus.parquet", folder / "queries.parquet", config.name, empty)
    report["blank_queries"], report["blank_query_examples"] = len(blank), blank[:5]
    write_atomic(folder / "validation.json", json.dumps(report, indent=2, ensure_ascii=False))
    if blank:
        log.warning("%s: %d queries are blank and are scored as they are (no retriever can find their gold), "
                    "e.g. %s: fix or remove them in the queries file", config.name, len(blank), blank[:3])
    if report["queries_without_gold_in_corpus"] or report["queries_with_some_gold_missing"]:
        log.warning("%s: %d queries have no gold document in the corpus, %d miss some (e.g. %s)", config.name,
                    report["queries_without_gold_in_corpus"], report["queries_with_some_gold_missing"],
                    report["missing_gold_examples"][:2])
    if report["queries_with_empty_gold"]:
        log.warning("%s: %d queries have an empty gold list and are not scored (e.g. %s)", config.name,
                    report["queries_with_empty_gold"], report["empty_gold_examples"][:3])
    if report["duplicate_records"]:
        log.warning("%s: %d objects repeat the document and text of another one (kept: a table may repeat a row)",
                    config.name, report["duplicate_records"])
    return {**{k: v for k, v in report.items() if not isinstance(v, list)}, "digests": digests}


def check_places(places: Path, dataset: str) -> None:
    """Refuse two objects at the same position of one document: two records that share a
    document id (a BEIR corpus line repeated with another text). The side file holds a hash
    of each (document, position): the hashes are sorted in NumPy (8 bytes an object), and
    only the rows whose hash repeats are read again, ids and all, to confirm a clash and
    name the records' files and lines."""
    keys = np.sort(pq.read_table(places, columns=["key"]).column("key").to_numpy())
    repeated = pa.array(np.unique(keys[1:][keys[1:] == keys[:-1]]))
    if not len(repeated):
        return
    seen: dict[tuple[str, int], str | None] = {}
    for batch in pq.ParquetFile(places).iter_batches(batch_size=BATCH):
        batch = batch.filter(pc.is_in(batch.column("key"), repeated))
        for doc_id, position, origin in zip(*(batch.column(c).to_pylist() for c in ("doc_id", "position", "origin"))):
            if (doc_id, position) in seen:
                origins = " and ".join(o for o in (seen[doc_id, position], origin) if o) or f"dataset {dataset!r}"
                raise DataError(f"{origins}: two records share the document id {doc_id!r}; give each document its "
                                "own id (or merge the records into one)")
            seen[doc_id, position] = origin


def table_digest(path: Path, columns: list[str]) -> str:
    """sha256 of a Parquet table's values in ``columns``, row by row: equal for equal content
    however the file was written (batching, library versions)."""
    h = hashlib.sha256("\x1f".join(columns).encode())
    for batch in pq.ParquetFile(path).iter_batches(batch_size=BATCH, columns=columns):
        for row in zip(*(batch.column(c).to_pylist() for c in columns)):
            h.update(json.dumps(row, ensure_ascii=False).encode())
            h.update(b"\n")
    return h.hexdigest()


def prepare_key(config: DatasetConfig) -> dict:
    """What shapes the prepared tables: the adapter, its code (version and the digest of its
    module's import closure), and its params without file paths; not the dataset's name (a
    label) nor ``max_missing_gold`` (a policy)."""
    adapter = get_adapter(config.adapter)
    return {"adapter": adapter.name, "adapter_version": f"{adapter.version}:{code_digest(type(adapter).__module__)}",
            "params": adapter.key_params(config.params)}


def check_prepared(artifact: Artifact, config: DatasetConfig) -> None:
    """Apply the dataset's ``max_missing_gold`` to a built or reused prepared table."""
    report = json.loads(artifact.file("validation.json").read_text())
    check_missing_gold(report, config.name, config.max_missing_gold)


PREPARE = Stage("prepare", 5, build_prepare, key_view=prepare_key, check=check_prepared)
