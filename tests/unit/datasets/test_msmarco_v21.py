"""MS MARCO v2.1 segmented documents with TREC RAG 2024 topics and qrels, in the published layout."""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pydantic import ValidationError

from rbench.config import DatasetConfig, MetricsConfig
from rbench.core.errors import DataError
from rbench.core.store import Artifact, Store
from rbench.dataset_adapters.msmarco_v21 import MsmarcoParams
from rbench.tasks.download import DOWNLOAD, DownloadConfig
from rbench.tasks.evaluate import EVALUATE
from rbench.tasks.prepare import PREPARE


def _segment(doc: str, n: int, offset: int, title: str, text: str) -> dict:
    return {"docid": f"msmarco_v2.1_doc_{doc}#{n}_{offset}", "url": f"https://example.org/{doc}", "title": title,
            "headings": f"{title}\n", "segment": text, "start_char": offset, "end_char": offset + len(text)}


SHARDS = {
    0: [_segment("00_0", 0, 0, "Volcano", "A volcano vents lava."), _segment("00_0", 1, 21, "Volcano", "Ash escapes."),
        _segment("00_77", 0, 0, "Penguin", "Penguins cannot fly.")],
    1: [_segment("01_5", 0, 0, "Chess", "Chess has 64 squares."), _segment("01_5", 1, 22, "Chess", "Two players.")],
}
TOPICS = "2024-1\twhat escapes a volcano\n2024-2\thow many squares on a chess board\n2024-3\tunjudged\n"
QRELS = ("2024-1 Q0 msmarco_v2.1_doc_00_0#0_0 1\n2024-1 Q0 msmarco_v2.1_doc_00_0#1_21 3\n"
         "2024-1 Q0 msmarco_v2.1_doc_00_77#0_0 0\n2024-2 Q0 msmarco_v2.1_doc_01_5#1_22 2\n")


def write_msmarco(folder: Path, shards: dict = SHARDS) -> Path:
    """Shards, topics and qrels under their published names."""
    corpus = folder / "msmarco_v2.1_doc_segmented"
    corpus.mkdir(parents=True)
    for n, rows in shards.items():
        with gzip.open(corpus / f"msmarco_v2.1_doc_segmented_{n:02d}.json.gz", "wt") as f:
            f.writelines(json.dumps(r) + "\n" for r in rows)
    (folder / "trec_rag_2024").mkdir()
    (folder / "trec_rag_2024" / "topics.rag24.test.txt").write_text(TOPICS)
    (folder / "trec_rag_2024" / "qrels.rag24.test-umbrela-all.txt").write_text(QRELS)
    return folder


def _prepare(tmp_path: Path, params: dict, mirror: Path | None = None) -> Artifact:
    cfg = DatasetConfig.model_validate({"name": "rag24", "adapter": "msmarco_v21", "params": params})
    store = Store(tmp_path / "store")
    return PREPARE.run(store, [DOWNLOAD.run(store, [], DownloadConfig.of(cfg, mirror), mirror=mirror)], cfg)


def test_segments_collapse_on_their_documents_with_the_best_segment_grade(tmp_path):
    prepared = _prepare(tmp_path, {"shards": [0, 1]}, write_msmarco(tmp_path / "mirror"))
    corpus = pq.read_table(prepared.file("corpus.parquet")).to_pylist()
    assert [(o["doc_id"], o["text"], json.loads(o["metadata"])["segment_id"]) for o in corpus][:2] == [
        ("msmarco_v2.1_doc_00_0", "Volcano [SEP] A volcano vents lava.", "msmarco_v2.1_doc_00_0#0_0"),
        ("msmarco_v2.1_doc_00_0", "Volcano [SEP] Ash escapes.", "msmarco_v2.1_doc_00_0#1_21")]
    assert len(corpus) == 5 and prepared.info["documents"] == 3
    assert pq.read_table(prepared.file("queries.parquet")).to_pylist() == [
        {"query_id": "2024-1", "text": "what escapes a volcano", "gold_doc_ids": ["msmarco_v2.1_doc_00_0"],
         "gold_grades": [3], "nonrelevant_doc_ids": ["msmarco_v2.1_doc_00_77"], "gold_found": 1},
        {"query_id": "2024-2", "text": "how many squares on a chess board", "gold_doc_ids": ["msmarco_v2.1_doc_01_5"],
         "gold_grades": [2], "nonrelevant_doc_ids": [], "gold_found": 1}]

    hits = [("2024-1", "msmarco_v2.1_doc_00_77"), ("2024-1", "msmarco_v2.1_doc_00_0"),
            ("2024-1", "msmarco_v2.1_doc_00_0"), ("2024-2", "msmarco_v2.1_doc_01_5")]
    rows = [{"query_id": q, "object_id": f"o{i}", "doc_id": d, "rank": i + 1, "score": 9.0 - i}
            for i, (q, d) in enumerate(hits)]
    (tmp_path / "run").mkdir()
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "run" / "run.parquet")
    evaluated = EVALUATE.run(Store(tmp_path / "store"), [prepared, Artifact("retrieve", "run", tmp_path / "run")],
                             MetricsConfig(k=[10]))
    ndcg = {r["query_id"]: r["value"] for r in pq.read_table(evaluated.file("per_query.parquet")).to_pylist()
            if r["metric"] == "ndcg"}
    assert ndcg == {"2024-1": pytest.approx(1 / math.log2(3)), "2024-2": 1.0}  # two segments count once
    assert "2024-1 0 msmarco_v2.1_doc_00_77 0\n" in evaluated.file("qrels.trec").read_text()  # grade 0 kept


