"""OTT-QA, TabFact, ARM release, TARGET and BEIR adapters on fixtures in each source's exact
format, OTT-QA and TabFact also on the real files; and the validation report."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from rbench.config import DatasetConfig
from rbench.core.errors import DataError
from rbench.core.store import Artifact, Store
from rbench.dataset_adapters.serialize import table_objects
from rbench.tasks.prepare import PREPARE
from tests.conftest import write_jsonl


def _prepare(tmp_path: Path, raw: Path, dataset: dict) -> Artifact:
    return PREPARE.run(Store(tmp_path / "store"), [Artifact("download", "raw", raw)], DatasetConfig.model_validate(dataset))


def _table(path: Path) -> list[dict]:
    return pq.read_table(path).to_pylist()


def _ottqa_fixture(raw: Path) -> None:
    (raw / "ottqa" / "tables").mkdir(parents=True)
    (raw / "ottqa" / "passages").mkdir(parents=True)
    (raw / "ottqa" / "released_data").mkdir(parents=True)
    table = {"url": "https://en.wikipedia.org/wiki/Nonso_Anozie", "title": "Nonso Anozie",
             "header": [["Year", []], ["Title", []]],
             "data": [[["2007", []], ["Prime Suspect 7", ["/wiki/Prime_Suspect"]]]],
             "section_title": "Television", "section_text": "", "uid": "Nonso_Anozie_1", "intro": "..."}
    (raw / "ottqa" / "tables" / "Nonso_Anozie_1.json").write_text(json.dumps(table))
    (raw / "ottqa" / "passages" / "Nonso_Anozie_1.json").write_text(json.dumps(
        {"/wiki/Prime_Suspect": "Prime Suspect is a police drama created by Lynda La Plante ."}))
    (raw / "ottqa" / "released_data" / "dev.traced.json").write_text(json.dumps([
        {"question_id": "q1", "question": "Who created the series?", "table_id": "Nonso_Anozie_1",
         "answer-text": "Lynda La Plante", "answer-node": [["Prime Suspect", [0, 1], "/wiki/Prime_Suspect", "passage"]]},
        {"question_id": "q2", "question": "What year?", "table_id": "Nonso_Anozie_1", "answer-text": "2007",
         "answer-node": [["2007", [0, 0], None, "table"]]},
    ]))


def test_ottqa_fixture_mixes_rows_and_passages(tmp_path):
    raw = tmp_path / "raw"
    _ottqa_fixture(raw)
    prepared = _prepare(tmp_path, raw, {"name": "ottqa"})
    corpus = _table(prepared.file("corpus.parquet"))
    assert [c["modality"] for c in corpus] == ["row", "text"]
    assert corpus[0]["text"] == "Nonso Anozie - Television [SEP] [H] Year : 2007 , [H] Title : Prime Suspect 7"
    assert corpus[1]["text"].startswith("Prime Suspect [SEP] Prime Suspect is a police drama")
    queries = {q["query_id"]: q["gold_doc_ids"] for q in _table(prepared.file("queries.parquet"))}
    assert queries == {"q1": ["Nonso Anozie :: Nonso_Anozie_1", "Prime Suspect :: passage"],
                       "q2": ["Nonso Anozie :: Nonso_Anozie_1"]}


@pytest.mark.parametrize("title, head", [("page_section", "Nonso Anozie - Television"), ("page", "Nonso Anozie"),
                                         ("section", "Television"), ("table_id", "Nonso_Anozie_1"), ("none", "")])
def test_ottqa_tables_only_is_targets_form_under_each_title(tmp_path, title, head):
    raw = tmp_path / "raw"
    _ottqa_fixture(raw)
    prepared = _prepare(tmp_path, raw, {"name": "ottqa", "params": {"passages": False, "title": title}})
    corpus = _table(prepared.file("corpus.parquet"))
    assert [c["text"] for c in corpus] == [f"{head} [SEP] [H] Year : 2007 , [H] Title : Prime Suspect 7"]
    queries = {q["query_id"]: q["gold_doc_ids"] for q in _table(prepared.file("queries.parquet"))}
    assert queries == {"q1": ["Nonso Anozie :: Nonso_Anozie_1"], "q2": ["Nonso Anozie :: Nonso_Anozie_1"]}


def test_tabfact_fixture(tmp_path):
    raw = tmp_path / "raw"
    (raw / "tabfact_sample" / "all_csv").mkdir(parents=True)
    (raw / "tabfact_sample" / "all_csv" / "1-1-1.html.csv").write_text("rank#team\n1#lions\n2#tigers\n")
    (raw / "tabfact_sample" / "all_csv" / "2-2-2.html.csv").write_text("year#winner\n1999#ann\n")
    (raw / "tabfact_sample" / "val_examples_sample.json").write_text(json.dumps({
        "1-1-1.html.csv": [["the lions rank first", "the tigers rank first"], [1, 0], "none"],
        "2-2-2.html.csv": [["ann won in 1999"], [1], "list of winners"],
    }))
    (raw / "tabfact_sample" / "table_to_page_sample.json").write_text(json.dumps(
        {"1-1-1.html.csv": ["league table", "https://en.wikipedia.org/wiki/League"]}))
    prepared = _prepare(tmp_path, raw, {"name": "tabfact", "params": {"statements": "entailed"}})
    corpus = _table(prepared.file("corpus.parquet"))
    assert corpus[0]["text"] == "league table [SEP] [H] rank : 1 , [H] team : lions"
    assert corpus[2]["text"] == "list of winners [SEP] [H] year : 1999 , [H] winner : ann"
    queries = _table(prepared.file("queries.parquet"))
    assert [(q["query_id"], q["gold_doc_ids"]) for q in queries] == [
        ("1-1-1.html.csv#0", ["league table :: 1-1-1.html.csv"]), ("2-2-2.html.csv#0", ["list of winners :: 2-2-2.html.csv"])]


def test_arm_release_fixture_uses_its_doc_id_join(tmp_path):
    raw = tmp_path / "raw"
    (raw / "assets/all_data/serialized_data").mkdir(parents=True)
    (raw / "assets/all_data/benchmarks").mkdir(parents=True)
    write_jsonl(raw / "assets/all_data/serialized_data/feverous.jsonl", [
        {"object": "Lions [SEP] [H] rank : 1", "page_title": "Lions", "source": "table_0"},
        {"object": "Lions [SEP] [H] rank : 2", "page_title": "Lions", "source": "table_0"},
        {"object": "Lions are big cats.", "page_title": "Lions", "source": "sentence_3"},
    ])
    (raw / "assets/all_data/benchmarks/feverous.json").write_text(json.dumps(
        [{"query": "Are lions cats?", "document_ids": ["Lions_sentence_3", "Lions_table_0"]}]))
    prepared = _prepare(tmp_path, raw, {"name": "fev", "adapter": "arm", "params": {"benchmark": "feverous"}})
    corpus = _table(prepared.file("corpus.parquet"))
    assert [c["doc_id"] for c in corpus] == ["Lions_table_0", "Lions_table_0", "Lions_sentence_3"]
    assert [c["modality"] for c in corpus] == ["table", "table", "text"]
    assert len({c["object_id"] for c in corpus}) == 3
    assert _table(prepared.file("queries.parquet"))[0]["gold_doc_ids"] == ["Lions_sentence_3", "Lions_table_0"]


def test_arm_release_sample_is_its_benchmarks_subsampled_file(tmp_path):
    raw = tmp_path / "raw"
    write_release(raw, "fetaqa", [{"object": "Lions [SEP] [H] rank : 1", "page_title": "Lions", "source": "table_0"}],
                  [{"query": f"q{i}", "document_ids": ["Lions_table_0"]} for i in range(3)])
    (raw / "assets/all_data/benchmarks_subsampled").mkdir()
    (raw / "assets/all_data/benchmarks_subsampled/fetaqa.json").write_text(json.dumps(
        [{"query": "q2", "document_ids": ["Lions_table_0"]}]))
    prepared = _prepare(tmp_path, raw, {"name": "f", "adapter": "arm", "params": {"benchmark": "fetaqa",
                                                                                 "queries": "sample"}})
    assert [(q["query_id"], q["text"]) for q in _table(prepared.file("queries.parquet"))] == [("0", "q2")]
    every = _prepare(tmp_path / "all", raw, {"name": "f", "adapter": "arm", "params": {"benchmark": "fetaqa"}})
    assert len(_table(every.file("queries.parquet"))) == 3


def write_release(release: Path, benchmark: str, objects: list[dict], entries: list[dict]) -> Path:
    """One benchmark of the ARM release in its layout: its objects file and its benchmark file."""
    for folder in ("serialized_data", "benchmarks"):
        (release / "assets/all_data" / folder).mkdir(parents=True, exist_ok=True)
    write_jsonl(release / f"assets/all_data/serialized_data/{benchmark}.jsonl", objects)
    (release / f"assets/all_data/benchmarks/{benchmark}.json").write_text(json.dumps(entries, indent=2))
    return release


def same_prepared(first: Artifact, second: Artifact) -> None:
    """Two prepared datasets hold the same objects, in the same order, and the same queries."""
    keep = ("object_id", "text", "doc_id", "page_title", "source", "modality")
    rows = [[{k: r[k] for k in keep} for r in _table(a.file("corpus.parquet"))] for a in (first, second)]
    assert rows[0] == rows[1]
    assert _table(first.file("queries.parquet")) == _table(second.file("queries.parquet"))


def write_target(raw: Path, benchmark: str, corpus: dict, queries: dict) -> None:
    """A TARGET dataset's two Parquet folders in the hub layout, from column dicts."""
    for part, columns in (("corpus", corpus), ("queries", queries)):
        folder = raw / "target" / f"{benchmark}-{part}" / "data"
        folder.mkdir(parents=True)
        pq.write_table(pa.table(columns), folder / "train-00000-of-00001.parquet")


