"""Metric values against hand-computed cases, and parity with pytrec_eval and ranx."""

from __future__ import annotations

import math
import random

import pytest

from evaluation.evaluate import evaluate_queries, macro_average
from evaluation.metrics import f1, mrr, ndcg, perfect_recall, precision, recall
from evaluation.runs import dedup_documents, to_qrels, to_ranx_run, to_trec

RANKED = ["d3", "d1", "d7", "d2"]  # gold d1, d2, d9: hits at ranks 2 and 4
GOLD = {"d1", "d2", "d9"}


def test_precision_hand_computed():
    assert precision(RANKED, GOLD, 1) == 0.0
    assert precision(RANKED, GOLD, 2) == 0.5
    assert precision(RANKED, GOLD, 4) == 0.5
    assert precision(RANKED, GOLD, 10) == 0.2
    assert precision(RANKED, GOLD, 10, denominator="retrieved") == 0.5
    assert precision([], GOLD, 5, denominator="retrieved") == 0.0


def test_recall_hand_computed():
    assert recall(RANKED, GOLD, 2) == pytest.approx(1 / 3)
    assert recall(RANKED, GOLD, 4) == pytest.approx(2 / 3)
    assert recall(RANKED, GOLD, 2, denominator="capped") == 0.5
    assert recall(RANKED, GOLD, 10, denominator="capped") == pytest.approx(2 / 3)
    with pytest.raises(ValueError):
        recall(RANKED, set(), 3)


def test_f1_perfect_recall_mrr_hand_computed():
    assert f1(RANKED, GOLD, 4) == pytest.approx(2 * 0.5 * (2 / 3) / (0.5 + 2 / 3))
    assert f1(RANKED, GOLD, 1) == 0.0
    assert perfect_recall(RANKED, GOLD, 10) == 0.0
    assert perfect_recall(["d9", "d2", "x", "d1"], GOLD, 4) == 1.0
    assert perfect_recall(["d9", "d2", "x", "d1"], GOLD, 3) == 0.0
    assert mrr(RANKED, GOLD, 1) == 0.0
    assert mrr(RANKED, GOLD, 3) == 0.5


def test_ndcg_hand_computed():
    dcg = 1 / math.log2(3) + 1 / math.log2(5)
    ideal = 1 + 1 / math.log2(3) + 1 / math.log2(4)
    assert ndcg(RANKED, GOLD, 4) == pytest.approx(dcg / ideal)
    ideal2 = 1 + 1 / math.log2(3)
    assert ndcg(RANKED, GOLD, 2) == pytest.approx((1 / math.log2(3)) / ideal2)
    assert ndcg(["d1"], {"d1"}, 10) == 1.0


def test_dedup_keeps_first_occurrence_in_rank_order():
    rows = [
        ("q", "B", 2, 0.8), ("q", "A", 1, 0.9), ("q", "A", 3, 0.7), ("q", "C", 4, 0.6), ("q", "B", 5, 0.5),
    ]
    assert dedup_documents(rows) == {"q": [("A", 0.9), ("B", 0.8), ("C", 0.6)]}


def test_evaluate_scores_missing_queries_as_zero_and_skips_empty_gold():
    ranking = {"q1": [("A", 1.0), ("B", 0.5)]}
    rows = evaluate_queries(ranking, {"q1": ["B"], "q2": ["A"], "q3": []}, [1, 2])
    by = {(r["query_id"], r["metric"], r["k"]): r["value"] for r in rows}
    assert by[("q1", "recall", 1)] == 0.0 and by[("q1", "recall", 2)] == 1.0
    assert by[("q1", "mrr", 2)] == 0.5
    assert by[("q2", "recall", 2)] == 0.0
    assert not any(r["query_id"] == "q3" for r in rows)
    agg = {(a["metric"], a["k"]): a for a in macro_average(rows)}
    assert agg[("recall", 2)]["value"] == 0.5 and agg[("recall", 2)]["queries"] == 2


def test_trec_export_percent_encodes_spaces():
    text = to_trec({"q 1": [("Andy Karl :: awards", 0.5)]}, "bm25")
    assert text == "q%201 Q0 Andy%20Karl%20%3A%3A%20awards 1 0.500000 bm25\n"


def _random_case(seed: int):
    rng = random.Random(seed)
    docs = [f"doc{i}" for i in range(30)]
    gold, ranking = {}, {}
    for q in range(40):
        qid = f"q{q}"
        gold[qid] = rng.sample(docs, rng.randint(1, 4))
        ranked = rng.sample(docs, rng.randint(0, 15))
        ranking[qid] = [(d, 1.0) for d in ranked]  # tied scores: order must come from rank
    return gold, ranking


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_parity_with_pytrec_eval(seed):
    pytrec_eval = pytest.importorskip("pytrec_eval")
    gold, ranking = _random_case(seed)
    ours = {(r["query_id"], r["metric"], r["k"]): r["value"] for r in evaluate_queries(ranking, gold, [1, 3, 5, 10])}
    measures = {"P.1,3,5,10", "recall.1,3,5,10", "ndcg_cut.1,3,5,10"}
    theirs = pytrec_eval.RelevanceEvaluator(to_qrels(gold), measures).evaluate(to_ranx_run(ranking))
    for qid in gold:
        for k in (1, 3, 5, 10):
            got = theirs.get(qid, {})
            assert ours[(qid, "precision", k)] == pytest.approx(got.get(f"P_{k}", 0.0))
            assert ours[(qid, "recall", k)] == pytest.approx(got.get(f"recall_{k}", 0.0))
            assert ours[(qid, "ndcg", k)] == pytest.approx(got.get(f"ndcg_cut_{k}", 0.0))


@pytest.mark.parametrize("seed", [3, 4])
def test_parity_with_ranx(seed):
    ranx = pytest.importorskip("ranx")
    gold, ranking = _random_case(seed)
    ranking = {q: docs for q, docs in ranking.items() if docs}  # ranx needs a non-empty run per query
    gold = {q: gold[q] for q in ranking}
    rows = evaluate_queries(ranking, gold, [1, 3, 5, 10])
    agg = {(a["metric"], a["k"]): a["value"] for a in macro_average(rows)}
    names = {"precision": "precision", "recall": "recall", "ndcg": "ndcg", "mrr": "mrr", "f1": "f1"}
    metrics = [f"{theirs}@{k}" for theirs in names.values() for k in (1, 3, 5, 10)]
    scores = ranx.evaluate(ranx.Qrels(to_qrels(gold)), ranx.Run(to_ranx_run(ranking)), metrics)
    for ours_name, theirs in names.items():
        for k in (1, 3, 5, 10):
            assert agg[(ours_name, k)] == pytest.approx(scores[f"{theirs}@{k}"]), (ours_name, k)
