"""Existing indexes as a retriever's input (a Lucene or FAISS index built elsewhere, or one
Pyserini downloads by name): the index stage writes only a pointer to it, keyed by the
index's fingerprint, so a large index is never rebuilt or copied per experiment. Loading
checks that the index is still the one the pointer was keyed by.

An existing index may hold rbench's object ids (an index of the exported prepared corpus) or
the corpus's own ids, as Pyserini's prebuilt indexes and most users' indexes do: MS MARCO
segment ids, BRIGHT or BEIR document ids. The index stage finds which from a sample of the
index's ids (:func:`match_ids`), checks the counts, and records it in the pointer; searches
then map hits to objects (:class:`NativeIds`)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Iterator

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from rbench.core.errors import DataError
from rbench.core.hashing import folder_fingerprint

POINTER = "prebuilt.json"


def index_folder(value: str, what: str, files: tuple[str, ...]) -> Path:
    """``value`` as an existing folder holding one of ``files`` (a name ending in ``*`` is a
    prefix); a ValueError that names what is missing otherwise."""
    folder = Path(value).expanduser()
    if not folder.is_dir():
        raise ValueError(f"prebuilt {what} {value!r} is not a folder")
    names = [p.name for p in folder.iterdir()]
    if not any(n == f or (f.endswith("*") and n.startswith(f[:-1])) for f in files for n in names):
        raise ValueError(f"prebuilt {what} {value!r} has none of {list(files)}: give the folder the index was "
                         "written to")
    return folder.resolve()


def fingerprint(folder: Path) -> str:
    """The identity of an index folder: its files' names, sizes and edges (O(1) per file)."""
    return f"folder:{folder_fingerprint(folder)}"


def write_pointer(folder: Path, location: str, identity: str, **info) -> dict:
    """Record, in the index stage's ``folder``, which existing index it stands for."""
    record = {"location": location, "identity": identity, **info}
    (folder / POINTER).write_text(json.dumps(record, indent=1))
    return record


def read_pointer(folder: Path) -> dict | None:
    """The pointer in an index stage's ``folder`` (None: the index was built there); a folder
    index that changed since it was keyed is a DataError."""
    path = folder / POINTER
    if not path.exists():
        return None
    record = json.loads(path.read_text())
    location = Path(record["location"])
    if record["identity"].startswith("folder:"):
        if not location.is_dir() or fingerprint(location) != record["identity"]:
            raise DataError(f"the prebuilt index {location} changed (or is gone) since this experiment keyed it: "
                            "run the experiment again, and it is keyed by the index as it is now")
    return record


IDS_PATTERN = r"^(auto|object_id|doc_id|metadata\.[A-Za-z_][A-Za-z0-9_-]*)$"
"""What an existing index's ids are (``ids:`` of ``bm25`` and ``dense``): ``auto`` (found by
matching a sample of them), rbench's ``object_id``, the corpus's ``doc_id`` (BRIGHT, BEIR: one
object per document), or a metadata field that an adapter keeps (``metadata.segment_id``: MS
MARCO v2.1's segment ids)."""
SAMPLE = 1000
_BATCH = 1 << 16


def check_ids(ids: str, prebuilt: str | None) -> None:
    """``ids`` other than ``auto`` only beside ``prebuilt``: a ValueError otherwise."""
    if ids != "auto" and prebuilt is None:
        raise ValueError(f"ids {ids!r} says what a prebuilt index's ids are: give prebuilt too, or leave ids out")


def _columns(kind: str) -> list[str]:
    return ["object_id"] + (["doc_id"] if kind == "doc_id" else ["metadata"] if kind.startswith("metadata.") else [])


ID_MAP = "lucene-ids.parquet"
"""Beside an index rbench built under ids other than its object ids: each object's id in the index
(``doc_id``) and its ``object_id``, so that hits map back without the corpus."""
POSITION_PREFIX = "doc_"
"""``position`` ids are ``doc_<n>``, ``n`` the object's row in the corpus from 0: the ids the ARM
reproduction indexes its serialized objects under (apostolhskouk/ARM at 5a6cb92,
``src/retrieval/bm25.py`` line 60, ``"id": f"doc_{line_count}"``, counting the lines it keeps)."""


