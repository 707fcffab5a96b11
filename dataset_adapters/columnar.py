"""Columnar reading of JSON-lines corpora: whole blocks of lines parsed by Arrow, with the
row-by-row reader (:func:`rbench.dataset_adapters.base.read_jsonl`) as the reference.

Anything the block reader cannot treat exactly as the row reader does (a field that is not a
string, a missing field, bytes that are not UTF-8, a line holding two objects, a blank line)
raises :class:`~rbench.dataset_adapters.base.RowByRow`, and the caller reads the file row by
row, whose errors name the file and line."""

from __future__ import annotations

import io
import queue
import threading
from pathlib import Path
from typing import Iterable, Iterator, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from rbench.dataset_adapters.base import RowByRow, jsonl_records
from rbench.dataset_adapters.chunking import ChunkerConfig, chunk_text

T = TypeVar("T")
BLOCK = 1 << 24
SPACE = 0x20
PY_WHITESPACE = "".join(c for c in map(chr, range(0x110000)) if c.isspace())
"""What ``str.split()`` and ``str.strip()`` treat as whitespace."""
_CLASS = "".join(f"\\x{{{ord(c):x}}}" for c in PY_WHITESPACE)
BLANK = f"^[{_CLASS}]*$"
"""An RE2 pattern that matches exactly the strings ``str.strip()`` empties."""
_CONTROL = np.zeros(256, dtype=bool)
_CONTROL[[ord(c) for c in PY_WHITESPACE if ord(c) < SPACE]] = True
_STARTS = np.zeros(256, dtype=bool)
_STARTS[[c.encode()[0] for c in PY_WHITESPACE]] = True
NOTHING = BLANK.replace("[", "[\\x{0}", 1)
"""Whitespace and NUL characters only: a text with nothing to index."""
_STARTS_NOTHING = _STARTS.copy()
_STARTS_NOTHING[0] = True


def json_blocks(path: Path, fields: list[str], gzip: bool = False, optional: tuple[str, ...] = (),
                shown: Path | str | None = None) -> Iterator[pa.RecordBatch]:
    """Record batches of ``fields`` (strings) from the JSON-lines file ``path`` (``gzip``:
    compressed), Arrow parsing blocks of about 16 MB of whole lines; RowByRow where the row
    reader could differ (a field missing, null or not a string, bytes that are not UTF-8, not
    one object a line: checked per block). The ``optional`` fields may be missing or null (null
    in the batch). With ``shown`` (the name :func:`read_jsonl` gives the file), a block Arrow
    cannot parse is read again line by line, alone, and its first malformed line is the
    DataError :func:`read_jsonl` would raise, with its line number: a bad line near the end of
    a huge file is named at the speed of one columnar pass."""
    schema = pa.schema([(f, pa.string()) for f in fields])
    options = pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore")
    line = 1
    for data in _line_blocks(path, gzip):
        if line == 1 and data.startswith(b"\xef\xbb\xbf"):
            if gzip:
                raise RowByRow("a byte-order mark")
            data = data[3:]  # as read_jsonl reads it
        try:
            batch = pj.read_json(pa.BufferReader(data), parse_options=options).combine_chunks().to_batches()
        except (pa.ArrowInvalid, OSError) as e:
            if shown is not None:
                start, part = first_unparsable(data, options)
                for _ in jsonl_records(io.BytesIO(part), shown, start=line + data.count(b"\n", 0, start)):
                    pass  # raises at the first line the row reader refuses
            raise RowByRow(str(e)) from None
        newlines = data.count(b"\n")
        rows = batch[0].num_rows if batch else 0
        if rows != newlines + (not data.endswith(b"\n")):
            raise RowByRow("blank lines or lines with several objects")
        if batch:
            yield _checked(batch[0], optional)
        line += newlines


