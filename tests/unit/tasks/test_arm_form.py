"""The ARM report's own computation, pinned independently of rbench's code: ARM's row and
metadata text (strings written by hand from ``scripts/target/serialize_tables.py`` and
``scripts/run_extract_schemas.py`` of apostolhskouk/ARM at 5a6cb92), TARGET's corpus forms
(``form: target``) on fixtures, and ARM's query sample (``src/utils/sample_queries.py``) against a
plain transcription of that file on the real OTT-QA dev questions."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from rbench.config import SubsampleConfig
from rbench.core.errors import ConfigError
from rbench.core.store import Artifact, Store
from rbench.dataset_adapters.serialize import arm_row_objects, serialize_row_arm, serialize_schema_arm
from rbench.tasks import subsample
from rbench.tasks.subsample import SUBSAMPLE, select_queries_arm
from tests.conftest import write_jsonl
from tests.unit.datasets.test_adapters import _ottqa_fixture, _prepare, _table, write_target, write_target_text2sql


def test_arms_row_text_byte_for_byte():
    assert serialize_row_arm("Television", ["Year", "Title"], ["2007", "Prime Suspect 7"]) == (
        "Television [SEP] [H] Year: 2007 , [H] Title: Prime Suspect 7")
    assert serialize_row_arm("Results", ["Party", "Votes", "%"], ["Green", "", "1.2"]) == (
        "Results [SEP] [H] Party: Green , [H] Votes:  , [H] %: 1.2")  # empty cells stay
    assert serialize_row_arm("", ["a", "b"], ["1", "2"]) == "[H] a: 1 , [H] b: 2"  # no name, no [SEP]
    assert serialize_row_arm("T", ["a", "b"], ["1"]) is None  # a row of the wrong length is skipped
    objects = list(arm_row_objects("T", ["a", "b"], [["1", "2"], ["3"], ["5", "6"]]))
    assert objects == [("row", 0, "T [SEP] [H] a: 1 , [H] b: 2", {"row": 0}),
                       ("row", 1, "T [SEP] [H] a: 5 , [H] b: 6", {"row": 2})]


def test_arms_metadata_text_cuts_a_column_at_its_first_colon():
    first = serialize_row_arm("singer", ["name", "age: years"], ["Joe", "52"])
    assert serialize_schema_arm("concert", "singer", first) == "concert [SEP] singer [SEP] [H] name [H] age"


BIRD_ROWS = [
    {"page_title": "concert_singer", "source": "table_singer",
     "object": "singer [SEP] [H] Singer_ID: 1 , [H] Name: Joe , [H] Time: 10:30"},
    {"page_title": "concert_singer", "source": "table_singer",
     "object": "singer [SEP] [H] Singer_ID: 2 , [H] Name: Ann , [H] Time: 11:00"},
    {"page_title": "concert_singer", "source": "table_table_x", "object": "table_x [SEP] [H] ratio:a: 5 , [H] b: [H] c"},
    {"page_title": "pets", "source": "table_singer", "object": "singer [SEP] [H] pet: cat"},
]
# What ARM's scripts/run_extract_schemas.py (apostolhskouk/ARM at 5a6cb92, its create_schema_file run
# unchanged, 2026-11-29) wrote for BIRD_ROWS as bird.jsonl: bird_schema.jsonl's lines.
BIRD_SCHEMA = [
    {"page_title": "concert_singer", "source": "table_singer",
     "object": "concert_singer [SEP] singer [SEP] [H] Singer_ID [H] Name [H] Time"},
    {"page_title": "concert_singer", "source": "table_table_x", "object": "concert_singer [SEP] x [SEP] [H] ratio [H] b [H] c"},
    {"page_title": "pets", "source": "table_singer", "object": "pets [SEP] singer [SEP] [H] pet"},
]


def test_bird_schema_from_the_release_rows_is_what_run_extract_schemas_writes(tmp_path):
    """Issue 69, item 2: ``schema_from: rows`` makes the metadata objects of the release's row file as
    ARM's script does (one per table, the first row's columns cut at their first colon, every
    ``table_`` dropped from the name), the same prepared corpus as the release's ``_schema`` files."""
    release = tmp_path / "release"
    for folder in ("serialized_data", "benchmarks"):
        (release / "assets/all_data" / folder).mkdir(parents=True)
    write_jsonl(release / "assets/all_data/serialized_data/bird.jsonl", BIRD_ROWS)
    write_jsonl(release / "assets/all_data/serialized_data/bird_schema.jsonl", BIRD_SCHEMA)
    gold = [{"query": "How old is Joe?", "document_ids": ["concert_singer_table_singer"]}]
    for name in ("bird.json", "bird_schema.json"):
        (release / "assets/all_data/benchmarks" / name).write_text(json.dumps(gold))
    made = _prepare(tmp_path / "rows", release, {"name": "bird", "adapter": "arm",
                                                 "params": {"benchmark": "bird_schema", "schema_from": "rows"}})
    read = _prepare(tmp_path / "read", release, {"name": "bird", "adapter": "arm", "params": {"benchmark": "bird_schema"}})
    corpus = _table(made.file("corpus.parquet"))
    assert [{"page_title": c["page_title"], "source": c["source"], "object": c["text"]} for c in corpus] == BIRD_SCHEMA
    assert [c["modality"] for c in corpus] == ["schema"] * 3
    assert corpus == _table(read.file("corpus.parquet"))
    assert _table(made.file("queries.parquet")) == _table(read.file("queries.parquet"))
    with pytest.raises(ValueError, match="benchmark 'bird' has its own objects"):
        _prepare(tmp_path / "bad", release, {"name": "bird", "adapter": "arm",
                                             "params": {"benchmark": "bird", "schema_from": "rows"}})