def document_count(corpus: Path) -> int | None:
    """How many distinct documents the corpus's objects belong to (None: it has no document ids)."""
    if "doc_id" not in pq.ParquetFile(corpus).schema_arrow.names:
        return None
    return pc.count_distinct(pq.read_table(corpus, columns=["doc_id"]).column(0)).as_py()


def one_object_per_document(corpus: Path) -> bool:
    """Whether every document of the corpus is one object (a BEIR corpus prepared whole); False
    for a table of objects without document ids."""
    return document_count(corpus) == pq.ParquetFile(corpus).metadata.num_rows


def built_ids(corpus: Path, kind: str, titles: bool = False) -> Iterator[tuple[list[str], list[str], list[str]]]:
    """``(ids, texts, titles)`` batches of the corpus under the ids of ``kind`` (``object_id``,
    ``doc_id`` or ``position``), in corpus order, for an index to be built under them; the
    objects' page titles with ``titles``, else an empty list."""
    columns = ["text"] + (["page_title"] if titles else [])
    for ids, batch in _id_batches(corpus, kind, columns):
        names = [t or "" for t in batch.column("page_title").to_pylist()] if titles else []
        yield ids.to_pylist(), batch.column("text").to_pylist(), names


def _id_batches(corpus: Path, kind: str, columns: list[str]) -> Iterator[tuple[pa.Array, pa.RecordBatch]]:
    """The corpus's ids of ``kind`` beside batches of its ``columns`` (and ``object_id``), in order."""
    wanted = sorted({"object_id", *columns, *(["doc_id"] if kind == "doc_id" else [])})
    start = 0
    for batch in pq.ParquetFile(corpus).iter_batches(batch_size=4096, columns=wanted):
        if kind == "position":
            ids = pa.array([f"{POSITION_PREFIX}{n}" for n in range(start, start + batch.num_rows)], pa.string())
        else:
            ids = batch.column(kind)
        start += batch.num_rows
        yield ids, batch


def write_id_map(corpus: Path, kind: str, folder: Path) -> None:
    """Write :data:`ID_MAP` beside an index built under the ids of ``kind`` (nothing for object ids)."""
    if kind == "object_id":
        return
    schema = pa.schema([("object_id", pa.string()), ("doc_id", pa.string())])
    with pq.ParquetWriter(folder / ID_MAP, schema) as writer:
        for ids, batch in _id_batches(corpus, kind, []):
            writer.write_batch(pa.RecordBatch.from_arrays([batch.column("object_id"), ids], schema=schema))


def built_map(folder: Path) -> "NativeIds | None":
    """The translation of a built index's hits to objects (None: it holds object ids)."""
    path = folder / ID_MAP
    return NativeIds(path, "doc_id") if path.is_file() else None


def id_column(batch: pa.RecordBatch, kind: str) -> pa.Array:
    """The ids of ``kind`` of a corpus batch (one per object; null where a metadata field is absent)."""
    if not kind.startswith("metadata."):
        return batch.column(kind)
    field = kind.split(".", 1)[1]
    pattern = '"' + re.escape(field) + r'": "(?P<v>(?:[^"\\]|\\.)*)"'
    values = pc.struct_field(pc.extract_regex(batch.column("metadata"), pattern), [0])
    if pc.any(pc.match_substring(values, "\\")).as_py():  # an escaped character: JSON's own reading
        values = pa.array([None if v is None else json.loads(f'"{v}"') for v in values.to_pylist()], pa.string())
    return values


def _kinds(corpus: Path) -> list[str]:
    """The ids a corpus has: object ids, doc ids, and the text fields of its first objects'
    metadata as ``metadata.<field>``."""
    file = pq.ParquetFile(corpus)
    names = file.schema_arrow.names
    kinds = ["object_id", *(["doc_id"] if "doc_id" in names else [])]
    batch = next(file.iter_batches(batch_size=100, columns=["metadata"]), None) if "metadata" in names else None
    for text in batch.column(0).to_pylist() if batch is not None else []:
        kinds += [f"metadata.{k}" for k, v in json.loads(text or "{}").items()
                  if isinstance(v, str) and f"metadata.{k}" not in kinds]
    return kinds


