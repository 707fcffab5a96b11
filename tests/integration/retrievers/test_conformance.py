"""Every registered retriever builds, saves, loads and searches a tiny corpus correctly."""

from __future__ import annotations

import pytest

from rbench.retrievers.base import RETRIEVERS, make_retriever
from tests.conftest import CORPUS, tiny_cross_encoder
from tests.integration.retrievers.conftest import index_leaves

STATIC = {"name": "dense", "params": {"model": "static-64d"}}
SMOLLM2 = {"backend": "transformers", "model": "smollm2-135m", "threads": 2}
FAST_PARAMS = {
    "dense": {"model": "static-64d"},
    "dense-hnsw": {"model": "static-64d", "index": "hnsw"},
    "fusion": {"retrievers": [{"name": "bm25s"}, STATIC]},
    "decompose": {"llm": SMOLLM2, "first_stage": STATIC, "max_tokens": 48},
    # a dense first stage returns every object: bm25s finds one candidate here, and a list of one asks nothing
    "llm_rerank": {"llm": SMOLLM2, "first_stage": STATIC, "window": 4, "step": 2, "max_tokens": 24},
    "xrr2": {"llm": SMOLLM2, "expansion_tokens": 32, "rounds": 1, "topk1": 2, "max_tokens": 16},
    "arm": {"llm": SMOLLM2, "dense": STATIC, "max_keywords": 3, "keyword_rephrasing_beams": 2,
            "corpus_ngram_max_len": 3, "max_ngrams": 5, "alignment_retrieval_k": 3, "query_retrieval_k": 3,
            "mip_k_select": 3, "mip_candidates": 6, "max_tokens": 32},
    "react": {"llm": SMOLLM2, "max_iterations": 2, "k_search": 3, "max_tokens": 48, "thought_chars": 60},
}
CASES = sorted(n for n, cls in RETRIEVERS.items() if cls.searchable) + ["dense-hnsw", "decompose-rerank"]
LLM_CASES = {"decompose", "decompose-rerank", "llm_rerank", "multi_query", "xrr2", "react", "arm"}  # a 135M model reorders: no known answers


def _params(case: str, tmp_path):
    if case == "rerank":  # a random tiny cross-encoder: plumbing only, no known answers
        return {"model": tiny_cross_encoder(tmp_path / "ce"), "first_stage": STATIC}
    if case == "decompose-rerank":
        return {**FAST_PARAMS["decompose"], "rerank": {"model": tiny_cross_encoder(tmp_path / "ce")}}
    if case == "multi_query":
        return {"llm": SMOLLM2, "first_stage": {"name": "bm25s"}, "max_tokens": 48, "ce_candidates": 6,
                "ce_keep": 4, "select_max": 3, "cross_encoder": {"model": tiny_cross_encoder(tmp_path / "ce")}}
    return FAST_PARAMS.get(case)


@pytest.mark.parametrize("case", CASES)
def test_retriever_conformance(case, corpus_file, tmp_path):
    name = case.removesuffix("-hnsw").removesuffix("-rerank")
    params = _params(case, tmp_path)
    folders = index_leaves(make_retriever(name, params), corpus_file, tmp_path)

    loaded = make_retriever(name, params)  # a fresh instance: load from disk only
    loaded.open(folders, corpus_file)
    queries = {"volcano": "volcano lava ash rupture", "chess": "chess board game squares players"}
    run = loaded.search(queries, k=3)
    assert set(run) == set(queries)
    if case != "rerank" and case not in LLM_CASES:
        assert run["volcano"][0][0] == "o3" and run["chess"][0][0] == "o5"
    for hits in run.values():
        assert 0 < len(hits) <= 3
        scores = [s for _, s in hits]
        assert scores == sorted(scores, reverse=True)
        assert all(oid in {f"o{i}" for i in range(len(CORPUS))} for oid, _ in hits)
    if case in LLM_CASES:  # the model was really asked, not bypassed by a fallback
        assert loaded.session.accounting.calls > 0, f"{case} made no LLM call"
    assert len(loaded.search({"q": "chess"}, k=100)["q"]) <= len(CORPUS)
    assert loaded.search({}, k=3) == {}


def test_dense_minilm_ranks_paraphrase_first(corpus_file, tmp_path):
    dense = make_retriever("dense", {"model": "sentence-transformers/all-MiniLM-L6-v2"})
    dense.index(corpus_file, tmp_path)
    dense.open([tmp_path], corpus_file)
    run = dense.search({"q": "birds that cannot fly and live near the south pole"}, k=2)
    assert run["q"][0][0] == "o4"


def test_index_params_exclude_search_only_settings():
    assert make_retriever("bm25", {"k1": 1.2}).index_params() == {}
    params = make_retriever("dense", {"model": "minilm", "ef_search": 5}).index_params()
    assert params["model"] == "sentence-transformers/all-MiniLM-L6-v2" and "ef_search" not in params
