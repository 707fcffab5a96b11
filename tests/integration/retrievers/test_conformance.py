"""Every registered retriever builds, saves, loads and searches a tiny corpus correctly."""

from __future__ import annotations

import json

import pytest

from rbench.retrievers.base import RETRIEVERS, make_retriever
from tests.conftest import CORPUS, TORCH_THREADS, tiny_cross_encoder
from tests.integration.retrievers.conftest import index_leaves

SMOLLM2 = {"backend": "transformers", "model": "smollm2-135m", "threads": TORCH_THREADS}
CASES = {name if not variant else f"{name}-{variant}": (name, params)
         for name, cls in RETRIEVERS.items() if cls.searchable for variant, params in cls.conformance.items()}


def _params(params, tmp_path):
    """A retriever's conformance params with the placeholders filled in (see ``Retriever.conformance``)."""
    if params == "$SMOLLM2":
        return SMOLLM2
    if params == "$TINY_CROSS_ENCODER":
        folder = tmp_path / "ce"
        return str(folder) if folder.exists() else tiny_cross_encoder(folder)
    if isinstance(params, dict):
        return {k: _params(v, tmp_path) for k, v in params.items()}
    if isinstance(params, list):
        return [_params(v, tmp_path) for v in params]
    return params


def test_every_retriever_declares_its_conformance_cases():
    assert {"bm25", "bm25s", "dense", "dense-hnsw", "decompose", "decompose-rerank", "multi_query", "arm"} <= set(CASES)


@pytest.mark.parametrize("case", sorted(CASES))
def test_retriever_conformance(case, corpus_file, tmp_path):
    name, declared = CASES[case]
    uses_llm = "$SMOLLM2" in json.dumps(declared)
    known_answers = "$" not in json.dumps(declared)  # a 135M model or a random cross-encoder reorders
    params = _params(declared, tmp_path)
    folders = index_leaves(make_retriever(name, params), corpus_file, tmp_path)

    loaded = make_retriever(name, params)  # a fresh instance: load from disk only
    loaded.open(folders, corpus_file)
    queries = {"volcano": "volcano lava ash rupture", "chess": "chess board game squares players"}
    run = loaded.search(queries, k=3)
    assert set(run) == set(queries)
    if known_answers:
        assert run["volcano"][0][0] == "o3" and run["chess"][0][0] == "o5"
    for hits in run.values():
        assert 0 < len(hits) <= 3
        scores = [s for _, s in hits]
        assert scores == sorted(scores, reverse=True)
        assert all(oid in {f"o{i}" for i in range(len(CORPUS))} for oid, _ in hits)
    if uses_llm:  # the model was really asked, not bypassed by a fallback
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
