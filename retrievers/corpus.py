"""Reading a prepared corpus without holding it: batches of ids and texts, a row range of one
column, row numbers of ids (:class:`IdIndex`) and the columns of the few hundred objects a search
returns (:class:`CorpusRows`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from rbench.retrievers.base import Hits


def corpus_batches(corpus: Path, batch_size: int = 4096) -> Iterator[tuple[list[str], list[str]]]:
    """Stream ``(object_ids, texts)`` batches from a corpus Parquet file."""
    for batch in pq.ParquetFile(corpus).iter_batches(batch_size=batch_size, columns=["object_id", "text"]):
        yield batch.column(0).to_pylist(), batch.column(1).to_pylist()


def column_rows(corpus: Path, column: str, start: int, stop: int) -> list:
    """Rows ``start:stop`` of one corpus column, reading only the row groups that hold them."""
    file = pq.ParquetFile(corpus)
    rows, first = [], 0
    for group in range(file.metadata.num_row_groups):
        size = file.metadata.row_group(group).num_rows
        low, high = max(start, first), min(stop, first + size)
        if low < high:
            part = file.read_row_group(group, columns=[column]).column(0)
            rows.extend(part.slice(low - first, high - low).to_pylist())
        first += size
        if first >= stop:
            break
    return rows


class IdIndex:
    """Row numbers of ids in an Arrow string column, without Python strings for the column: ids of
    one length (rbench's object ids) are viewed as fixed-width bytes, sorted once, and found by
    binary search; ids of mixed lengths (an id map from elsewhere) are hashed per call."""

    def __init__(self, ids: pa.Array):
        self._ids = ids
        self._sorted = None
        large = pa.types.is_large_string(ids.type)
        if not len(ids) or ids.null_count or not (large or pa.types.is_string(ids.type)):
            return
        bounds = pc.min_max(pc.binary_length(ids))
        if bounds["min"].as_py() != bounds["max"].as_py() or bounds["min"].as_py() == 0:
            return
        self._width = bounds["min"].as_py()
        offsets = np.frombuffer(ids.buffers()[1], dtype=np.int64 if large else np.int32, count=len(ids) + 1,
                                offset=ids.offset * (8 if large else 4))
        keys = np.frombuffer(ids.buffers()[2], dtype=f"S{self._width}", count=len(ids), offset=int(offsets[0]))
        self._order = np.argsort(keys, kind="stable")
        self._sorted = keys[self._order]

    def rows(self, wanted: Sequence[str]) -> np.ndarray:
        """The row of each wanted id, -1 where the column lacks it."""
        if self._sorted is None:
            found = pc.index_in(pa.array(list(wanted), pa.string()), value_set=self._ids)
            return pc.fill_null(found, -1).to_numpy().astype(np.int64)
        encoded = [w.encode("utf-8") for w in wanted]
        keys = np.array(encoded, dtype=f"S{self._width}")
        at = np.minimum(np.searchsorted(self._sorted, keys), len(self._sorted) - 1)
        hit = (self._sorted[at] == keys) & np.array([len(e) == self._width for e in encoded], dtype=bool)
        return np.where(hit, self._order[at], -1).astype(np.int64)


class CorpusRows:
    """Columns of a prepared corpus by object id, for the few hundred objects a search returns,
    without holding the corpus: only the ``object_id`` column is kept (an :class:`IdIndex`, no
    Python strings). :meth:`load` finds the wanted ids' row numbers and reads those rows from
    the row groups that hold them; :meth:`view` is a read-only mapping ``object_id -> value``
    of one column. An id not loaded yet is loaded when asked for, one at a time: load a
    search's hits first. A load that would pass ``keep`` rows drops the rows loaded before it."""

    def __init__(self, corpus: Path, columns: Sequence[str], keep: int = 200_000):
        self._path = corpus
        self._file = pq.ParquetFile(corpus)
        self._index = IdIndex(self._file.read(columns=["object_id"]).column(0).combine_chunks())
        meta = self._file.metadata
        self._starts = np.cumsum([0, *(meta.row_group(g).num_rows for g in range(meta.num_row_groups))])
        self._columns = list(columns)
        self._keep = keep
        self._rows: dict[str, tuple] = {}

    def load(self, object_ids: Iterable[str]) -> None:
        """Read the rows of these objects (those not loaded yet) in one pass over their row groups."""
        wanted = [o for o in dict.fromkeys(object_ids) if o not in self._rows]
        if not wanted:
            return
        if len(self._rows) + len(wanted) > self._keep:
            self._rows.clear()
        rows = self._index.rows(wanted)
        if (rows < 0).any():
            missing = [o for o, row in zip(wanted, rows) if row < 0]
            raise KeyError(f"object id(s) {missing[:3]} are not in the corpus {self._path}")
        groups = np.searchsorted(self._starts, rows, side="right") - 1
        for group in np.unique(groups):
            picked = np.flatnonzero(groups == group)
            table = self._file.read_row_group(int(group), columns=self._columns).take(
                pa.array(rows[picked] - self._starts[group]))
            for i, values in zip(picked, zip(*(table.column(c).to_pylist() for c in self._columns))):
                self._rows[wanted[i]] = values

    def load_runs(self, *runs: Mapping[str, Hits]) -> None:
        """Load every object these runs returned."""
        self.load(oid for run in runs for hits in run.values() for oid, _ in hits)

    def view(self, column: str) -> Mapping[str, Any]:
        """``object_id -> value`` of ``column`` (one of the columns this was made with)."""
        return _ColumnView(self, self._columns.index(column))

    def value(self, object_id: str, index: int) -> Any:
        """Column ``index`` of one object's row, loading the row if it is not loaded."""
        if object_id not in self._rows:
            self.load([object_id])
        return self._rows[object_id][index]

    def __len__(self) -> int:
        return len(self._rows)


class _ColumnView(Mapping):
    """One column of :class:`CorpusRows` as a mapping; iterating covers the loaded rows only."""

    def __init__(self, rows: CorpusRows, index: int):
        self._source, self._index = rows, index

    def __getitem__(self, object_id: str) -> Any:
        return self._source.value(object_id, self._index)

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._source._rows))

    def __len__(self) -> int:
        return len(self._source)
