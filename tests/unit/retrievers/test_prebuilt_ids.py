"""Existing indexes keyed by the corpus's own ids (doc ids, MS MARCO segment ids): which ids
they hold is found from a sample, the counts are checked, and hits map to rbench's objects."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pydantic import ValidationError

from rbench.core.errors import DataError
from rbench.retrievers.bm25 import BM25Params
from rbench.retrievers.dense import DenseParams
from rbench.retrievers.prebuilt import NativeIds, id_column, match_ids, sample_positions

ROWS = [  # object id, doc id, segment id
    ("o1", "docA", "docA#0_0"), ("o2", "docA", "docA#1_40"), ("o3", "docB", "docB#0_0"), ("o4", "docC", 'doc"C#0_0'),
]


def _corpus(tmp_path, rows=ROWS, batch=2):
    tmp_path.mkdir(parents=True, exist_ok=True)
    table = pa.table({"object_id": [r[0] for r in rows], "text": [f"text of {r[0]}" for r in rows],
                      "doc_id": [r[1] for r in rows],
                      "metadata": [json.dumps({"segment_id": r[2], "url": "u"}, ensure_ascii=False, sort_keys=True)
                                   for r in rows]})
    pq.write_table(table, tmp_path / "corpus.parquet", row_group_size=batch)
    return tmp_path / "corpus.parquet"


def test_the_kind_of_ids_is_found_from_a_sample(tmp_path):
    corpus = _corpus(tmp_path)
    assert match_ids(corpus, ["o4", "o1"], 4, "auto", "idx") == "object_id"
    assert match_ids(corpus, ["docA#1_40", 'doc"C#0_0'], 4, "auto", "idx") == "metadata.segment_id"
    one_per_doc = _corpus(tmp_path, [r for r in ROWS if r[0] != "o2"])
    assert match_ids(one_per_doc, ["docA", "docC"], 3, "auto", "idx") == "doc_id"
    assert match_ids(one_per_doc, ["docA"], 3, "doc_id", "idx") == "doc_id"


def test_ids_that_are_none_of_the_corpuss_are_named_with_what_was_tried(tmp_path):
    corpus = _corpus(tmp_path)
    with pytest.raises(DataError) as e:
        match_ids(corpus, ["docA#0_0", "msmarco_v2.1_doc_99#0_0"], 4, "auto", "/indexes/rag24")
    text = str(e.value)
    assert "/indexes/rag24" in text and "msmarco_v2.1_doc_99#0_0" in text
    assert "object_id / doc_id / metadata.segment_id / metadata.url" in text and "1 of 2" in text
    with pytest.raises(DataError, match="not the corpus's doc_id"):
        match_ids(corpus, ["o1"], 4, "doc_id", "idx")


def test_an_index_of_another_size_or_of_documents_split_into_objects_is_refused(tmp_path):
    corpus = _corpus(tmp_path)
    with pytest.raises(DataError, match="holds 5 entries keyed by object_id, but the corpus has 4"):
        match_ids(corpus, ["o1"], 5, "auto", "idx")
    with pytest.raises(DataError, match="4 objects for 3 documents"):
        match_ids(corpus, ["docA", "docB"], 3, "auto", "idx")


def test_hits_map_to_their_objects_in_order_and_an_unknown_id_is_named(tmp_path):
    corpus = _corpus(tmp_path)
    segments = NativeIds(corpus, "metadata.segment_id")
    run = {"q1": [('doc"C#0_0', 3.0), ("docA#0_0", 2.0)], "q2": [], "q3": [("docA#1_40", 1.0)]}
    assert segments.translate(run) == {"q1": [("o4", 3.0), ("o1", 2.0)], "q2": [], "q3": [("o2", 1.0)]}
    with pytest.raises(DataError, match=r"1 id\(s\) that are not metadata.segment_ids .* \['docZ#0_0'\]"):
        segments.translate({"q1": [("docZ#0_0", 1.0), ("docB#0_0", 0.5)]})


def test_a_metadata_field_is_read_as_json_reads_it(tmp_path):
    corpus = _corpus(tmp_path, ROWS + [("o5", "docD", "tab\there"), ("o6", "docE", "ünï")])
    batch = next(pq.ParquetFile(corpus).iter_batches(batch_size=10))
    assert id_column(batch, "metadata.segment_id").to_pylist() == [r[2] for r in ROWS] + ["tab\there", "ünï"]
    assert id_column(batch, "metadata.missing").to_pylist() == [None] * 6


def test_the_sample_spreads_over_the_whole_index():
    assert sample_positions(3) == [0, 1, 2]
    spread = sample_positions(10_000, 5)
    assert spread == [0, 2500, 5000, 7499, 9999]  # round(i * 9999 / 4)


@pytest.mark.parametrize("params", [BM25Params, DenseParams])
def test_ids_is_a_setting_of_a_prebuilt_index_only(params, tmp_path):
    with pytest.raises(ValidationError, match="give prebuilt too"):
        params(ids="doc_id")
    with pytest.raises(ValidationError, match="ids"):
        params(ids="segment_id")
    assert params().ids == "auto"


def test_a_built_index_under_other_ids_maps_its_hits_back_without_the_corpus(tmp_path):
    from rbench.retrievers.prebuilt import built_ids, built_map, write_id_map

    corpus = _corpus(tmp_path)  # row groups of 2: rows 0-1, 2-3
    assert [ids for ids, _, _ in built_ids(corpus, "position")] == [["doc_0", "doc_1", "doc_2", "doc_3"]]
    assert next(built_ids(corpus, "doc_id", titles=False))[0] == ["docA", "docA", "docB", "docC"]
    for kind in ("position", "object_id"):
        (tmp_path / kind).mkdir()
        write_id_map(corpus, kind, tmp_path / kind)
    assert built_map(tmp_path / "object_id") is None
    rows = built_map(tmp_path / "position")
    run = {"q1": [("doc_3", 3.0), ("doc_0", 2.0)], "q2": [("doc_2", 1.0)], "q3": []}
    assert rows.translate(run) == {"q1": [("o4", 3.0), ("o1", 2.0)], "q2": [("o3", 1.0)], "q3": []}
    with pytest.raises(DataError, match=r"1 id\(s\) that are not doc_ids .* \['doc_4'\]"):
        rows.translate({"q1": [("doc_4", 1.0), ("doc_1", 0.5)]})


def test_lucene_ids_choose_the_ids_of_a_built_index_and_leave_a_prebuilt_ones_alone(tmp_path):
    from rbench.retrievers.bm25 import BM25

    several, single = _corpus(tmp_path), _corpus(tmp_path / "one", [r for r in ROWS if r[0] != "o2"])
    assert BM25({})._lucene_ids(several) == "object_id" and BM25({})._lucene_ids(single) == "doc_id"
    assert BM25({"lucene_ids": "position"})._lucene_ids(single) == "position"
    with pytest.raises(DataError, match="lucene_ids doc_id needs one object per document"):
        BM25({"lucene_ids": "doc_id"})._lucene_ids(several)
    with pytest.raises(ValidationError, match="a prebuilt index has its own ids"):
        BM25Params(prebuilt="some-prebuilt-name", lucene_ids="position")
    assert BM25({}).index_params() == {} and BM25({"fields": "multifield"}).index_params() == {"fields": "multifield"}
    pq.write_table(pa.table({"object_id": ["o1"], "text": ["t"]}), tmp_path / "bare.parquet")
    assert BM25({})._lucene_ids(tmp_path / "bare.parquet") == "object_id"  # no document ids: rbench's own