def test_ottqa_in_targets_form(tmp_path):
    raw = tmp_path / "raw"
    _ottqa_fixture(raw)
    prepared = _prepare(tmp_path, raw, {"name": "ottqa", "params": {"form": "target"}})
    assert [c["text"] for c in _table(prepared.file("corpus.parquet"))] == [
        "Television [SEP] [H] Year: 2007 , [H] Title: Prime Suspect 7"]  # no passages; the section names the row
    queries = {q["query_id"]: q["gold_doc_ids"] for q in _table(prepared.file("queries.parquet"))}
    assert queries == {"q1": ["Nonso Anozie :: Nonso_Anozie_1"], "q2": ["Nonso Anozie :: Nonso_Anozie_1"]}


def test_a_setting_the_form_fixes_is_refused():
    from rbench.config import DatasetConfig

    with pytest.raises(Exception, match="form: target fixes granularity to 'row', but granularity is 'cell'"):
        DatasetConfig.model_validate({"name": "fetaqa", "params": {"form": "target", "granularity": "cell"}})


def _fetaqa_fixture(raw):
    """Two examples over one table (same page and section), and a third table."""
    table = [["Year", "Club"], ["2001", "Ajax"], ["2002"]]
    base = {"table_page_title": "Jan Smit", "table_section_title": "Career", "table_array": table,
            "highlighted_cell_ids": [], "answer": "", "page_wikipedia_url": ""}
    (raw / "fetaqa").mkdir(parents=True)
    write_jsonl(raw / "fetaqa" / "fetaQA-v1_dev.jsonl", [
        {**base, "feta_id": 1, "table_source_json": "totto_source/dev_json/example-1.json",
         "question": "Club in 2001?"},
        {**base, "feta_id": 2, "table_source_json": "totto_source/dev_json/example-2.json", "question": "Which year?"},
        {**base, "feta_id": 3, "table_source_json": "totto_source/dev_json/example-3.json", "question": "Votes?",
         "table_page_title": "Vote", "table_section_title": "Result", "table_array": [["Party"], [""]]},
    ])


