"""Corpus columns read by row range or looked up in one streaming pass, never held whole: the dense
encoder's shard rows, the retrieve stage's doc ids."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from rbench.core.errors import DataError
from rbench.retrievers.corpus import column_rows
from rbench.tasks.retrieve import HITS_SCHEMA, RUN_SCHEMA, with_doc_ids


def _hits(rows: list[tuple[str, str, int, float]]) -> pa.Table:
    return pa.Table.from_pylist([dict(zip(HITS_SCHEMA.names, r)) for r in rows], schema=HITS_SCHEMA)


def test_doc_ids_follow_the_hits_across_row_groups(tmp_path):
    n = 150_000
    pq.write_table(pa.table({"object_id": [f"o{i}" for i in range(n)], "doc_id": [f"d{i // 3}" for i in range(n)]}),
                   tmp_path / "corpus.parquet", row_group_size=40_000)
    hits = _hits([("q1", "o149999", 1, 3.0), ("q1", "o5", 2, 2.0), ("q2", "o5", 1, 1.5), ("q2", "o70000", 2, 1.0)])
    run = with_doc_ids(hits, tmp_path / "corpus.parquet", "bm25")
    assert run.schema == RUN_SCHEMA
    assert [(r["query_id"], r["object_id"], r["doc_id"], r["rank"]) for r in run.to_pylist()] == [
        ("q1", "o149999", "d49999", 1), ("q1", "o5", "d1", 2), ("q2", "o5", "d1", 1), ("q2", "o70000", "d23333", 2)]
    assert with_doc_ids(_hits([]), tmp_path / "corpus.parquet", "bm25").num_rows == 0


def test_an_object_id_outside_the_corpus_is_named(tmp_path):
    pq.write_table(pa.table({"object_id": ["a"], "doc_id": ["d"]}), tmp_path / "corpus.parquet")
    with pytest.raises(DataError, match="retriever 'dense' returned 1 hit.*'zz' for query 'q7'"):
        with_doc_ids(_hits([("q7", "a", 1, 2.0), ("q7", "zz", 2, 1.0)]), tmp_path / "corpus.parquet", "dense")


def test_a_row_range_reads_only_its_row_groups(tmp_path, monkeypatch):
    pq.write_table(pa.table({"text": [f"t{i}" for i in range(95)], "other": list(range(95))}),
                   tmp_path / "corpus.parquet", row_group_size=10)
    read = []
    real = pq.ParquetFile.read_row_group
    monkeypatch.setattr(pq.ParquetFile, "read_row_group",
                        lambda self, i, **kw: read.append(i) or real(self, i, **kw))
    assert column_rows(tmp_path / "corpus.parquet", "text", 23, 41) == [f"t{i}" for i in range(23, 41)]
    assert read == [2, 3, 4]
    for start, stop in ((0, 95), (90, 95), (0, 1), (30, 30)):
        assert column_rows(tmp_path / "corpus.parquet", "text", start, stop) == [f"t{i}" for i in range(start, stop)]