def write_target_text2sql(raw: Path, benchmark: str, split: str, corpus: dict, queries: dict) -> None:
    """A TARGET Text2SQL dataset in the hub layout TARGET's loader reads: the corpus one JSON file of
    columns (``<name>-corpus-<split>.json``), the queries a Parquet dataset."""
    folder = raw / "target" / f"{benchmark}-corpus-{split}"
    folder.mkdir(parents=True)
    (folder / f"{benchmark}-corpus-{split}.json").write_text(json.dumps(corpus))
    folder = raw / "target" / f"{benchmark}-queries-{split}" / "data"
    folder.mkdir(parents=True)
    pq.write_table(pa.table(queries), folder / f"{split}-00000-of-00001.parquet")


def test_target_fixture_rows_and_schema(tmp_path):
    raw = tmp_path / "raw"
    write_target(raw, "spider", {
        "database_id": ["concert", "concert"], "table_id": ["singer", "stadium"],
        "table": [[["name", "age"], ["Joe", "52"], ["Ann", "31"]], [["stadium_id", "capacity"], ["1", "4000"]]],
        "context": [{"note": ""}, {"note": ""}],
    }, {
        "query_id": [0, 1], "query": ["How old is Joe?", "Which singers sang at stadiums?"],
        "database_id": ["concert", "concert"], "table_id": [["singer"], ["singer", "stadium"]],
        "answer": ["52", "?"],
    })
    rows = _prepare(tmp_path / "r", raw, {"name": "spider", "adapter": "target",
                                          "params": {"benchmark": "spider", "layout": "parquet"}})
    assert [c["text"] for c in _table(rows.file("corpus.parquet"))] == [
        "singer [SEP] [H] name : Joe , [H] age : 52", "singer [SEP] [H] name : Ann , [H] age : 31",
        "stadium [SEP] [H] stadium_id : 1 , [H] capacity : 4000"]
    schema = _prepare(tmp_path / "s", raw, {"name": "spider", "adapter": "target",
                                            "params": {"benchmark": "spider", "granularity": "schema", "layout": "parquet"}})
    assert [c["text"] for c in _table(schema.file("corpus.parquet"))] == [
        "singer [SEP] [H] name , [H] age", "stadium [SEP] [H] stadium_id , [H] capacity"]
    queries = _table(schema.file("queries.parquet"))
    assert queries[1]["gold_doc_ids"] == ["concert :: singer", "concert :: stadium"]