def test_fetaqa_in_targets_form_is_one_table_per_example(tmp_path):
    raw = tmp_path / "raw"
    _fetaqa_fixture(raw)
    target = _prepare(tmp_path / "t", raw, {"name": "fetaqa", "params": {"form": "target"}})
    corpus = _table(target.file("corpus.parquet"))
    assert [(c["doc_id"], c["text"]) for c in corpus] == [
        ("Jan Smit :: totto_source/dev_json/example-1.json", "Jan Smit [SEP] [H] Year: 2001 , [H] Club: Ajax"),
        ("Jan Smit :: totto_source/dev_json/example-2.json", "Jan Smit [SEP] [H] Year: 2001 , [H] Club: Ajax"),
        ("Vote :: totto_source/dev_json/example-3.json", "Vote [SEP] [H] Party: ")]
    queries = {q["query_id"]: q["gold_doc_ids"] for q in _table(target.file("queries.parquet"))}
    assert queries == {"1": ["Jan Smit :: totto_source/dev_json/example-1.json"],
                       "2": ["Jan Smit :: totto_source/dev_json/example-2.json"],
                       "3": ["Vote :: totto_source/dev_json/example-3.json"]}
    own = _prepare(tmp_path / "r", raw, {"name": "fetaqa"})
    assert {c["doc_id"] for c in _table(own.file("corpus.parquet"))} == {"Jan Smit :: Career", "Vote :: Result"}


def test_tabfact_in_targets_form_keeps_the_splits_tables_in_arms_text(tmp_path):
    raw = tmp_path / "raw"
    (raw / "tabfact_sample" / "all_csv").mkdir(parents=True)
    (raw / "tabfact_sample" / "all_csv" / "1-1-1.html.csv").write_text("rank#team\n1#\n2#tigers#x\n")
    (raw / "tabfact_sample" / "val_examples_sample.json").write_text(json.dumps(
        {"1-1-1.html.csv": [["the lions rank first"], [1], "none"]}))
    (raw / "tabfact_sample" / "table_to_page_sample.json").write_text(json.dumps(
        {"1-1-1.html.csv": ["league table", "https://en.wikipedia.org/wiki/League"]}))
    prepared = _prepare(tmp_path / "none", raw, {"name": "tabfact", "params": {"form": "target"}})
    assert [c["text"] for c in _table(prepared.file("corpus.parquet"))] == ["[H] rank: 1 , [H] team: "]  # the default
    paged = _prepare(tmp_path / "page", raw, {"name": "tabfact", "params": {"form": "target", "title": "page"}})
    assert [c["text"] for c in _table(paged.file("corpus.parquet"))] == ["league table [SEP] [H] rank: 1 , [H] team: "]


def test_target_in_arms_form_names_rows_by_context_else_the_table_id(tmp_path):
    raw = tmp_path / "raw"
    write_target(raw, "spider", {
        "database_id": ["concert", "concert"], "table_id": ["singer", "stadium"],
        "table": [[["name", "age"], ["Joe", "52"]], [["stadium_id", "capacity"], ["1", "4000"]]],
        "context": [json.dumps({"section_title": "Singers"}), json.dumps({})],
    }, {"query_id": [0], "query": ["How old is Joe?"], "database_id": ["concert"], "table_id": [["singer"]],
        "answer": ["52"]})
    rows = _prepare(tmp_path / "r", raw, {"name": "spider", "adapter": "target",
                                          "params": {"benchmark": "spider", "form": "target", "layout": "parquet"}})
    assert [c["text"] for c in _table(rows.file("corpus.parquet"))] == [
        "Singers [SEP] [H] name: Joe , [H] age: 52", "stadium [SEP] [H] stadium_id: 1 , [H] capacity: 4000"]
    params = {"benchmark": "spider", "form": "target", "granularity": "schema", "layout": "parquet"}
    schema = _prepare(tmp_path / "s", raw, {"name": "spider", "adapter": "target", "params": params})
    assert [c["text"] for c in _table(schema.file("corpus.parquet"))] == [
        "concert [SEP] singer [SEP] [H] name [H] age", "concert [SEP] stadium [SEP] [H] stadium_id [H] capacity"]


