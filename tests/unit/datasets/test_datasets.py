"""Dataset adapters, serialization and chunking on fixtures in each source's exact format."""

from __future__ import annotations

import json
import re

import pyarrow.parquet as pq
import pytest

from rbench.config import DatasetConfig
from rbench.core.errors import DataError
from rbench.core.store import Artifact, Store
from rbench.dataset_adapters.chunking import ChunkerConfig, chunk_text, token_windows
from rbench.dataset_adapters.fetaqa import DEV
from rbench.dataset_adapters.serialize import serialize_row, table_objects
from rbench.tasks.download import DOWNLOAD, DownloadConfig
from rbench.tasks.prepare import PREPARE
from tests.conftest import tiny_dataset, write_jsonl

FETAQA_ROWS = [
    {"feta_id": 7, "table_source_json": "x.json", "page_wikipedia_url": "http://en.wikipedia.org/wiki/Andy_Karl",
     "table_page_title": "Andy Karl", "table_section_title": "Awards",
     "table_array": [["Year", "Award", "Work"], ["2014", "Tony Award", "Rocky"], ["2017", "Olivier Award", ""]],
     "highlighted_cell_ids": [[2, 1]], "question": "Which award in 2017?", "answer": "The Olivier Award."},
    {"feta_id": 8, "table_source_json": "y.json", "page_wikipedia_url": "http://en.wikipedia.org/wiki/Andy_Karl",
     "table_page_title": "Andy Karl", "table_section_title": "Awards",
     "table_array": [["Year", "Award", "Work"], ["2014", "Tony Award", "Rocky"], ["2017", "Olivier Award", ""]],
     "highlighted_cell_ids": [[1, 2]], "question": "For which work was he nominated in 2014?", "answer": "Rocky."},
]


def test_row_serialization_format():
    assert serialize_row("T", ["a", "b", "c"], ["1", "", "3"]) == "T [SEP] [H] a : 1 , [H] c : 3"
    cells = list(table_objects("T", ["a", "b"], [["1", "2"], ["3", ""]], "cell"))
    assert [c[2] for c in cells] == ["T [SEP] [H] a : 1", "T [SEP] [H] b : 2", "T [SEP] [H] a : 3"]
    (table,) = table_objects("T", ["a", "b"], [["1", "2"], ["3", "4"]], "table")
    assert table[2] == "T [SEP] [H] a : 1 , [H] b : 2 [ROW] [H] a : 3 , [H] b : 4"


def test_token_windows_overlap_and_tail():
    text = " ".join(f"w{i}" for i in range(10))
    assert token_windows(text, 4, 1) == ["w0 w1 w2 w3", "w3 w4 w5 w6", "w6 w7 w8 w9"]
    assert token_windows("a b", 4, 1) == ["a b"]
    assert token_windows("   ", 4, 1) == []
    assert chunk_text("a b c", ChunkerConfig(kind="none")) == ["a b c"]


def _prepare(tmp_path, dataset: dict, files_dir):
    cfg = DatasetConfig.model_validate(dataset)
    raw = Artifact("download", "raw", files_dir)
    return PREPARE.run(Store(tmp_path / "store"), [raw], cfg)


def test_fetaqa_adapter_dedups_tables_and_serializes_rows(tmp_path):
    raw = tmp_path / "raw"
    (raw / "fetaqa").mkdir(parents=True)
    write_jsonl(raw / DEV.name, FETAQA_ROWS)
    prepared = _prepare(tmp_path, {"name": "fetaqa"}, raw)
    corpus = pq.read_table(prepared.file("corpus.parquet")).to_pylist()
    queries = pq.read_table(prepared.file("queries.parquet")).to_pylist()
    assert [c["text"] for c in corpus] == [
        "Andy Karl - Awards [SEP] [H] Year : 2014 , [H] Award : Tony Award , [H] Work : Rocky",
        "Andy Karl - Awards [SEP] [H] Year : 2017 , [H] Award : Olivier Award",
    ]
    assert {c["doc_id"] for c in corpus} == {"Andy Karl :: Awards"}
    assert corpus[0]["modality"] == "row" and json.loads(corpus[1]["metadata"]) == {"row": 1}
    assert queries[0] == {"query_id": "7", "text": "Which award in 2017?", "gold_doc_ids": ["Andy Karl :: Awards"],
                          "gold_found": 1}
    assert prepared.info["objects"] == 2 and prepared.info["queries"] == 2


def test_object_ids_are_stable_across_runs(tmp_path):
    raw = tmp_path / "raw"
    (raw / "fetaqa").mkdir(parents=True)
    write_jsonl(raw / DEV.name, FETAQA_ROWS)
    a = _prepare(tmp_path / "a", {"name": "fetaqa"}, raw)
    b = _prepare(tmp_path / "b", {"name": "fetaqa"}, raw)
    ids = lambda art: pq.read_table(art.file("corpus.parquet")).column("object_id").to_pylist()  # noqa: E731
    assert ids(a) == ids(b) and len(set(ids(a))) == 2


def test_fetaqa_malformed_inputs_are_named(tmp_path):
    raw = tmp_path / "raw"
    (raw / "fetaqa").mkdir(parents=True)
    (raw / DEV.name).write_text('{"feta_id": 1}\n')
    with pytest.raises(DataError, match=r"fetaQA-v1_dev.jsonl:1 lacks FeTaQA field\(s\).*table_array"):
        _prepare(tmp_path, {"name": "fetaqa"}, raw)
    (raw / DEV.name).write_text("not json\n")
    with pytest.raises(DataError, match="fetaQA-v1_dev.jsonl:1 is not valid JSON"):
        _prepare(tmp_path, {"name": "fetaqa"}, raw)


