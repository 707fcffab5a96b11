"""ARM end to end on the tiny corpus with SmolLM2: the ablation switches each change what runs,
and every step's time, the MIP's status and the LLM's parse counts are reported."""

from __future__ import annotations

import pytest

from rbench.retrievers.base import make_retriever
from tests.conftest import CORPUS, tiny_cross_encoder
from tests.integration.retrievers.conftest import index_leaves

pytestmark = pytest.mark.slow
STATIC = {"name": "dense", "params": {"model": "static-64d"}}
BASE = {"llm": {"backend": "transformers", "model": "smollm2-135m"}, "dense": STATIC, "max_keywords": 3,
        "keyword_rephrasing_beams": 2, "corpus_ngram_max_len": 3, "max_ngrams": 5, "alignment_retrieval_k": 3,
        "query_retrieval_k": 2, "mip_k_select": 3, "mip_candidates": 6, "max_tokens": 32}
QUERIES = {"volcano": "Which mountain erupted with lava and ash?", "chess": "How many squares has a chess board?"}


def _run(params, corpus_file, tmp_path):
    from rbench.llm.client import LLMSession

    arm, session = make_retriever("arm", params), LLMSession()
    arm.open(index_leaves(make_retriever("arm", params), corpus_file, tmp_path), corpus_file)
    arm.use_llm(session, [])
    run = arm.search(QUERIES, k=len(CORPUS))
    return arm, run, session.accounting.summary()


def test_the_default_pipeline_reports_each_step(corpus_file, tmp_path):
    arm, run, llm = _run(BASE, corpus_file, tmp_path)
    assert [leaf.name for leaf in arm.leaves()] == ["bm25s", "dense", "ngrams"]
    stats = arm.stats()
    assert stats["arm_mip_optimal"] == 2 and stats["arm_mip_gap_max"] == 0
    assert all(stats[f"arm_seconds_{s}"] > 0 for s in ("keywords", "alignment", "retrieval", "selection", "final"))
    assert llm["llm_calls"] >= 2 * 3  # keywords, one alignment at least, and the final selection per question
    steps = {s: llm[f"llm_arm_{s}_calls"] for s in ("keywords", "alignment", "final")}
    assert all(steps.values()) and sum(steps.values()) == llm["llm_calls"]  # every call counted under its step
    assert llm["llm_arm_keywords_prompt_tokens"] > 0 and llm["llm_arm_final_completion_tokens"] > 0
    for q, hits in run.items():
        assert len({oid for oid, _ in hits}) == len(hits) and hits


def test_ablation_switches_change_what_runs(corpus_file, tmp_path):
    params = {**BASE, "ngram_alignment": False, "base": STATIC, "expansion_steps": 0, "selection": "rerank",
              "rerank": {"model": tiny_cross_encoder(tmp_path / "ce")}, "final_selection": False}
    (tmp_path / "idx").mkdir()
    arm, run, llm = _run(params, corpus_file, tmp_path / "idx")
    assert [leaf.name for leaf in arm.leaves()] == ["dense", "dense"]  # no n-gram index without alignment
    stats = arm.stats()
    assert stats["pairs_scored"] > 0 and not any(k.startswith("arm_mip_") for k in stats)
    assert stats["arm_seconds_expansion"] < 0.01 and stats["arm_seconds_final"] < 0.01
    assert llm["llm_calls"] == llm["llm_arm_keywords_calls"] == 2  # the keywords alone: no alignment, no final
    assert not any(k.startswith(("llm_arm_alignment", "llm_arm_final")) for k in llm)
    assert all(1 <= len(hits) <= len(CORPUS) for hits in run.values())
