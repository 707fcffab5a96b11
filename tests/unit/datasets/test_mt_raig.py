"""MT-RAIG Bench from its upstream files, as the ARM reproduction's serialize_tables.py and
create_benchmark_all.py turn them into the release's corpus and benchmark (issue 69, item 3). ~1 s."""

from __future__ import annotations

import json
from pathlib import Path

from tests.unit.datasets.test_adapters import _prepare, _table, same_prepared, write_release

TABLES = [
    {"id": "aa11", "title": "farm - city", "header": ["City_ID", "Official_Name"],
     "cell": [["1", "Grand Falls"], ["2"], ["3", "Plaster Rock"]]},
    {"id": "bb22", "title": "Singapore Air Force | IPPT", "header": ["Grade", "Chin-ups"],
     "cell": [["Gold", 10], ["Silver", None]]},
    {"id": "cc33", "title": "no header", "header": [], "cell": [["x"]]},
    {"id": "dd44", "title": "", "header": ["a"], "cell": [["1"]]},
    {"id": "ee55", "title": "empty rows", "header": ["a", "b"], "cell": [["only one"]]},
]
QUESTIONS = [
    {"gold_table_id_set": ["bb22", "aa11", "bb22"], "question": "How do grades compare?", "insight": "...",
     "type": "Comparison & Relationship"},
    {"gold_table_id_set": ["cc33", "dd44", "ee55", "zz99"], "question": "Which tables are lost?", "insight": "...",
     "type": "Trend & Pattern"},
]
# What ARM's scripts/mt_raig/serialize_tables.py and create_benchmark_all.py (apostolhskouk/ARM at 5a6cb92,
# run unchanged, the first's output moved to serialized_data/mt_raig.jsonl, 2026-11-29) wrote for these.
ARM_OBJECTS = [
    {"page_title": "farm - city", "source": "table_aa11",
     "object": "farm - city [SEP] [H] City_ID: 1 , [H] Official_Name: Grand Falls"},
    {"page_title": "farm - city", "source": "table_aa11",
     "object": "farm - city [SEP] [H] City_ID: 3 , [H] Official_Name: Plaster Rock"},
    {"page_title": "Singapore Air Force | IPPT", "source": "table_bb22",
     "object": "Singapore Air Force | IPPT [SEP] [H] Grade: Gold , [H] Chin-ups: 10"},
    {"page_title": "Singapore Air Force | IPPT", "source": "table_bb22",
     "object": "Singapore Air Force | IPPT [SEP] [H] Grade: Silver , [H] Chin-ups: None"},
    {"page_title": "", "source": "table_dd44", "object": " [SEP] [H] a: 1"},
]
ARM_BENCHMARK = [
    {"query": "How do grades compare?",
     "document_ids": ["Singapore Air Force | IPPT_table_bb22", "farm - city_table_aa11"]},
    {"query": "Which tables are lost?", "document_ids": []},  # headerless, untitled, rowless and unknown tables
]


def _upstream(raw: Path) -> Path:
    (raw / "mt_raig").mkdir(parents=True)
    (raw / "mt_raig" / "table_corpus.json").write_text(json.dumps(TABLES))
    (raw / "mt_raig" / "benchmark.json").write_text(json.dumps(QUESTIONS))
    return raw


def test_mt_raig_from_the_upstream_files_writes_what_arms_scripts_write(tmp_path):
    prepared = _prepare(tmp_path, _upstream(tmp_path / "raw"), {"name": "mt-raig", "adapter": "mt_raig"})
    corpus = _table(prepared.file("corpus.parquet"))
    assert [{"page_title": c["page_title"], "source": c["source"], "object": c["text"]} for c in corpus] == ARM_OBJECTS
    queries = _table(prepared.file("queries.parquet"))
    assert [{"query": q["text"], "document_ids": q["gold_doc_ids"]} for q in queries] == ARM_BENCHMARK
    release = write_release(tmp_path / "release", "mt_raig", ARM_OBJECTS, ARM_BENCHMARK)
    same_prepared(_prepare(tmp_path / "a", release,
                           {"name": "mt-raig", "adapter": "arm", "params": {"benchmark": "mt_raig"}}), prepared)
