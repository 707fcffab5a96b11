"""Looking up a few objects of a prepared corpus by id without holding the corpus."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from rbench.retrievers.corpus import CorpusRows


@pytest.fixture
def corpus(tmp_path):
    """1,000 objects in row groups of 64, ids not in row order."""
    ids = [f"{(i * 7919) % 1000:05d}" for i in range(1000)]
    path = tmp_path / "corpus.parquet"
    pq.write_table(pa.table({"object_id": ids, "text": [f"text of {o}" for o in ids],
                             "doc_id": [f"doc{int(o) // 4}" for o in ids]}), path, row_group_size=64)
    return path


def test_rows_are_read_by_id_across_row_groups(corpus):
    rows = CorpusRows(corpus, ["text", "doc_id"])
    assert len(rows) == 0  # opening reads the id column only
    wanted = ["00999", "00000", "00513", "00064", "00063"]
    rows.load(wanted + ["00000"])
    assert len(rows) == 5
    texts, docs = rows.view("text"), rows.view("doc_id")
    assert [texts[o] for o in wanted] == [f"text of {o}" for o in wanted]
    assert [docs[o] for o in wanted] == ["doc249", "doc0", "doc128", "doc16", "doc15"]
    assert sorted(texts) == sorted(wanted)  # a view iterates what is loaded


def test_runs_are_loaded_and_an_id_not_loaded_is_read_on_access(corpus):
    rows = CorpusRows(corpus, ["text"])
    rows.load_runs({"q1": [("00010", 2.0), ("00020", 1.0)]}, {"q1": [("00010", 0.5)], "q2": [("00030", 0.1)]})
    assert len(rows) == 3
    assert rows.view("text")["00777"] == "text of 00777" and len(rows) == 4


def test_an_unknown_id_is_a_key_error_naming_it_and_the_corpus(corpus):
    texts = CorpusRows(corpus, ["text"]).view("text")
    with pytest.raises(KeyError, match=r"\['nope'\] are not in the corpus .*corpus.parquet"):
        texts["nope"]
    assert texts.get("nope") is None and "nope" not in texts and "00001" in texts


def test_at_most_keep_rows_stay_loaded(corpus):
    rows = CorpusRows(corpus, ["text"], keep=10)
    rows.load(f"{i:05d}" for i in range(8))
    rows.load(f"{i:05d}" for i in range(8, 12))  # 12 > 10: the earlier rows are dropped first
    assert len(rows) == 4 and rows.view("text")["00001"] == "text of 00001"


@pytest.mark.parametrize("ids", [
    pa.array([f"{(i * 7919) % 1000:05d}" for i in range(1000)]),  # one length: binary search
    pa.array([f"id{(i * 7919) % 1000}" for i in range(1000)]),  # mixed lengths: hashed per call
    pa.array([f"{(i * 7919) % 1000:05d}" for i in range(1000)], pa.large_string()).slice(10, 900),
], ids=["fixed-width", "mixed-width", "large-string-slice"])
def test_id_index_finds_each_row_and_marks_the_absent(ids):
    from rbench.retrievers.corpus import IdIndex

    names = ids.to_pylist()
    wanted = [names[0], names[-1], names[437], "nope", names[437] + "x", "id"]
    assert IdIndex(ids).rows(wanted).tolist() == [0, len(names) - 1, 437, -1, -1, -1]
    assert IdIndex(ids).rows([]).tolist() == []
