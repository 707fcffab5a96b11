"""The dataset adapter interface and the row shapes adapters yield."""

from __future__ import annotations

import functools
import hashlib
import json
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any, Callable, ClassVar, Iterable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import BaseModel, ConfigDict, Field

from rbench.core.errors import DataError
from rbench.core.hashing import file_digest
from rbench.core.registry import Registry

ADAPTERS: Registry = Registry("dataset adapter", package="rbench.dataset_adapters", group="rbench.datasets",
                              hint="For your own files use adapter 'jsonl'.")
"""Every dataset adapter class by name: the modules of ``rbench.dataset_adapters`` register theirs
with ``@ADAPTERS.register``; another package adds one through the ``rbench.dataset_adapters`` entry-point group."""


def get_adapter(name: str) -> "Adapter":
    """An instance of the adapter registered as ``name``; a ConfigError lists the known names otherwise."""
    return ADAPTERS.get(name)()


class FileSpec(BaseModel):
    """A raw input file (or folder): its path inside the download folder and the mirror,
    its sha256 when pinned, and where to get it.

    Sources, first match wins: ``local`` (a user file), the mirror folder, the Hugging
    Face dataset repo ``hf_repo`` at ``revision`` (``patterns`` select a folder's files,
    else the file ``hf_path``, default ``name``), then ``url``. ``local`` is excluded
    from the cache key, so moving an unchanged file reruns nothing. Without ``sha256``
    the content is not verified; pin ``revision`` to a commit for reproducible keys.
    ``mirror_names``: other paths the same file may have inside a mirror (a mirror laid out
    flat, such as the development mirror's ``chunking_evaluation/``), tried after ``name``.
    ``observed`` is set when a download is planned (:meth:`DownloadConfig.resolved`): the
    fingerprint of an unpinned file's mirror copy, so that the key follows what is read.
    A pinned mirror file, or one marked ``link`` (a published release nobody edits in place, such
    as MS MARCO's 25 GB of shards), is hard-linked into the store where the file system allows;
    a user's own file (``local``) is copied unless marked ``link``, so that fixing it in place
    never changes the bytes under a finished download artifact.
    """

    model_config = ConfigDict(frozen=True)

    name: str
    sha256: str | None = None
    url: str | None = None
    hf_repo: str | None = None
    hf_path: str | None = None
    revision: str = "main"
    patterns: list[str] | None = None
    observed: str | None = None
    local: Path | None = Field(default=None, exclude=True)
    mirror_names: tuple[str, ...] = Field(default=(), exclude=True)

    def in_mirror(self, mirror: Path | None) -> Path | None:
        """This file's copy in ``mirror`` under its name or one of its ``mirror_names``, or None."""
        if mirror is None:
            return None
        return next((mirror / n for n in (self.name, *self.mirror_names) if (mirror / n).exists()), None)
    link: bool = Field(default=False, exclude=True)


def local_file(name: str, path: Path) -> FileSpec:
    """A user's file as the download stage's input ``name``, pinned to its sha256. The digest is
    computed once per process per (path, size, modification time): the CLI's data check, its
    cached-rerun check and the flow ask for the same files."""
    stat = path.stat()
    return FileSpec(name=name, sha256=_digest_of(path.resolve(), stat.st_size, stat.st_mtime_ns), local=path)


@functools.lru_cache(maxsize=4096)
def _digest_of(path: Path, size: int, mtime_ns: int) -> str:
    return file_digest(path)


class CorpusObject(BaseModel):
    """One retrievable object before it gets its id (see DESIGN.md, corpus contract).
    ``origin`` (``file:line``, optional) is where it was read: errors name it; it is not stored."""

    text: str
    doc_id: str
    page_title: str
    source: str
    modality: str
    position: int
    metadata: dict[str, Any] = Field(default_factory=dict)
    origin: str | None = None


class Query(BaseModel):
    """One question with the documents that answer it; ``gold_grades``, from adapters with
    graded judgements (``Adapter.graded``), holds each gold document's grade (> 0), and
    ``nonrelevant_doc_ids`` the documents judged not relevant (grade 0 or below), kept so that the
    qrels rbench writes hold every judgement (Bpref and Judged@k read them);
    ``excluded_doc_ids``, from adapters that exclude (``Adapter.excludes``), the documents
    removed from this query's ranking before scoring (BRIGHT's ``excluded_ids``).
    ``origin`` (``file:line``, optional) is where it was read: errors name it; it is not stored."""

    query_id: str
    text: str
    gold_doc_ids: list[str]
    gold_grades: list[int] | None = None
    nonrelevant_doc_ids: list[str] | None = None
    excluded_doc_ids: list[str] | None = None
    origin: str | None = None