def test_local_files_are_read_in_place_and_keyed_by_fingerprint(tmp_path):
    folder = write_msmarco(tmp_path / "data")
    params = {"shards": [1], "corpus": str(folder / "msmarco_v2.1_doc_segmented"),
              "topics": str(folder / "trec_rag_2024" / "topics.rag24.test.txt"),
              "qrels": str(folder / "trec_rag_2024" / "qrels.rag24.test-umbrela-all.txt")}
    prepared = _prepare(tmp_path, params)
    assert pq.read_table(prepared.file("queries.parquet")).column("query_id").to_pylist() == ["2024-1", "2024-2"]
    assert prepared.info["objects"] == 2 and prepared.info["queries_without_gold_in_corpus"] == 1  # 2024-1's is in 00
    (downloaded,) = (tmp_path / "store" / "download").glob("*/msmarco_v2.1_doc_segmented")
    shard = "msmarco_v2.1_doc_segmented_01.json.gz"  # the release's shard is linked, the user's topics copied
    assert (downloaded / shard).stat().st_ino == (folder / "msmarco_v2.1_doc_segmented" / shard).stat().st_ino
    topics = next((tmp_path / "store" / "download").glob("*/trec_rag_2024/topics.rag24.test.txt"))
    assert topics.stat().st_ino != (folder / "trec_rag_2024" / "topics.rag24.test.txt").stat().st_ino


@pytest.mark.parametrize("bad, message", [
    ({"docid": "msmarco_v2.1_doc_00_0"}, r"_00.json.gz:1: docid 'msmarco_v2.1_doc_00_0' is not a segment id"),
    ({"segment": None}, r"_00.json.gz:1 field 'segment' is null, not text"),
])
def test_a_bad_segment_names_the_shard_and_line(tmp_path, bad, message):
    shards = {0: [{**SHARDS[0][0], **bad}], 1: SHARDS[1]}
    with pytest.raises(DataError, match=message):
        _prepare(tmp_path, {"shards": [0, 1]}, write_msmarco(tmp_path / "mirror", shards))


def test_shard_numbers_are_checked():
    with pytest.raises(ValidationError, match="distinct numbers from 0 to 58"):
        MsmarcoParams(shards=[0, 59])


def test_topics_without_a_judgment_are_left_out_with_a_warning(tmp_path, caplog):
    with caplog.at_level("WARNING", logger="rbench"):
        prepared = _prepare(tmp_path, {"shards": [0, 1]}, write_msmarco(tmp_path / "mirror"))
    assert prepared.info["queries"] == 2
    warned = [r.getMessage() for r in caplog.records if "no relevant segment" in r.getMessage()]
    assert warned and "1 topics of" in warned[0] and "'2024-3'" in warned[0]


def test_a_repeated_segment_is_named_as_a_segment(tmp_path):
    shards = {0: [*SHARDS[0], SHARDS[0][1]], 1: SHARDS[1]}
    with pytest.raises(DataError, match=r"segment #1 of document 'msmarco_v2.1_doc_00_0' appears twice: segment ids "
                                        r"are unique in the release"):
        _prepare(tmp_path, {"shards": [0, 1]}, write_msmarco(tmp_path / "mirror", shards))
