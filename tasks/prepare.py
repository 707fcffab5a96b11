"""Prepare stage: a dataset adapter's objects and queries, streamed into Parquet tables."""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Iterable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from rbench.config import DatasetConfig
from rbench.core.errors import DataError
from rbench.core.identity import class_digest
from rbench.core.store import Artifact, Stage, write_atomic
from rbench.dataset_adapters.base import Adapter, RowByRow, batches_of, get_adapter, object_ids
from rbench.dataset_adapters.chunking import chonky_splitter
from rbench.dataset_adapters.columnar import ahead, is_blank, utf8_buffers
from rbench.dataset_adapters.validate import check_missing_gold, repeated_keys, row_hashes, validate
from rbench.tasks.download import PROGRESS_SECONDS

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
NONRELEVANT = pa.field("nonrelevant_doc_ids", pa.list_(pa.string()))
GOLD_FOUND = pa.field("gold_found", pa.int32())
"""How many of a query's gold documents (listed once each) the corpus has: what no retriever can pass."""
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
    objects at one position of one document (two records sharing a document id). The corpus is
    read by column where the adapter can (:meth:`Adapter.object_batches`), and row by row where
    it cannot or where its columnar reader gives up (:class:`RowByRow`)."""
    (raw,) = inputs
    adapter = get_adapter(config.adapter)
    params = adapter.Params.model_validate(config.params)
    if adapter.models(params):
        chonky_splitter.cache_clear()  # the model's files as they are now (the key read them), not as first loaded
    blank: list[str] = []
    places = folder / PLACES

    def where(item) -> str:
        return item.origin or f"dataset {config.name!r}"

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

    checked = None if adapter.unique_positions else places
    corpus = folder / "corpus.parquet"

    def write(batches: Iterable[pa.RecordBatch], lines_known: bool) -> tuple[int, str, np.ndarray, np.ndarray, int]:
        written = write_corpus(corpus, batches, checked, config.name, config.max_object_bytes)
        if checked:
            check_places(places, config.name, lines_known, adapter.repeated_record)
        return written

    try:
        try:
            empty, corpus_digest, keys, records, largest = write(ahead(adapter.object_batches(raw.path, params)),
                                                                 False)
        except RowByRow as why:
            log.info("%s: read row by row (%s)", config.name, why)
            empty, corpus_digest, keys, records, largest = write(batches_of(adapter.objects(raw.path, params)), True)
    finally:
        places.unlink(missing_ok=True)
    if not len(keys):
        raise DataError(f"dataset {config.name!r} produced an empty corpus from {sources(params, raw)}"
                        f" ({empty} objects with blank text skipped): check the files and the field names (for "
                        "jsonl: text_field and doc_id_fields)")
    query_schema = pa.schema([*QUERY_SCHEMA, *([GRADES, NONRELEVANT] if adapter.graded else []),
                              *([EXCLUDED] if adapter.excludes else [])])
    write_batches(folder / "queries.parquet", query_schema, query_rows())
    if not pq.ParquetFile(folder / "queries.parquet").metadata.num_rows:
        raise DataError(f"dataset {config.name!r} has no queries in {sources(params, raw, ('queries', 'topics'))}: "
                        "check the queries file (one query per line; for jsonl: query_id_field and text_field)")
    report, found = validate(corpus, folder / "queries.parquet", config.name, empty, keys, records)
    with_found = pq.read_table(folder / "queries.parquet")
    with_found = with_found.append_column(GOLD_FOUND, pa.array(
        [found.get(q, 0) for q in with_found.column("query_id").to_pylist()], pa.int32()))
    pq.write_table(with_found, folder / "queries.parquet")
    digests = {"corpus": corpus_digest,
               "queries": table_digest(folder / "queries.parquet", with_found.schema.names)}
    report["blank_queries"], report["blank_query_examples"] = len(blank), blank[:5]
    report["largest_object_bytes"] = largest
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
        log.warning("%s: %d objects repeat the document and text of another one (kept: a table may repeat a row, "
                    "a text a passage)",
                    config.name, report["duplicate_records"])
    return {**{k: v for k, v in report.items() if not isinstance(v, list)}, "digests": digests}


def sources(params, raw: Artifact, names: tuple[str, ...] = ("corpus", "path")) -> str:
    """The files a dataset's corpus (or, with ``names`` such as ``("queries", "topics")``, its
    queries) was read from, as the user named them: those params where the user gave one, else
    the files of the download artifact."""
    paths = [str(getattr(params, name)) for name in names if getattr(params, name, None) is not None]
    if paths:
        return ", ".join(paths)
    files = sorted(str(p.relative_to(raw.path)) for p in raw.path.rglob("*") if p.is_file() and
                   not p.name.startswith("_"))
    return ", ".join(files[:5]) + (f" and {len(files) - 5} more" if len(files) > 5 else "") or str(raw.path)


def write_corpus(path: Path, batches: Iterable[pa.RecordBatch], places: Path | None,
                 dataset: str, max_object_bytes: int | None = None) -> tuple[int, str, np.ndarray, np.ndarray, int]:
    """Write the corpus table from batches of :data:`OBJECT_SCHEMA`, each object with its id;
    objects whose text is blank (whitespace and NUL characters only) are left out and counted.
    Returns that count, the table's digest (:class:`TableDigest` of :data:`CORPUS_KEY_COLUMNS`),
    for the checks of :func:`validate` its ids as numbers (see :func:`object_ids`) and its records' hashes
    (:func:`row_hashes`), 8 bytes an object each, and its largest text in bytes. An empty document id,
    or a text over ``max_object_bytes``, is a DataError naming the object's file and line. With ``places``, the side file for :func:`check_places` is
    written beside it. A thread writes and digests each batch while the next one gets its ids.
    Progress is logged every ``PROGRESS_SECONDS``."""
    empty, digest, keys, records = 0, TableDigest(CORPUS_KEY_COLUMNS), [], []
    count, largest, last = 0, 0, time.monotonic()
    started = last

    def write(batch: pa.RecordBatch) -> None:
        writer.write_batch(batch, row_group_size=BATCH)
        digest.update(batch)

    with pq.ParquetWriter(path, CORPUS_SCHEMA) as writer, ThreadPoolExecutor(1, "rbench-write") as pool, \
            (pq.ParquetWriter(places, PLACES_SCHEMA) if places else contextlib.nullcontext()) as side:
        written = None
        for batch in batches:
            bad = np.flatnonzero(is_blank(batch.column("doc_id")))
            if len(bad):
                first = batch.slice(int(bad[0]), 1).to_pylist()[0]
                raise DataError(f"{first['origin'] or f'dataset {dataset!r}'}: empty document id {first['doc_id']!r}: "
                                "every object needs one (check the id fields, e.g. doc_id_fields for jsonl)")
            blank = is_blank(batch.column("text"), nul=True)
            if blank.any():
                empty += int(blank.sum())
                batch = batch.filter(pa.array(~blank))
            largest = max(largest, _largest(batch, dataset, max_object_bytes))
            if side is not None:
                side.write_batch(pa.RecordBatch.from_arrays(
                    [pa.array(row_hashes(batch, ["doc_id", "position"]).view(np.int64)), batch.column("doc_id"),
                     batch.column("position"), batch.column("origin")], schema=PLACES_SCHEMA))
            ids, id_keys = object_ids(batch.column("doc_id"), batch.column("position"), batch.column("text"))
            batch = pa.RecordBatch.from_arrays([ids, *(batch.column(c) for c in CORPUS_SCHEMA.names[1:])],
                                               schema=CORPUS_SCHEMA)
            if written is not None:
                written.result()
            written = pool.submit(write, batch)
            keys.append(id_keys)
            records.append(row_hashes(batch, ["doc_id", "text"]))
            count += batch.num_rows
            if time.monotonic() - last >= PROGRESS_SECONDS:
                last = time.monotonic()
                log.info("prepare %s: %d objects written (%.0f/s)", dataset, count, count / (last - started))
        if written is not None:
            written.result()
    return (empty, digest.hexdigest(), *(np.concatenate(k) if k else np.zeros(0, dtype=np.uint64)
                                         for k in (keys, records)), largest)


def _largest(batch: pa.RecordBatch, dataset: str, limit: int | None) -> int:
    """The largest text of ``batch`` in bytes; one over ``limit`` is a DataError naming it and the fix."""
    if not batch.num_rows:
        return 0
    sizes = pc.binary_length(batch.column("text")).to_numpy(zero_copy_only=False)
    biggest = int(sizes.max())
    if limit is not None and biggest > limit:
        at = int(np.flatnonzero(sizes > limit)[0])
        first = batch.slice(at, 1).to_pylist()[0]
        raise DataError(f"{first['origin'] or f'dataset {dataset!r}'}: an object of {int(sizes[at]):,} bytes "
                        f"(document {first['doc_id']!r}) is over the dataset's max_object_bytes of {limit:,}: cut "
                        "such texts into smaller objects (a chunker, e.g. params.chunker: {kind: tokens}, where the "
                        "adapter has one) or raise max_object_bytes in the dataset's settings")
    return biggest


def check_places(places: Path, dataset: str, lines_known: bool = True,
                 message: str = Adapter.repeated_record) -> None:
    """Refuse two objects at the same position of one document: two records that share a
    document id (a BEIR corpus line repeated with another text). The side file holds a hash
    of each (document, position): the hashes are sorted in NumPy (8 bytes an object), and
    only the rows whose hash repeats are read again, ids and all, to confirm a clash and
    name the records' files and lines. Without ``lines_known`` (a columnar reader), a clash of
    records without origins raises RowByRow, so that the row reader finds it with its lines.
    ``message`` (the adapter's ``repeated_record``) says what the clash means."""
    repeated = pa.array(repeated_keys(pq.read_table(places, columns=["key"]).column("key").to_numpy().copy()))
    if not len(repeated):
        return
    seen: dict[tuple[str, int], str | None] = {}
    for batch in pq.ParquetFile(places).iter_batches(batch_size=BATCH):
        batch = batch.filter(pc.is_in(batch.column("key"), repeated))
        for doc_id, position, origin in zip(*(batch.column(c).to_pylist() for c in ("doc_id", "position", "origin"))):
            if (doc_id, position) in seen:
                if not lines_known and seen[doc_id, position] is None and origin is None:
                    raise RowByRow(f"two records share the document id {doc_id!r}")
                origins = " and ".join(o for o in (seen[doc_id, position], origin) if o) or f"dataset {dataset!r}"
                raise DataError(f"{origins}: {message.format(doc_id=doc_id, position=position)}")
            seen[doc_id, position] = origin


class TableDigest:
    """sha256 of a table's values in ``columns``, fed batch by batch: per column, one stream of
    its values' lengths (little-endian int64, -1 for null) and one of their UTF-8 bytes (for a
    column that is not text, one JSON value a line), so equal content gives an equal digest
    however the table was batched or written (row groups, library versions)."""

    def __init__(self, columns: list[str]):
        self.columns = columns
        self.streams = {c: (hashlib.sha256(), hashlib.sha256()) for c in columns}

    def update(self, batch: pa.RecordBatch) -> None:
        """Feed the next rows."""
        for name in self.columns:
            lengths, values = self.streams[name]
            column = batch.column(name)
            if pa.types.is_string(column.type) and len(column):
                lengths.update(pc.fill_null(pc.binary_length(column), -1).to_numpy().astype("<i8").tobytes())
                values.update(utf8_buffers(column)[1].tobytes())
            else:
                for value in column.to_pylist():
                    values.update(json.dumps(value, ensure_ascii=False).encode() + b"\n")

    def hexdigest(self) -> str:
        """The digest of every row fed so far."""
        h = hashlib.sha256("\x1f".join(self.columns).encode())
        for lengths, values in self.streams.values():
            h.update(lengths.digest() + values.digest())
        return h.hexdigest()


def table_digest(path: Path, columns: list[str]) -> str:
    """The :class:`TableDigest` of a Parquet file's ``columns``."""
    digest = TableDigest(columns)
    for batch in pq.ParquetFile(path).iter_batches(batch_size=BATCH, columns=columns):
        digest.update(batch)
    return digest.hexdigest()


def prepare_key(config: DatasetConfig) -> dict:
    """What shapes the prepared tables: the adapter, its code (version and the digest of its
    module's import closure), and its params without file paths; for an adapter that runs a
    model (:meth:`~rbench.dataset_adapters.base.Adapter.models`), each model's identity (a
    local folder by its files' digest, packaged weights by their package's version) and the
    versions of the libraries that cut with it (chonky; magika, which finds a text's markup);
    not the dataset's name (a label) nor ``max_missing_gold`` (a policy)."""
    adapter = get_adapter(config.adapter)
    key = {"adapter": adapter.name, "adapter_version": f"{adapter.version}:{class_digest(type(adapter))}",
           "params": adapter.key_params(config.params)}
    models = adapter.models(adapter.Params.model_validate(config.params))
    if models:
        from rbench.retrievers.models import model_identity

        key["models"] = [model_identity(m) for m in models]
        key["libraries"] = {name: _installed(name) for name in ("chonky", "magika")}
    return key


def _installed(package: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(package)
    except PackageNotFoundError:
        return None


def check_prepared(artifact: Artifact, config: DatasetConfig) -> None:
    """Apply the dataset's ``max_missing_gold`` and ``max_object_bytes`` to a built or reused prepared table."""
    report = json.loads(artifact.file("validation.json").read_text())
    check_missing_gold(report, config.name, config.max_missing_gold)
    largest = report.get("largest_object_bytes", 0)
    if largest > config.max_object_bytes:
        raise DataError(f"dataset {config.name!r}: its prepared corpus holds an object of {largest:,} bytes, over its "
                        f"max_object_bytes of {config.max_object_bytes:,}: cut such texts into smaller objects (a "
                        "chunker) or raise max_object_bytes in the dataset's settings")


def chunks_with_a_model(config: DatasetConfig) -> bool:
    """Whether preparing this dataset runs a model (torch): MultiHop-RAG's splitter, a chonky chunker."""
    adapter = get_adapter(config.adapter)
    return bool(adapter.models(adapter.Params.model_validate(config.params)))


PREPARE = Stage("prepare", 7, build_prepare, key_view=prepare_key, check=check_prepared, native=chunks_with_a_model)