def _download_tiny(tmp_path, dataset):
    cfg = DatasetConfig.model_validate(dataset)
    return cfg, DOWNLOAD.run(Store(tmp_path / "store"), [], DownloadConfig.of(cfg))


def test_jsonl_adapter_reads_arm_fields(tmp_path, tiny_files):
    corpus_path, queries_path = tiny_files
    cfg, raw = _download_tiny(tmp_path, tiny_dataset(corpus_path, queries_path))
    prepared = PREPARE.run(Store(tmp_path / "store"), [raw], cfg)
    corpus = pq.read_table(prepared.file("corpus.parquet")).to_pylist()
    assert len(corpus) == 6 and prepared.info["documents"] == 5
    assert corpus[0]["doc_id"] == "Andy Karl :: awards" and corpus[0]["source"] == "awards"
    assert corpus[0]["text"].startswith("Andy Karl [SEP] [H] Year : 2017")
    assert json.loads(corpus[0]["metadata"]) == {"lang": "en"}
    queries = pq.read_table(prepared.file("queries.parquet")).to_pylist()
    assert queries[4]["gold_doc_ids"] == ["Chess :: intro", "Volcano :: intro"]


def test_jsonl_chunks_long_text_with_title_prefix(tmp_path):
    words = " ".join(f"w{i}" for i in range(10))
    corpus = write_jsonl(tmp_path / "c.jsonl", [{"doc_id": "D", "title": "Doc", "text": words}])
    queries = write_jsonl(tmp_path / "q.jsonl", [{"query_id": "1", "text": "w1", "gold_doc_ids": ["D"]}])
    ds = {"name": "c", "adapter": "jsonl", "params": {
        "corpus": str(corpus), "queries": str(queries), "title_field": "title", "prefix_title": True,
        "chunker": {"kind": "tokens", "size": 4, "overlap": 1}}}
    cfg, raw = _download_tiny(tmp_path, ds)
    texts = pq.read_table(PREPARE.run(Store(tmp_path / "store"), [raw], cfg).file("corpus.parquet")).column("text")
    assert texts.to_pylist() == ["Doc [SEP] w0 w1 w2 w3", "Doc [SEP] w3 w4 w5 w6", "Doc [SEP] w6 w7 w8 w9"]


def test_jsonl_missing_field_and_useless_gold_are_errors(tmp_path, tiny_files):
    corpus_path, queries_path = tiny_files
    ds = tiny_dataset(corpus_path, queries_path)
    ds["params"]["text_field"] = "body"
    cfg, raw = _download_tiny(tmp_path, ds)
    with pytest.raises(DataError, match=r"corpus.jsonl:1 has no field 'body' \(set by 'text_field'\)"):
        PREPARE.run(Store(tmp_path / "store"), [raw], cfg)
    ds = tiny_dataset(corpus_path, write_jsonl(tmp_path / "q2.jsonl", [
        {"query_id": "x", "query": "?", "document_ids": ["Nowhere :: none"]}]))
    cfg, raw = _download_tiny(tmp_path, ds)
    with pytest.raises(DataError, match=r"1 of 1 queries have no gold document in the corpus"):
        PREPARE.run(Store(tmp_path / "store"), [raw], cfg)


def test_empty_corpus_is_an_error(tmp_path, tiny_files):
    _, queries_path = tiny_files
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    cfg, raw = _download_tiny(tmp_path, tiny_dataset(empty, queries_path))
    with pytest.raises(DataError, match=f"'tiny' produced an empty corpus from {re.escape(str(empty))} "):
        PREPARE.run(Store(tmp_path / "store"), [raw], cfg)


@pytest.mark.parametrize("text", ["\u0000\u0000", " \u0000\n", "\u0000"])
def test_a_text_of_nul_characters_is_blank(tmp_path, tiny_files, text):
    """Nothing to index: left out and counted like whitespace, by the columnar and the row reader alike."""
    from tests.conftest import CORPUS

    _, queries_path = tiny_files
    nul = dict(CORPUS[0], object=text, page_title="Nul page")
    corpus = write_jsonl(tmp_path / "nul.jsonl", [*CORPUS, nul])
    cfg, raw = _download_tiny(tmp_path, tiny_dataset(corpus, queries_path))
    prepared = PREPARE.run(Store(tmp_path / "store"), [raw], cfg)
    assert prepared.info["empty_texts_skipped"] == 1 and prepared.info["objects"] == len(CORPUS)
    only = write_jsonl(tmp_path / "only-nul.jsonl", [nul])
    cfg, raw = _download_tiny(tmp_path, tiny_dataset(only, queries_path))
    with pytest.raises(DataError, match=r"empty corpus from .*only-nul.jsonl \(1 objects with blank text skipped\)"):
        PREPARE.run(Store(tmp_path / "store"), [raw], cfg)


def test_fetaqa_real_dev_file(shared_data, tmp_path):
    prepared = _prepare(tmp_path, {"name": "fetaqa"}, shared_data)
    assert prepared.info["queries"] == 1001
    assert prepared.info["documents"] == 992
    assert prepared.info["queries_without_gold_in_corpus"] == 0
    assert json.loads(prepared.file("validation.json").read_text())["duplicate_object_ids"] == 0