def test_beir_fixture(tmp_path, caplog):
    folder = tmp_path / "scifact"
    (folder / "qrels").mkdir(parents=True)
    write_jsonl(folder / "corpus.jsonl", [{"_id": "d1", "title": "Cats", "text": "Cats purr."},
                                          {"_id": "d2", "title": "", "text": "Dogs bark."}])
    write_jsonl(folder / "queries.jsonl", [{"_id": "1", "text": "do cats purr"}, {"_id": "2", "text": "unjudged"}])
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n1\td1\t1\n1\td2\t0\n2\td1\t0\n")
    from rbench.tasks.download import DOWNLOAD, DownloadConfig

    texts = {}
    for title in ("space", "sep", "none"):
        cfg = DatasetConfig.model_validate({"name": "scifact", "adapter": "beir",
                                            "params": {"path": str(folder), "title": title}})
        raw = DOWNLOAD.run(Store(tmp_path / "store"), [], DownloadConfig.of(cfg))
        prepared = PREPARE.run(Store(tmp_path / "store"), [raw], cfg)
        texts[title] = [c["text"] for c in _table(prepared.file("corpus.parquet"))]
    assert texts == {"space": ["Cats Cats purr.", "Dogs bark."], "sep": ["Cats [SEP] Cats purr.", "Dogs bark."],
                     "none": ["Cats purr.", "Dogs bark."]}
    assert _table(prepared.file("queries.parquet")) == [
        {"query_id": "1", "text": "do cats purr", "gold_doc_ids": ["d1"], "gold_grades": [1],
         "nonrelevant_doc_ids": ["d2"], "excluded_doc_ids": ["1"], "gold_found": 1}]
    assert "1 queries of the qrels (such as '2') have no document graded > 0" in caplog.text
    with pytest.raises(ValueError, match="lacks"):
        DatasetConfig.model_validate({"name": "x", "adapter": "beir", "params": {"path": str(tmp_path)}})