def test_spider_from_targets_text2sql_files_is_arms_metadata_objects(tmp_path):
    """Issue 69, item 2: Spider as ARM read it, TARGET's Text2SQL test split (a JSON file of columns),
    and as Table 6 searched it: the objects ARM's scripts/run_extract_schemas.py (run unchanged,
    2026-11-29) wrote from the rows scripts/target/serialize_tables.py makes of these tables (named by
    their ids, empty ones skipped, a row of the wrong length skipped)."""
    raw = tmp_path / "raw"
    write_target_text2sql(raw, "spider", "test", {
        "database_id": ["concert", "concert", "concert"], "table_id": ["singer", "table_stage", "empty"],
        "table": [[["name", "age"], ["Joe", "52"], ["Ann", "31"]], [["time: start", "hall"], ["x"], ["10", "A"]], []],
        "context": [{}, {}, {}]},
        {"query_id": ["0", "1"], "query": ["How old is Joe?", "Where does Joe sing?"],
         "database_id": ["concert", "concert"], "table_id": [["singer"], ["singer", "table_stage"]],
         "answer": ["52", "A"]})
    params = {"benchmark": "spider", "form": "target", "granularity": "schema"}
    schema = _prepare(tmp_path / "s", raw, {"name": "spider", "adapter": "target", "params": params})
    assert [c["text"] for c in _table(schema.file("corpus.parquet"))] == [
        "concert [SEP] singer [SEP] [H] name [H] age", "concert [SEP] stage [SEP] [H] time [H] hall"]
    queries = _table(schema.file("queries.parquet"))
    assert [q["gold_found"] for q in queries] == [1, 2]
    rows = _prepare(tmp_path / "r", raw, {"name": "spider", "adapter": "target",
                                          "params": {"benchmark": "spider", "form": "target"}})
    assert [c["text"] for c in _table(rows.file("corpus.parquet"))] == [
        "singer [SEP] [H] name: Joe , [H] age: 52", "singer [SEP] [H] name: Ann , [H] age: 31",
        "table_stage [SEP] [H] time: start: 10 , [H] hall: A"]
    with pytest.raises(ValueError, match="layout text2sql and split are for spider and bird"):
        _prepare(tmp_path / "x", raw, {"name": "ottqa", "adapter": "target",
                                       "params": {"benchmark": "ottqa", "split": "test"}})


def test_target_queries_without_a_table_and_repeated_tables_as_arm_leaves_them(tmp_path, caplog):
    """Issue 79: a Text2SQL query whose table_id is None or empty has no gold (ARM drops it before sampling:
    scripts/target/create_benchmarks.py lines 84-86, create_target_bench_all.py line 36, sample_queries.py
    lines 20-27), and a repeated database/table pair gives one schema object (run_extract_schemas.py)."""
    raw = tmp_path / "raw"
    write_target_text2sql(raw, "spider", "test", {
        "database_id": ["zoo", "zoo", "zoo"], "table_id": ["lions", "lions", "keepers"],
        "table": [[["name", "rank"], ["Leo", "1"]], [["name", "rank"], ["Leo", "2"]], [["keeper", "age"], ["Ann", "31"]]],
        "context": [{}] * 3},
        {"query_id": ["0", "1", "2", "3"], "query": ["Who is first?", "No table?", "Empty table id?", "Empty list?"],
         "database_id": ["zoo", "zoo", "zoo", "zoo"], "table_id": [["lions"], None, [""], []],
         "answer": ["Leo", "", "", ""]})
    prepared = _prepare(tmp_path / "s", raw, {"name": "spider", "adapter": "target",
                                              "params": {"benchmark": "spider", "form": "target", "granularity": "schema"}})
    assert [c["text"] for c in _table(prepared.file("corpus.parquet"))] == [
        "zoo [SEP] lions [SEP] [H] name [H] rank", "zoo [SEP] keepers [SEP] [H] keeper [H] age"]
    queries = {q["query_id"]: q["gold_doc_ids"] for q in _table(prepared.file("queries.parquet"))}
    assert queries == {"0": ["zoo :: lions"], "1": [], "2": [], "3": []}
    assert "3 quer(ies) name no table" in caplog.text and "1 repeated database/table pair(s)" in caplog.text


def _plain_sample_queries(items: list[dict], k: int) -> list[dict]:
    """``subsample_json`` of ARM's ``src/utils/sample_queries.py``, transcribed as plainly as it reads."""
    from sklearn.cluster import KMeans
    from sklearn.feature_extraction.text import TfidfVectorizer

    items = [item for item in items if not ("document_ids" in item and item["document_ids"] == [])]
    if len(items) <= k:
        return items
    queries = [item["query"] for item in items]
    tfidf = TfidfVectorizer().fit_transform(queries)
    kmeans = KMeans(n_clusters=k, random_state=42).fit(tfidf)
    distances = kmeans.transform(tfidf)
    return [items[int(distances[:, j].argmin())] for j in range(k)]