def text_value(value: Any, where: str, field: str, hint: str = "") -> str:
    """``value`` as text (a string or a number); null, booleans, lists and objects are a
    DataError naming ``where`` (the user's file and line) and ``field``."""
    if value is None or isinstance(value, (bool, list, dict)):
        raise DataError(f"{where} field {field!r}{hint} is {json.dumps(value)}, not text: give it a string, "
                        "or remove the line")
    return str(value)


def read_json_list(path: Path, what: str) -> list[dict]:
    """A JSON file holding a list of objects (``what`` names the file in errors, e.g. "an MT-RAIG Bench
    file"); anything else is a DataError naming the file."""
    try:
        entries = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise DataError(f"{path} is not readable as {what} ({e})") from None
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise DataError(f"{path} does not hold a JSON list of objects, as {what} does")
    return entries


def read_jsonl(path: Path, shown: Path | None = None) -> Iterator[tuple[int, dict]]:
    """Stream ``(line_number, object)`` from a JSON-lines file; blank lines are skipped, a
    UTF-8 byte-order mark is accepted, and a malformed line or a byte that is not UTF-8 is a
    DataError naming the file (``shown``: the user's file this one was copied from) and line."""
    with open(path, "rb") as f:
        yield from jsonl_records(f, shown or path)


def jsonl_records(lines: Iterable[bytes], name: str | Path, start: int = 1) -> Iterator[tuple[int, dict]]:
    """:func:`read_jsonl` over any stream of byte lines (a gzip file, a tar member, a block of a
    file whose first line is line ``start``); errors name ``name``."""
    for line_no, raw in enumerate(lines, start):
        if line_no == 1 and raw.startswith(b"\xef\xbb\xbf"):
            raw = raw[3:]
        if line_no == 1 and raw.startswith(b"\x1f\x8b"):
            raise DataError(f"{name} is gzip-compressed, not JSON lines: decompress it (gunzip -c FILE > FILE.jsonl) "
                            "and point the config at the result")
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise DataError(f"{name}:{line_no}: byte {raw[e.start:e.start + 1]!r} at column {e.start + 1} "
                            "is not UTF-8; save the file as UTF-8") from None
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as e:
            raise DataError(f"{name}:{line_no} is not valid JSON ({e}); fix or remove the line") from None
        if not isinstance(record, dict):
            raise DataError(f"{name}:{line_no} must be a JSON object, got {type(record).__name__}")
        yield line_no, record


MANIFESTS = Path(__file__).parent / "manifests"


@functools.cache
def manifest(name: str) -> dict[str, str]:
    """``manifests/<name>.json``: each pinned file's name (its path in the mirror) to its sha256."""
    return json.loads((MANIFESTS / f"{name}.json").read_text())


def pinned_files(name: str, url_of: Callable[[str], str | None], keep: Callable[[str], bool] = bool) -> list[FileSpec]:
    """FileSpecs of the files of manifest ``name`` that ``keep`` selects."""
    return [FileSpec(name=f, sha256=sha, url=url_of(f)) for f, sha in sorted(manifest(name).items()) if keep(f)]


class ManifestFiles(BaseModel):
    """The pinned files of manifest ``manifest`` (except names containing ``exclude``), by
    reference: the manifest's own sha256 stands for the whole list, so a download of 16,576
    files carries a few hundred bytes of parameters. ``url`` is a template whose ``{path}`` is a
    file's name without its first folder. ``listed_in`` (with ``listed_under``, a folder): of
    the files in that folder, only those whose base name is a key of the JSON object in the file
    ``listed_in`` (a plain file of the same download, fetched first), such as the tables one
    split's examples name."""

    model_config = ConfigDict(frozen=True)

    manifest: str
    sha256: str
    url: str | None = None
    exclude: str | None = None
    listed_in: str | None = None
    listed_under: str | None = None

    @classmethod
    def of(cls, name: str, url: str | None = None, exclude: str | None = None, listed_in: str | None = None,
           listed_under: str | None = None) -> "ManifestFiles":
        """A reference to the manifest ``name`` as it is now."""
        return cls(manifest=name, sha256=file_digest(MANIFESTS / f"{name}.json"), url=url, exclude=exclude,
                   listed_in=listed_in, listed_under=listed_under)

    def files(self, listing: Path | None = None) -> list[FileSpec]:
        """The files it stands for; a DataError when the manifest is not the one referenced.
        ``listing``: the ``listed_in`` file to filter by (every file when None)."""
        actual = file_digest(MANIFESTS / f"{self.manifest}.json")
        if actual != self.sha256:
            raise DataError(f"manifest {self.manifest}.json has sha256 {actual}, not the {self.sha256} this download "
                            "was planned with: plan the run again with this version of rbench")
        keep = None
        if self.listed_in and listing is not None:
            try:
                keep = set(json.loads(listing.read_text(encoding="utf-8")))
            except (OSError, ValueError, TypeError) as e:
                raise DataError(f"{listing} is not a readable JSON object naming the files to keep ({e})") from None
        return [FileSpec(name=f, sha256=sha, url=self.url.format(path=f.partition("/")[2]) if self.url else None)
                for f, sha in sorted(manifest(self.manifest).items())
                if (self.exclude is None or self.exclude not in f)
                and (keep is None or not f.startswith(self.listed_under or "") or Path(f).name in keep)]