def test_beir_grades_reach_ndcg_and_trec_qrels_read_and_write_with_grade_0_kept(tmp_path):
    from rbench.config import MetricsConfig
    from rbench.tasks.download import DOWNLOAD, DownloadConfig
    from rbench.tasks.evaluate import EVALUATE

    folder = tmp_path / "graded"
    folder.mkdir()
    write_jsonl(folder / "corpus.jsonl", [{"_id": d, "text": f"text {d}"} for d in ("a", "b", "c")])
    write_jsonl(folder / "queries.jsonl", [{"_id": "q", "text": "which"}])
    (folder / "judged.trec").write_text("q 0 a 3\nq 0 b 1\nq 0 c 0\n")
    cfg = DatasetConfig.model_validate({"name": "graded", "adapter": "beir",
                                        "params": {"path": str(folder), "qrels": str(folder / "judged.trec")}})
    store = Store(tmp_path / "store")
    prepared = PREPARE.run(store, [DOWNLOAD.run(store, [], DownloadConfig.of(cfg))], cfg)
    assert _table(prepared.file("queries.parquet")) == [
        {"query_id": "q", "text": "which", "gold_doc_ids": ["a", "b"], "gold_grades": [3, 1],
         "nonrelevant_doc_ids": ["c"], "excluded_doc_ids": ["q"], "gold_found": 2}]
    run_folder = tmp_path / "run"
    run_folder.mkdir()
    pq.write_table(pa.table({"query_id": ["q", "q", "q"], "object_id": ["ob", "oc", "oa"], "doc_id": ["b", "c", "a"],
                             "rank": [1, 2, 3], "score": [3.0, 2.0, 1.0]}), run_folder / "run.parquet")
    evaluated = EVALUATE.run(store, [prepared, Artifact("retrieve", "run", run_folder)], MetricsConfig(k=[3]))
    ndcg = next(r["value"] for r in _table(evaluated.file("aggregate.parquet")) if r["metric"] == "ndcg")
    import math

    assert ndcg == pytest.approx((1 + 3 / 2) / (3 + 1 / math.log2(3)))  # graded, not (1 + 0.5) / (1 + 0.63)
    assert evaluated.file("qrels.trec").read_text() == "q 0 c 0\nq 0 a 3\nq 0 b 1\n"  # every judgement kept


