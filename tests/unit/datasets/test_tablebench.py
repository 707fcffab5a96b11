"""TableBench from its upstream file, as the ARM reproduction's three scripts turn it into the release's
corpus and benchmark (issue 69, item 3). ~2 s."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rbench.core.errors import DataError
from tests.unit.datasets.test_adapters import _prepare, _table, same_prepared, write_release

LIONS = {"columns": ["year", "team", "score"], "data": [[1998, "Lions", 2.5], [1999, "Tigers", None]]}
CAFES = {"columns": ["city", "caf\u00e9s"], "data": [["Oslo", 3], ["Bergen", True], ["short"]]}
QUESTIONS = [
    {"id": "q1", "qtype": "FactChecking", "qsubtype": "MatchBased", "question": "Which team won in 1998?",
     "table": LIONS},
    {"id": "q2", "qtype": "NumericalReasoning", "qsubtype": "Counting", "question": "How many caf\u00e9s opened?",
     "table": CAFES},
    {"id": "q3", "qtype": "DataAnalysis", "qsubtype": "TrendForecasting", "question": "Will the Lions score more?",
     "table": LIONS},
    {"id": "q4", "qtype": "FactChecking", "qsubtype": "MatchBased", "question": "Is the table empty?",
     "table": {"columns": [], "data": [[1]]}},
    {"id": "q5", "qtype": "Visualization", "qsubtype": "ChartGeneration", "question": "Plot nothing", "table": None},
    {"id": "q6", "qtype": "NumericalReasoning", "qsubtype": "Counting", "question": "How many caf\u00e9s in total?",
     "table": CAFES},
]
# What ARM's scripts/table_bench/append_table_ids.py, serialize_tables.py and generate_benchmark_all.py
# (apostolhskouk/ARM at 5a6cb92, run unchanged in that order, 2026-11-29) wrote for QUESTIONS:
# serialized_tables.jsonl's lines, and table_bench.json's entries.
ARM_OBJECTS = [
    {"page_title": "FactCheckingMatchBased", "source": "table_1",
     "object": "[SEP] [H] year: 1998 , [H] team: Lions , [H] score: 2.5"},
    {"page_title": "FactCheckingMatchBased", "source": "table_1",
     "object": "[SEP] [H] year: 1999 , [H] team: Tigers , [H] score: None"},
    {"page_title": "NumericalReasoningCounting", "source": "table_2", "object": "[SEP] [H] city: Oslo , [H] caf\u00e9s: 3"},
    {"page_title": "NumericalReasoningCounting", "source": "table_2",
     "object": "[SEP] [H] city: Bergen , [H] caf\u00e9s: True"},
]
ARM_BENCHMARK = [
    {"query": "Which team won in 1998?", "document_ids": ["FactCheckingMatchBased_table_1"]},
    {"query": "How many caf\u00e9s opened?", "document_ids": ["NumericalReasoningCounting_table_2"]},
    {"query": "Will the Lions score more?", "document_ids": ["DataAnalysisTrendForecasting_table_1"]},
    {"query": "Is the table empty?", "document_ids": ["FactCheckingMatchBased_table_3"]},
    {"query": "Plot nothing", "document_ids": ["VisualizationChartGeneration_None"]},
    {"query": "How many caf\u00e9s in total?", "document_ids": ["NumericalReasoningCounting_table_2"]},
]
LENIENT = {"max_missing_gold": 1.0}  # three of the six questions' gold is outside the corpus, as ARM's steps leave it


def _upstream(raw: Path, questions: list) -> Path:
    path = raw / "table_bench" / "TableBench.jsonl"
    path.parent.mkdir(parents=True)
    path.write_text("".join(json.dumps(q) + "\n" for q in questions))
    return raw


def test_tablebench_from_the_upstream_file_writes_what_arms_scripts_write(tmp_path):
    prepared = _prepare(tmp_path, _upstream(tmp_path / "raw", QUESTIONS),
                        {"name": "tablebench", "adapter": "tablebench", **LENIENT})
    corpus = _table(prepared.file("corpus.parquet"))
    assert [{"page_title": c["page_title"], "source": c["source"], "object": c["text"]} for c in corpus] == ARM_OBJECTS
    assert [c["doc_id"] for c in corpus] == [f"{o['page_title']}_{o['source']}" for o in ARM_OBJECTS]
    queries = _table(prepared.file("queries.parquet"))
    assert [{"query": q["text"], "document_ids": q["gold_doc_ids"]} for q in queries] == ARM_BENCHMARK
    assert [q["gold_found"] for q in queries] == [1, 1, 0, 0, 0, 1]  # q3: its table is filed under q1's type


def test_tablebench_from_the_upstream_file_is_the_arm_release_built_by_arms_scripts(tmp_path):
    """The same prepared corpus and queries as the ``arm`` adapter reading the release files ARM's
    scripts wrote: the same objects in the same order, so Lucene's ``doc_<n>`` ids match too."""
    release = write_release(tmp_path / "release", "table_bench", ARM_OBJECTS, ARM_BENCHMARK)
    arm = _prepare(tmp_path / "a", release,
                   {"name": "tablebench", "adapter": "arm", "params": {"benchmark": "table_bench"}, **LENIENT})
    upstream = _prepare(tmp_path / "u", _upstream(tmp_path / "raw", QUESTIONS),
                        {"name": "tablebench", "adapter": "tablebench", **LENIENT})
    same_prepared(arm, upstream)


def test_a_table_that_is_not_an_object_names_the_line(tmp_path):
    raw = _upstream(tmp_path / "raw", [QUESTIONS[0], {**QUESTIONS[1], "table": [["a", "b"]]}])
    with pytest.raises(DataError, match=r"TableBench.jsonl:2: 'table' is list, not an object"):
        _prepare(tmp_path, raw, {"name": "tablebench", "adapter": "tablebench", **LENIENT})