def expand(specs: list["FileSpec | ManifestFiles"], listings: Path | None = None) -> list[FileSpec]:
    """Every file of an adapter's file list, references to manifests expanded (filtered by
    their ``listed_in`` file under ``listings`` where it is there)."""
    return [f for s in specs for f in (s.files(_listing(s, listings)) if isinstance(s, ManifestFiles) else [s])]


def _listing(spec: "ManifestFiles", root: Path | None) -> Path | None:
    if spec.listed_in is None or root is None or not (root / spec.listed_in).is_file():
        return None
    return root / spec.listed_in


def known_file(sha256: str) -> str | None:
    """The mirror name of the pinned file with this digest, in any manifest: it tells a user
    who put, say, the test file under the dev name what the file really is."""
    for path in sorted(MANIFESTS.glob("*.json")):
        for name, digest in manifest(path.stem).items():
            if digest == sha256:
                return name
    return None


def object_id(doc_id: str, position: int, text: str) -> str:
    """Stable id of an object, derived from its document, its position in it and its text."""
    payload = f"{doc_id}\x1f{position}\x1f{text}".encode("utf-8")
    return hashlib.sha1(payload).hexdigest()[:20]


_HEX = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)


def object_ids(doc_ids: pa.Array, positions: pa.Array, texts: pa.Array) -> tuple[pa.StringArray, np.ndarray]:
    """:func:`object_id` of each row of three equal-length arrays, with one hash call per row
    as the only Python work, and each id's first 16 hex digits as an unsigned 64-bit integer."""
    payloads = pc.binary_join_element_wise(doc_ids, pc.cast(positions, pa.string()), texts, "\x1f")
    sha1 = hashlib.sha1
    digests = np.frombuffer(b"".join([sha1(p).digest()[:10] for p in payloads.cast(pa.binary()).to_pylist()]),
                            dtype=np.uint8)
    chars = np.empty(2 * len(digests), dtype=np.uint8)
    chars[0::2], chars[1::2] = _HEX[digests >> 4], _HEX[digests & 15]
    offsets = np.arange(0, len(chars) + 1, 20, dtype=np.int32)
    ids = pa.Array.from_buffers(pa.string(), len(offsets) - 1, [None, pa.py_buffer(offsets), pa.py_buffer(chars)])
    return ids, digests.reshape(-1, 10)[:, :8].copy().view(">u8").ravel().astype(np.uint64)


OBJECT_SCHEMA = pa.schema([("text", pa.string()), ("doc_id", pa.string()), ("page_title", pa.string()),
                           ("source", pa.string()), ("modality", pa.string()), ("position", pa.int64()),
                           ("metadata", pa.string()), ("origin", pa.string())])
"""Corpus objects as Arrow record batches (:meth:`Adapter.object_batches`): ``metadata`` as
sorted JSON, ``origin`` null where a columnar reader does not track lines."""


class RowByRow(Exception):
    """Raised by a columnar reader when its file needs the row-by-row reader, whose checks
    name the file and line of what is wrong (a number where text is expected, a blank line)."""