def test_validation_reports_partial_gold_and_honours_the_threshold(tmp_path):
    raw = tmp_path / "raw"
    _ottqa_fixture(raw)
    traced = raw / "ottqa/released_data/dev.traced.json"
    questions = json.loads(traced.read_text())
    questions[0]["answer-node"].append(["X", [0, 0], "/wiki/Missing_Page", "passage"])
    traced.write_text(json.dumps(questions))
    prepared = _prepare(tmp_path, raw, {"name": "ottqa"})
    report = json.loads(prepared.file("validation.json").read_text())
    assert report["queries_with_some_gold_missing"] == 1 and report["queries_without_gold_in_corpus"] == 0
    assert report["missing_gold_examples"] == [{"query_id": "q1", "absent": ["Missing Page :: passage"]}]
    queries = {q["query_id"]: q for q in _table(prepared.file("queries.parquet"))}
    assert queries["q1"]["gold_found"] == len(set(queries["q1"]["gold_doc_ids"])) - 1  # the ceiling's count
    assert all(q["gold_found"] == len(set(q["gold_doc_ids"])) for qid, q in queries.items() if qid != "q1")


def test_ceilings_hand_computed():
    """Issue 69, item 4: with 1 of 2 gold documents in the corpus, then 0 of 1, then 3 of 3 (one
    listed twice), no retriever passes recall (0.5 + 0 + 1) / 3 = 0.5 or perfect recall 1/3; a
    query with no gold is not scored."""
    from rbench.tasks.evaluate import ceilings

    gold = {"a": ["x", "y"], "b": ["z"], "c": ["u", "v", "w", "u"], "d": []}
    assert ceilings(gold, {"a": 1, "b": 0, "c": 3, "d": 0}) == {
        "gold_outside_corpus": 2, "recall_ceiling": 0.5, "perfect_recall_ceiling": 0.3333}
    assert ceilings({"d": []}, {"d": 0}) == {}


def test_schema_granularity_serialization():
    (obj,) = table_objects("singer", ["name", "age"], [["Joe", "52"]], "schema")
    assert obj == ("schema", 0, "singer [SEP] [H] name , [H] age", {"columns": 2})


def test_ottqa_real_dev(shared_data, tmp_path):
    prepared = _prepare(tmp_path, shared_data, {"name": "ottqa"})
    info = prepared.info
    assert info["queries"] == 2214 and info["objects"] == 30532 and info["documents"] == 18630
    assert info["queries_without_gold_in_corpus"] == 0 and info["queries_with_some_gold_missing"] == 0


def test_tabfact_real_sample(shared_data, tmp_path):
    prepared = _prepare(tmp_path, shared_data, {"name": "tabfact"})
    assert prepared.info["documents"] == 40 and prepared.info["queries"] == 273 and prepared.info["objects"] == 570


def test_unreadable_ottqa_table_is_named(tmp_path):
    raw = tmp_path / "raw"
    _ottqa_fixture(raw)
    (raw / "ottqa/tables/Nonso_Anozie_1.json").write_text("{broken")
    with pytest.raises(DataError, match="Nonso_Anozie_1.json is not a readable OTT-QA JSON file"):
        _prepare(tmp_path, raw, {"name": "ottqa"})