def match_ids(corpus: Path, sample: list[str], count: int, ids: str, index: str) -> str:
    """Which of the corpus's ids an existing ``index`` holds: ``ids``, or with ``auto`` the first of
    object ids, doc ids and the metadata's text fields that holds every sampled id. The index
    must hold as many entries as the corpus has objects (documents, for doc ids, and then one
    object per document): a DataError says what does not match and how to fix it otherwise."""
    kinds = [ids] if ids != "auto" else _kinds(corpus)
    wanted = pa.array(sorted(set(sample)), pa.string())
    found: dict[str, set] = {k: set() for k in kinds}
    columns = sorted({c for k in kinds for c in _columns(k)})
    for batch in pq.ParquetFile(corpus).iter_batches(batch_size=_BATCH, columns=columns):
        for kind in kinds:
            values = id_column(batch, kind)
            found[kind].update(values.filter(pc.fill_null(pc.is_in(values, value_set=wanted), False)).to_pylist())
    chosen = next((k for k in kinds if len(found[k]) == len(wanted)), None)
    if chosen is None:
        best = max(kinds, key=lambda k: len(found[k]))
        raise DataError(f"the index {index} holds ids such as {sample[:3]}, which are not the corpus's "
                        f"{' / '.join(kinds)} ({len(found[best])} of {len(wanted)} sampled ids are {best}s): index "
                        "this corpus (or export it as the docs show), or give the index of this corpus")
    objects = pq.ParquetFile(corpus).metadata.num_rows
    entries = objects
    if chosen == "doc_id":
        entries = document_count(corpus)
        if entries != objects:
            raise DataError(f"the index {index} holds document ids, but the corpus has {objects} objects for "
                            f"{entries} documents, so a hit cannot name its object: prepare the corpus with one "
                            "object per document (chunker: none), or index its objects")
    if count != entries:
        raise DataError(f"the index {index} holds {count} entries keyed by {chosen}, but the corpus has {entries}: "
                        "it indexes another version or part of this corpus; give the index of exactly this corpus "
                        "(the same shards, split and chunking)")
    return chosen


class NativeIds:
    """The hits of an index keyed by the corpus's own ids (doc ids, MS MARCO segment ids) as
    rbench's object ids: one streaming pass over the corpus per search, so memory follows the
    hits, not the corpus."""

    def __init__(self, corpus: Path, kind: str):
        self.corpus, self.kind = corpus, kind

    def translate(self, run: dict[str, list[tuple[str, float]]]) -> dict[str, list[tuple[str, float]]]:
        """``run`` with each hit's id replaced by its object id; an id the corpus lacks is a DataError."""
        wanted = pa.array(sorted({i for hits in run.values() for i, _ in hits}), pa.string())
        objects = self._by_value(wanted)
        lost = [i for i in wanted.to_pylist() if i not in objects]
        if lost:
            raise DataError(f"the index returned {len(lost)} id(s) that are not {self.kind}s of the corpus "
                            f"{self.corpus}, e.g. {lost[:3]}: it indexes another corpus")
        return {q: [(objects[i], s) for i, s in hits] for q, hits in run.items()}

    def _by_value(self, wanted: pa.Array) -> dict[str, str]:
        """The corpus's ids of this kind -> object ids, for the ``wanted`` ones."""
        objects: dict[str, str] = {}
        for batch in pq.ParquetFile(self.corpus).iter_batches(batch_size=_BATCH, columns=_columns(self.kind)):
            ids = id_column(batch, self.kind)
            keep = pc.fill_null(pc.is_in(ids, value_set=wanted), False)
            objects.update(zip(ids.filter(keep).to_pylist(), batch.column("object_id").filter(keep).to_pylist()))
        return objects


def native_ids(folder: Path, corpus: Path) -> NativeIds | None:
    """The translation for the index an index stage's ``folder`` points at, or None when its ids are object ids."""
    pointer = read_pointer(folder)
    kind = (pointer or {}).get("ids", "object_id")
    return None if kind == "object_id" else NativeIds(corpus, kind)


def sample_positions(count: int, size: int = SAMPLE) -> list[int]:
    """Up to ``size`` positions spread evenly over ``count`` entries (first and last included)."""
    if count <= size:
        return list(range(count))
    return sorted({round(i * (count - 1) / (size - 1)) for i in range(size)})
