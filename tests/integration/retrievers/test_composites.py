"""Fusion arithmetic by hand, reranking plumbing with a tiny local cross-encoder, the dense
score threshold, and the bad-input errors of composite retrievers."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from rbench.evaluation.runs_fusion import fuse_ranking, normalize
from rbench.retrievers.base import make_retriever
from tests.conftest import CORPUS, tiny_cross_encoder
from tests.integration.retrievers.conftest import index_leaves


def _open(retriever, corpus_file, tmp_path):
    retriever.open(index_leaves(retriever, corpus_file, tmp_path), corpus_file)
    return retriever


def test_rrf_by_hand():
    fused = fuse_ranking([[("a", 9.0), ("b", 5.0)], [("b", 0.9), ("c", 0.1)]], "rrf", k=60)
    assert [i for i, _ in fused] == ["b", "a", "c"]
    assert fused[0][1] == pytest.approx(1 / 62 + 1 / 61)
    assert fused[1][1] == pytest.approx(1 / 61)
    assert fuse_ranking([[("a", 1.0)], [("b", 1.0)]], "rrf", k=0, weights=[1, 2])[0] == ("b", 2.0)


def test_weighted_sum_by_hand_with_ranx_conventions():
    """A run's all-equal scores min-max to 0 and a run that missed an object adds 0 (ranx's); on the
    main of 6e8e733 the fusion retriever gave 1.0 and the run's floor, and ``rbench fuse`` 0 and 0."""
    assert normalize([("a", 10.0), ("b", 5.0), ("c", 0.0)]) == {"a": 1.0, "b": 0.5, "c": 0.0}
    assert normalize([("a", 2.0), ("b", 2.0)]) == {"a": 0.0, "b": 0.0}
    z = normalize([("a", 3.0), ("b", 1.0)], "zmuv")
    assert z == {"a": pytest.approx(1.0), "b": pytest.approx(-1.0)}
    fused = dict(fuse_ranking([[("a", 10.0), ("b", 0.0)], [("b", 4.0), ("c", 2.0)]], "wsum", weights=[0.5, 1.0]))
    assert fused == {"a": pytest.approx(0.5 * 1), "b": pytest.approx(0.0 + 1.0), "c": pytest.approx(0.0)}
    zscored = dict(fuse_ranking([[("a", 3.0), ("b", 1.0)], [("c", 5.0), ("b", 1.0)]], "wsum", norm="zmuv"))
    assert zscored == {"a": pytest.approx(1.0), "b": pytest.approx(-2.0), "c": pytest.approx(1.0)}


@pytest.mark.parametrize("method, norm", [("rrf", "min-max"), ("wsum", "min-max"), ("wsum", "zmuv"),
                                          ("combsum", "min-max"), ("combmnz", "min-max")])
def test_the_one_fusion_equals_ranx_fuse(method, norm):
    import random

    from ranx import Run, fuse

    rng = random.Random(7)
    runs = [{f"q{q}": {f"d{d}": rng.random() for d in rng.sample(range(30), 12)} for q in range(5)} for _ in range(3)]
    weights = [0.5, 1.0, 2.0] if method == "wsum" else None
    ranx_method = {"combsum": "sum", "combmnz": "mnz"}.get(method, method)
    theirs = fuse([Run(r) for r in runs], norm=norm, method=ranx_method,
                  params={"weights": weights} if weights else {}).to_dict()
    for q in theirs:
        rankings = [sorted(r[q].items(), key=lambda x: -x[1]) for r in runs]
        ours = dict(fuse_ranking(rankings, method, weights=weights, norm=norm))
        assert ours == pytest.approx(theirs[q], abs=1e-9)


def test_fusion_of_bm25s_and_dense(corpus_file, tmp_path):
    fusion = make_retriever("fusion", {"retrievers": [
        {"name": "bm25s"}, {"name": "dense", "params": {"model": "static-64d"}}]})
    run = _open(fusion, corpus_file, tmp_path).search({"q": "volcano lava ash"}, k=3)
    assert run["q"][0][0] == "o3" and len(run["q"]) == 3


def test_fusion_collapses_objects_to_documents(corpus_file, tmp_path):
    fusion = make_retriever("fusion", {"collapse_documents": True, "method": "weighted", "retrievers": [
        {"name": "bm25s"}, {"name": "dense", "params": {"model": "static-64d"}}]})
    hits = _open(fusion, corpus_file, tmp_path).search({"q": "Andy Karl award"}, k=6)["q"]
    docs = [CORPUS[int(oid[1:])]["page_title"] for oid, _ in hits]
    assert docs[0] == "Andy Karl" and docs.count("Andy Karl") == 1


def test_rerank_rescores_first_stage_candidates(corpus_file, tmp_path):
    model = tiny_cross_encoder(tmp_path / "ce")
    rerank = make_retriever("rerank", {"model": model, "k_multiplier": 2,
                                       "first_stage": {"name": "dense", "params": {"model": "static-64d"}}})
    _open(rerank, corpus_file, tmp_path)
    first = rerank.components()[0].search({"q": "chess board game squares players"}, k=4)["q"]
    hits = rerank.search({"q": "chess board game squares players"}, k=2)["q"]
    assert len(hits) == 2 and {oid for oid, _ in hits} <= {oid for oid, _ in first}
    expected = rerank._scorer._encoder.predict([("chess board game squares players", CORPUS[int(o[1:])]["object"])
                                        for o, _ in first], show_progress_bar=False)
    best = sorted(zip([o for o, _ in first], expected), key=lambda x: -x[1])[:2]
    assert [o for o, _ in hits] == [o for o, _ in best]
    assert rerank.stats()["pairs_scored"] == 4


def test_dense_threshold_drops_low_similarity(corpus_file, tmp_path):
    dense = _open(make_retriever("dense", {"model": "static-64d", "min_score": 0.3}), corpus_file, tmp_path)
    hits = dense.search({"q": "volcano lava"}, k=6)["q"]
    assert 0 < len(hits) < 6 and all(score >= 0.3 for _, score in hits)


@pytest.mark.parametrize("name, params, message", [
    ("fusion", {"retrievers": []}, "fusion needs two or more retrievers, got 0"),
    ("fusion", {"retrievers": [{"name": "bm25"}, {"name": "bm52"}]}, "unknown retriever 'bm52'"),
    ("fusion", {"retrievers": [{"name": "bm25"}, {"name": "dense"}], "weights": [1]}, "weights has 1 values"),
    ("dense", {"min_score": 1.5}, "less than or equal to 1"),
    ("dense", {"min_score": -0.1}, "greater than or equal to 0"),
    ("rerank", {"model": "/no/such/reranker"}, "'/no/such/reranker' is neither an existing folder"),
])
def test_bad_params_are_named(name, params, message):
    with pytest.raises((ValidationError, ValueError), match=message):
        make_retriever(name, params)