def test_arms_100_picks_on_ottqa_dev_match_a_plain_transcription_of_its_sampler(shared_data, tmp_path):
    questions = json.loads((shared_data / "ottqa" / "released_data" / "dev.json").read_text())
    items = [{"query": q["question"], "document_ids": [q["table_id"]], "id": q["question_id"]} for q in questions]
    expected = [item["id"] for item in _plain_sample_queries(items, 100)]
    assert len(expected) == 100
    picks = select_queries_arm([q["question"] for q in questions], 100, 42)
    assert [questions[i]["question_id"] for i in picks] == expected

    folder = tmp_path / "prep"
    folder.mkdir()
    gold = [[q["table_id"]] for q in questions]
    gold[picks[0]] = []  # a query without gold is dropped before clustering, as ARM's skip_field does
    pq.write_table(pa.table({"query_id": [q["question_id"] for q in questions],
                             "text": [q["question"] for q in questions], "gold_doc_ids": gold}),
                   folder / "queries.parquet")
    art = SUBSAMPLE.run(Store(tmp_path / "s"), [Artifact("prepare", "p", folder)],
                        SubsampleConfig(method="arm", size=100, seed=42))
    kept = pq.read_table(art.file("queries.parquet")).column("query_id").to_pylist()
    items[picks[0]]["document_ids"] = []
    assert kept == [item["id"] for item in _plain_sample_queries(items, 100)]
    assert art.info["without_gold"] == 1 and questions[picks[0]]["question_id"] not in kept


def test_a_query_picked_for_two_centroids_counts_twice(tmp_path, monkeypatch):
    monkeypatch.setattr(subsample, "select_queries_arm", lambda texts, size, seed: [2, 0, 2, 2])
    folder = tmp_path / "prep"
    folder.mkdir()
    pq.write_table(pa.table({"query_id": ["a", "b", "c"], "text": ["x", "y", "z"],
                             "gold_doc_ids": [["d"], ["d"], ["d"]]}), folder / "queries.parquet")
    art = SUBSAMPLE.run(Store(tmp_path / "s"), [Artifact("prepare", "p", folder)],
                        SubsampleConfig(method="arm", size=4, seed=42))
    out = pq.read_table(art.file("queries.parquet"))
    assert out.column("query_id").to_pylist() == ["c", "a", "c#2", "c#3"]
    assert out.column("text").to_pylist() == ["z", "x", "z", "z"] and art.info["repeated"] == 2


def test_the_default_methods_key_is_unchanged_by_the_method_setting():
    from rbench.tasks.subsample import _key_view

    assert _key_view(SubsampleConfig(size=5, seed=1)) == {"size": 5, "seed": 1}
    assert _key_view(SubsampleConfig(size=5, seed=1, method="arm"))["method"] == "arm"


def test_a_bad_method_is_refused():
    from rbench.config import parse_config

    with pytest.raises(ConfigError, match="subsample.method"):
        parse_config({"subsample": {"method": "random"}, "datasets": [{"name": "fetaqa"}],
                      "retrievers": [{"name": "bm25"}]})


def test_tabfact_keeps_the_examples_files_order_of_tables_and_statements(tmp_path):
    """What a sampler reads and ``doc_<n>`` numbers: test_examples.json's order (tables as listed,
    statements as listed), not the table ids sorted."""
    raw = tmp_path / "raw"
    (raw / "tabfact_sample" / "all_csv").mkdir(parents=True)
    for table in ("2-9.html.csv", "1-5.html.csv"):
        (raw / "tabfact_sample" / "all_csv" / table).write_text(f"name#score\n{table[:3]}#1\n")
    (raw / "tabfact_sample" / "val_examples_sample.json").write_text(json.dumps(
        {"2-9.html.csv": [["zeta wins", "alpha loses"], [1, 0], "none"], "1-5.html.csv": [["mid"], [1], "none"]}))
    (raw / "tabfact_sample" / "table_to_page_sample.json").write_text(json.dumps({}))
    prepared = _prepare(tmp_path, raw, {"name": "tabfact", "params": {"form": "target"}})
    assert [q["text"] for q in _table(prepared.file("queries.parquet"))] == ["zeta wins", "alpha loses", "mid"]
    assert [c["source"] for c in _table(prepared.file("corpus.parquet"))] == ["2-9.html.csv", "1-5.html.csv"]