def batches_of(objects: Iterable[CorpusObject], size: int = 10_000) -> Iterator[pa.RecordBatch]:
    """Corpus objects as record batches of :data:`OBJECT_SCHEMA`."""
    rows: list[dict] = []
    for obj in objects:
        rows.append({"text": obj.text, "doc_id": obj.doc_id, "page_title": obj.page_title, "source": obj.source,
                     "modality": obj.modality, "position": obj.position, "origin": obj.origin,
                     "metadata": json.dumps(obj.metadata, ensure_ascii=False, sort_keys=True) if obj.metadata
                     else "{}"})
        if len(rows) >= size:
            yield pa.RecordBatch.from_pylist(rows, schema=OBJECT_SCHEMA)
            rows.clear()
    if rows:
        yield pa.RecordBatch.from_pylist(rows, schema=OBJECT_SCHEMA)


def fix_form(params: BaseModel, fixed: dict[str, Any]) -> None:
    """Set the parameters a corpus ``form`` fixes on the (frozen) ``params``; one the user set to
    another value is an error naming both."""
    for key, value in fixed.items():
        if key in params.model_fields_set and getattr(params, key) != value:
            raise ValueError(f"form: {getattr(params, 'form')} fixes {key} to {value!r}, but {key} is "
                             f"{getattr(params, key)!r}; remove {key} or use form: rbench")
        object.__setattr__(params, key, value)


def doc_id(page_title: str, source: str) -> str:
    """The unit of evaluation: page title plus the item within the page."""
    return f"{page_title} :: {source}"


class Adapter(ABC):
    """Turns a dataset's raw files into corpus objects and queries.

    Subclasses set ``name``, ``description`` and a pydantic ``Params`` model, list
    their raw ``files`` and stream ``objects`` and ``queries`` from the download folder.
    Bump the adapter's ``version`` whenever its output changes (its prepare key also holds a
    digest of its module's import closure: an edit reruns the stage without a bump too).
    ``unique_positions``: the adapter counts each document's positions itself, so two objects
    never share one (the prepare stage then skips its check). ``every_query``: its datasets are
    scored on every judged query unless the experiment sets a ``subsample.size`` (BEIR's own
    evaluation scores them all).
    ``repeated_record`` says what two records at one place mean in its data. ``where_from`` says,
    for ``rbench list datasets``, where the files of an adapter with required params come from.
    :meth:`models` names the models making its objects runs (torch: the prepare stage runs apart).
    """

    name: ClassVar[str]
    description: ClassVar[str]
    Params: ClassVar[type[BaseModel]]
    version: ClassVar[int] = 1
    graded: ClassVar[bool] = False
    excludes: ClassVar[bool] = False
    unique_positions: ClassVar[bool] = False
    every_query: ClassVar[bool] = False
    repeated_record: ClassVar[str] = ("two records share the document id {doc_id!r} and position {position}: an "
                                      "object's position is its place in its document, so number each document's "
                                      "objects 0, 1, 2, ... (CorpusObject.position), or give each document its own id")
    """The error for two records at one position of one document (``{doc_id}``, ``{position}``),
    in the words of the adapter's data."""
    where_from: ClassVar[str] = "local paths given in the config"

    def models(self, params: BaseModel) -> list[str]:
        """The models making the objects runs (hub ids or local folders): a ``chonky`` chunker's.
        Each one's identity (its weights' version or digest) enters the prepare key."""
        chunker = getattr(params, "chunker", None)
        return [chunker.model] if getattr(chunker, "kind", None) == "chonky" and chunker.model else []

    @classmethod
    def key_params(cls, params: dict[str, Any]) -> dict[str, Any]:
        """The params that shape the output: paths of input files are left out (their
        content enters the key through the download stage's digests)."""
        paths = {name for name, f in cls.Params.model_fields.items() if "Path" in str(f.annotation)}
        return {k: v for k, v in params.items() if k not in paths}

    @abstractmethod
    def files(self, params: BaseModel) -> list[FileSpec | ManifestFiles]:
        """The raw files this dataset needs (a long pinned list by reference: :class:`ManifestFiles`)."""

    @abstractmethod
    def objects(self, raw: Path, params: BaseModel) -> Iterator[CorpusObject]:
        """Stream the corpus objects from the download folder ``raw``."""

    def object_batches(self, raw: Path, params: BaseModel) -> Iterator[pa.RecordBatch]:
        """The corpus objects as record batches (:data:`OBJECT_SCHEMA`): :meth:`objects` in
        batches, unless the adapter reads its files by column; such a reader raises
        :class:`RowByRow` where it cannot match :meth:`objects` exactly."""
        return batches_of(self.objects(raw, params))

    @abstractmethod
    def queries(self, raw: Path, params: BaseModel) -> Iterator[Query]:
        """Stream the queries from the download folder ``raw``."""