def first_unparsable(data: bytes, options: pj.ParseOptions, lines: int = 256) -> tuple[int, bytes]:
    """Where in a block Arrow could not parse, as ``(byte offset, at most about ``lines`` lines
    from there)``: the block is halved at a line break and the half that fails is kept (the
    first half when both do), so the search parses about one block in all, never line by line."""
    start, end = 0, len(data)
    while data.count(b"\n", start, end) > lines:
        middle = data.rfind(b"\n", start, (start + end) // 2) + 1
        if middle <= start:
            middle = data.find(b"\n", (start + end) // 2, end) + 1
            if middle <= 0 or middle >= end:
                break
        try:
            pj.read_json(pa.BufferReader(data[start:middle]), parse_options=options)
        except (pa.ArrowInvalid, OSError):
            end = middle
        else:
            start = middle
    return start, data[start:end]


def _line_blocks(path: Path, gzip: bool = False) -> Iterator[bytes]:
    """The lines of a file (``gzip``: decompressed), about 16 MB of whole lines at a time."""
    with pa.input_stream(path, compression="gzip" if gzip else None) as stream:
        rest = b""
        while chunk := stream.read(BLOCK):
            data = rest + chunk
            cut = data.rfind(b"\n") + 1
            if cut:
                yield data[:cut]
            rest = data[cut:]
        if rest:
            yield rest


def _checked(batch: pa.RecordBatch, optional: tuple[str, ...]) -> pa.RecordBatch:
    for name in batch.schema.names:
        column = batch.column(name)
        if column.null_count and name not in optional:
            raise RowByRow(f"field {name!r} missing or null")
        try:
            column.validate(full=True)
        except pa.ArrowInvalid:
            raise RowByRow(f"field {name!r} is not UTF-8") from None
    return batch


def is_blank(texts: pa.StringArray, nul: bool = False) -> np.ndarray:
    """Per string: whether ``str.strip()`` leaves it empty, or with ``nul`` whether it holds
    nothing but whitespace and NUL characters (only the empty ones and those that begin with
    a byte that can start one go through the pattern)."""
    offsets, data = utf8_buffers(texts)
    blank = offsets[1:] == offsets[:-1]
    rows = np.flatnonzero(~blank)
    rows = rows[(_STARTS_NOTHING if nul else _STARTS)[data[offsets[:-1][rows]]]]
    if len(rows):
        blank[rows] = pc.match_substring_regex(texts.take(rows), NOTHING if nul else BLANK).to_numpy(
            zero_copy_only=False)
    return blank


def utf8_buffers(texts: pa.StringArray) -> tuple[np.ndarray, np.ndarray]:
    """A string array's offsets (from 0) and the bytes they index, without copies."""
    offsets = np.frombuffer(texts.buffers()[1], dtype=np.int32)[texts.offset: texts.offset + len(texts) + 1]
    start, end = int(offsets[0]), int(offsets[-1])
    data = np.frombuffer(texts.buffers()[2], dtype=np.uint8)[start:end] if end > start else np.zeros(0, np.uint8)
    return offsets - start, data


def single_window(texts: pa.StringArray, size: int) -> np.ndarray:
    """Per string: whether it is already ``" ".join(s.split())`` with at most ``size`` words
    (single spaces between words, none around them), so that word windows of ``size`` leave
    it as it is. A conservative test: a string it cannot clear quickly comes out False."""
    if not len(texts):
        return np.zeros(0, dtype=bool)
    offsets, data = utf8_buffers(texts)
    space = data == SPACE
    bad = np.flatnonzero(space[:-1] & space[1:])
    controls = np.flatnonzero(data < SPACE)
    controls = controls[_CONTROL[data[controls]]]
    wide = np.flatnonzero(data[:-2] >= 0xC2)
    b0, b1, b2 = data[wide], data[wide + 1], data[wide + 2]
    wide = wide[((b0 == 0xC2) & ((b1 == 0x85) | (b1 == 0xA0)))
                | ((b0 == 0xE1) & (b1 == 0x9A) & (b2 == 0x80))
                | ((b0 == 0xE2) & (b1 == 0x80) & ((b2 <= 0x8A) | (b2 == 0xA8) | (b2 == 0xA9) | (b2 == 0xAF)))
                | ((b0 == 0xE2) & (b1 == 0x81) & (b2 == 0x9F))
                | ((b0 == 0xE3) & (b1 == 0x80) & (b2 == 0x80))]
    if len(data) >= 2 and data[-2] == 0xC2 and data[-1] in (0x85, 0xA0):
        wide = np.append(wide, len(data) - 2)
    fits = np.ones(len(texts), dtype=bool)
    fits[np.searchsorted(offsets, np.concatenate([bad, controls, wide]), side="right") - 1] = False
    lengths = np.diff(offsets)
    nonempty = np.flatnonzero(lengths > 0)
    starts = offsets[:-1][nonempty]
    fits[nonempty] &= ~(space[starts] | space[offsets[1:][nonempty] - 1])
    if (lengths > size).any():  # a string of at most ``size`` bytes has fewer than ``size`` spaces
        spaces = np.add.reduceat(space, starts, dtype=np.int32) if len(starts) else np.zeros(0, np.int32)
        fits[nonempty] &= spaces < size
    return fits


def window_chunks(texts: pa.StringArray, chunker: ChunkerConfig,
                  keep_blank: bool) -> tuple[np.ndarray | None, pa.StringArray]:
    """Each text's chunks as :func:`chunk_text` makes them (word windows or ``none``), and the
    row each comes from (None: one chunk a row, the text itself). A blank text gives itself as
    its one chunk with ``keep_blank``, else none. Only texts that are not already single-spaced
    words within one window go through :func:`chunk_text`."""
    fits = np.ones(len(texts), dtype=bool) if chunker.kind == "none" else single_window(texts, chunker.size)
    blank = is_blank(texts)
    todo = np.flatnonzero(~fits & ~blank)
    counts = np.ones(len(texts), dtype=np.int64)
    if not keep_blank:
        counts[blank] = 0
    chunks = [chunk_text(t, chunker) for t in texts.take(todo).to_pylist()]
    counts[todo] = [len(c) for c in chunks]
    if not len(todo) and (counts == 1).all():
        return None, texts
    rows = np.repeat(np.arange(len(texts)), counts)
    pieces = texts.take(rows)
    if len(todo):
        changed = np.zeros(len(texts), dtype=bool)
        changed[todo] = True
        pieces = pc.replace_with_mask(pieces, pa.array(np.repeat(changed, counts)),
                                      pa.array([p for c in chunks for p in c], pa.string()))
    return rows, pieces


def chunk_numbers(rows: np.ndarray | None, count: int) -> np.ndarray:
    """Each chunk's number within its row (0, 1, ...), for :func:`window_chunks`' ``rows``."""
    if rows is None:
        return np.zeros(count, dtype=np.int64)
    starts = np.flatnonzero(np.concatenate([[True], rows[1:] != rows[:-1]])) if len(rows) else np.zeros(0, np.int64)
    return np.arange(len(rows)) - np.repeat(starts, np.diff(np.append(starts, len(rows))))


class Positions:
    """Each document's next position, across batches: the ``n``-th object of a document gets
    position ``n - 1`` in reading order, as the row readers count."""

    def __init__(self) -> None:
        self.next: dict[str, int] = {}

    def take(self, docs: pa.Array) -> np.ndarray:
        """The positions of ``docs`` (in order) and the counters moved past them."""
        encoded = pc.dictionary_encode(docs)
        codes = encoded.indices.to_numpy()
        names = encoded.dictionary.to_pylist()
        order = np.argsort(codes, kind="stable")
        counts = np.bincount(codes, minlength=len(names))
        starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
        base = np.array([self.next.get(n, 0) for n in names], dtype=np.int64)
        positions = np.empty(len(codes), dtype=np.int64)
        positions[order] = np.arange(len(codes)) - np.repeat(starts, counts) + np.repeat(base, counts)
        self.next.update(zip(names, (base + counts).tolist()))
        return positions


def ahead(items: Iterable[T], depth: int = 2) -> Iterator[T]:
    """``items`` as a thread produces them, up to ``depth`` ahead of the consumer, so that
    Arrow's parsing (which releases the GIL) runs beside the consumer's own work. The
    producer's exception is raised in the consumer; a consumer that stops early stops it."""
    done = object()
    handoff: queue.Queue = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def put(item) -> bool:
        while not stop.is_set():
            try:
                handoff.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def produce() -> None:
        try:
            for item in items:
                if not put((item, None)):
                    return
            put((done, None))
        except BaseException as e:  # handed to the consumer, which raises it
            put((done, e))

    thread = threading.Thread(target=produce, name="rbench-read-ahead", daemon=True)
    thread.start()
    try:
        while True:
            item, error = handoff.get()
            if error is not None:
                raise error
            if item is done:
                return
            yield item
    finally:
        stop.set()
        thread.join()
