"""Every registered retriever builds, saves, loads and searches a tiny corpus correctly."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from retrievers.registry import RETRIEVERS, make_retriever
from tests.conftest import CORPUS

FAST_PARAMS = {"dense": {"model": "static-64d"}, "dense-hnsw": {"model": "static-64d", "index": "hnsw"}}
CASES = sorted(RETRIEVERS) + ["dense-hnsw"]


@pytest.fixture(scope="module")
def corpus_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("corpus") / "corpus.parquet"
    pq.write_table(pa.table({
        "object_id": [f"o{i}" for i in range(len(CORPUS))],
        "text": [c["object"] for c in CORPUS],
    }), path)
    return path


@pytest.mark.parametrize("case", CASES)
def test_retriever_conformance(case, corpus_file, tmp_path):
    name = case.split("-")[0]
    built = make_retriever(name, FAST_PARAMS.get(case))
    info = built.index(corpus_file, tmp_path)
    assert info["indexed"] == len(CORPUS)

    loaded = make_retriever(name, FAST_PARAMS.get(case))  # a fresh instance: load from disk only
    loaded.load(tmp_path)
    queries = {"volcano": "volcano lava ash rupture", "chess": "chess board game squares players"}
    run = loaded.search(queries, k=3)
    assert set(run) == set(queries)
    assert run["volcano"][0][0] == "o3" and run["chess"][0][0] == "o5"
    for hits in run.values():
        assert 0 < len(hits) <= 3
        scores = [s for _, s in hits]
        assert scores == sorted(scores, reverse=True)
        assert all(oid in {f"o{i}" for i in range(len(CORPUS))} for oid, _ in hits)
    assert len(loaded.search({"q": "chess"}, k=100)["q"]) <= len(CORPUS)
    assert loaded.search({}, k=3) == {}


def test_dense_minilm_ranks_paraphrase_first(corpus_file, tmp_path):
    dense = make_retriever("dense", {"model": "sentence-transformers/all-MiniLM-L6-v2"})
    dense.index(corpus_file, tmp_path)
    dense.load(tmp_path)
    run = dense.search({"q": "birds that cannot fly and live near the south pole"}, k=2)
    assert run["q"][0][0] == "o4"


def test_index_params_exclude_search_only_settings():
    assert make_retriever("bm25", {"k1": 1.2}).index_params() == {}
    params = make_retriever("dense", {"model": "minilm", "ef_search": 5}).index_params()
    assert params["model"] == "sentence-transformers/all-MiniLM-L6-v2" and "ef_search" not in params
