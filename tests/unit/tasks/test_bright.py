"""BRIGHT in its published layout: documents, long documents, examples with excluded ids."""

from __future__ import annotations

import math
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from rbench.config import DatasetConfig, MetricsConfig
from rbench.core.errors import DataError
from rbench.core.store import Artifact, Store
from rbench.tasks.datasets.base import get_adapter
from rbench.tasks.download import DOWNLOAD, DownloadConfig
from rbench.tasks.evaluate import EVALUATE
from rbench.tasks.prepare import PREPARE

DOCUMENTS = {"biology/page_a/0.txt": "Mitochondria make ATP.", "biology/page_a/1.txt": "They have their own DNA.",
             "biology/page_b/0.txt": "Chloroplasts capture light.", "biology/page_c/0.txt": "Ribosomes build proteins.",
             "biology/q2_post/0.txt": "The question's own post, excluded."}
LONG = {"biology/page_a.txt": "Mitochondria make ATP. They have their own DNA.",
        "biology/page_b.txt": "Chloroplasts capture light."}
EXAMPLES = [
    {"query": "Where is ATP made?", "reasoning": "r", "id": "0", "excluded_ids": ["N/A"],
     "gold_ids_long": ["biology/page_a.txt"], "gold_ids": ["biology/page_a/0.txt", "biology/page_a/1.txt"],
     "gold_answer": "a"},
    {"query": "What captures light?", "reasoning": "r", "id": "1", "excluded_ids": ["biology/q2_post/0.txt"],
     "gold_ids_long": ["biology/page_b.txt"], "gold_ids": ["biology/page_b/0.txt"], "gold_answer": "b"},
]


def write_bright(folder: Path, examples: list[dict] = EXAMPLES) -> Path:
    """The three Parquet files of task biology, with the published columns."""
    for kind, docs in (("documents", DOCUMENTS), ("long_documents", LONG)):
        (folder / kind).mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.table({"id": list(docs), "content": list(docs.values())}),
                       folder / kind / "biology-00000-of-00001.parquet")
    (folder / "examples").mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(examples), folder / "examples" / "biology-00000-of-00001.parquet")
    return folder


def _prepare(tmp_path: Path, params: dict, mirror: Path | None = None) -> Artifact:
    cfg = DatasetConfig.model_validate({"name": "bright", "adapter": "bright", "params": params})
    store = Store(tmp_path / "store")
    return PREPARE.run(store, [DOWNLOAD.run(store, [], DownloadConfig.of(cfg, mirror), mirror=mirror)], cfg)


def test_documents_and_examples_are_read_with_their_excluded_ids(tmp_path):
    prepared = _prepare(tmp_path, {"task": "biology", "path": str(write_bright(tmp_path / "BRIGHT"))})
    corpus = pq.read_table(prepared.file("corpus.parquet")).to_pylist()
    assert [(o["doc_id"], o["text"], o["modality"]) for o in corpus] == [
        (d, t, "text") for d, t in DOCUMENTS.items()]
    assert pq.read_table(prepared.file("queries.parquet")).to_pylist() == [
        {"query_id": "0", "text": "Where is ATP made?",
         "gold_doc_ids": ["biology/page_a/0.txt", "biology/page_a/1.txt"], "excluded_doc_ids": []},
        {"query_id": "1", "text": "What captures light?", "gold_doc_ids": ["biology/page_b/0.txt"],
         "excluded_doc_ids": ["biology/q2_post/0.txt"]}]


def test_long_documents_come_from_the_mirror_with_their_own_gold(tmp_path):
    mirror = tmp_path / "mirror"
    write_bright(mirror / "bright")
    prepared = _prepare(tmp_path, {"task": "biology", "long_documents": True}, mirror)
    assert {o["doc_id"] for o in pq.read_table(prepared.file("corpus.parquet")).to_pylist()} == set(LONG)
    gold = pq.read_table(prepared.file("queries.parquet")).column("gold_doc_ids").to_pylist()
    assert gold == [["biology/page_a.txt"], ["biology/page_b.txt"]]
    specs = get_adapter("bright").files(get_adapter("bright").Params(task="economics"))
    assert [(s.name, s.hf_repo, s.hf_path) for s in specs] == [
        ("bright/documents/economics-00000-of-00001.parquet", "xlangai/BRIGHT",
         "documents/economics-00000-of-00001.parquet"),
        ("bright/examples/economics-00000-of-00001.parquet", "xlangai/BRIGHT",
         "examples/economics-00000-of-00001.parquet")]


def test_ndcg_at_10_drops_excluded_ids_before_scoring(tmp_path):
    prepared = _prepare(tmp_path, {"task": "biology", "path": str(write_bright(tmp_path / "BRIGHT"))})
    ranked = {"0": ["biology/page_c/0.txt", "biology/page_a/1.txt", "biology/page_b/0.txt", "biology/page_a/0.txt"],
              "1": ["biology/q2_post/0.txt", "biology/page_c/0.txt", "biology/page_b/0.txt"]}
    rows = [{"query_id": q, "object_id": f"{q}-{i}", "doc_id": d, "rank": i + 1, "score": 10.0 - i}
            for q, docs in ranked.items() for i, d in enumerate(docs)]
    (tmp_path / "run").mkdir()
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "run" / "run.parquet")
    evaluated = EVALUATE.run(Store(tmp_path / "store"), [prepared, Artifact("retrieve", "run", tmp_path / "run")],
                             MetricsConfig(k=[10]))
    per_query = {(r["query_id"], r["metric"]): r["value"]
                 for r in pq.read_table(evaluated.file("per_query.parquet")).to_pylist()}
    # query 0: gold at ranks 2 and 4 (nothing excluded); query 1: the excluded post leaves, gold moves to rank 2
    ideal_two = 1 + 1 / math.log2(3)
    assert per_query[("0", "ndcg")] == pytest.approx((1 / math.log2(3) + 1 / math.log2(5)) / ideal_two)
    assert per_query[("1", "ndcg")] == pytest.approx(1 / math.log2(3))  # not 1 / log2(4), as with the post kept
    assert evaluated.info["excluded_documents_dropped"] == 1
    assert "q2_post" not in evaluated.file("run.trec").read_text()


@pytest.mark.parametrize("change, message", [
    ({"excluded_ids": ["biology/page_b/0.txt"]}, r"examples/biology-00000-of-00001.parquet row 2: "
                                                 r"\['biology/page_b/0.txt'\] are both gold"),
    ({"gold_ids": None}, "row 2 field 'gold_ids' must be a list of document ids, got None"),
])
def test_bad_examples_name_the_file_and_row(tmp_path, change, message):
    examples = [EXAMPLES[0], {**EXAMPLES[1], **change}]
    with pytest.raises(DataError, match=message):
        _prepare(tmp_path, {"task": "biology", "path": str(write_bright(tmp_path / "BRIGHT", examples))})


def test_a_folder_in_another_layout_is_named(tmp_path):
    (tmp_path / "flat").mkdir()
    with pytest.raises(DataError, match="has no documents/biology-00000-of-00001.parquet.*documents/, long_documents/"):
        _prepare(tmp_path, {"task": "biology", "path": str(tmp_path / "flat")})
    folder = write_bright(tmp_path / "BRIGHT")
    pq.write_table(pa.table({"doc": ["x"], "text": ["y"]}), folder / "documents" / "biology-00000-of-00001.parquet")
    with pytest.raises(DataError, match=r"lacks BRIGHT column\(s\) \['id', 'content'\]"):
        _prepare(tmp_path, {"task": "biology", "path": str(folder)})
