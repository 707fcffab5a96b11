"""Metric values against hand-computed cases, and parity with pytrec_eval and ranx."""

from __future__ import annotations

import math
import random

import pytest

from rbench.evaluation.metrics import f1, mrr, ndcg, perfect_recall, precision, recall
from rbench.evaluation.metrics_per_query import evaluate_queries, macro_average
from rbench.evaluation.runs import dedup_documents, file_scores, retag_trec, to_qrels, to_ranx_run, to_trec
from tests.conftest import need

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


def test_run_file_scores_strictly_decrease_in_rbenchs_order():
    assert file_scores([3.0, 3.0, 2.5, 2.5, 2.5, 2.6, -1.0000004, float("nan")]) == [
        "3.000000", "2.999999", "2.500000", "2.499999", "2.499998", "2.499997", "-1.000000", "-1.000001"]
    text = to_trec({"q1": [("a", 1.0), ("b", 1.0), ("c", 0.0000004)]}, "bm25")
    assert text == "q1 Q0 a 1 1.000000 bm25\nq1 Q0 b 2 0.999999 bm25\nq1 Q0 c 3 0.000000 bm25\n"


def test_a_run_file_retagged_for_export_gets_its_system_and_order_preserving_scores():
    tied = "q1 Q0 a 1 2.000000 rbench\nq1 Q0 b 2 2.000000 rbench\nq2 Q0 c 1 1.500000 rbench\n"
    assert retag_trec(tied, "bm25 k1=0.9") == (
        "q1 Q0 a 1 2.000000 bm25%20k1%3D0.9\nq1 Q0 b 2 1.999999 bm25%20k1%3D0.9\nq2 Q0 c 1 1.500000 bm25%20k1%3D0.9\n")
    with pytest.raises(ValueError, match=r"tiny/bm25 run.trec:2: expected 'qid Q0 docid rank score tag'"):
        retag_trec("q1 Q0 a 1 2.0 x\nq1 Q0 b 2 high x\n", "bm25", source="tiny/bm25 run.trec")


def _random_case(seed: int, queries: int = 40, docs: int = 30, most_gold: int = 4, most_ranked: int = 15):
    """Random gold sets and rankings whose scores all tie (the order must come from the rank)."""
    rng = random.Random(seed)
    names = [f"doc{i}" for i in range(docs)]
    gold, ranking = {}, {}
    for q in range(queries):
        qid = f"q{q}"
        gold[qid] = rng.sample(names, rng.randint(1, most_gold))
        ranked = rng.sample(names, rng.randint(0, most_ranked))
        ranking[qid] = [(d, 1.0) for d in ranked]
    return gold, ranking


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_parity_with_pytrec_eval(seed):
    pytrec_eval = need("pytrec_eval")
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


def test_graded_ndcg_by_hand():
    # grades A=3, B=1; ranking B, X, A. DCG@3 = 1/log2(2) + 3/log2(4) = 1 + 1.5 = 2.5;
    # ideal = 3/log2(2) + 1/log2(3) = 3 + 0.6309 = 3.6309
    from rbench.evaluation.metrics import ndcg

    value = ndcg(["B", "X", "A"], {"A", "B"}, 3, {"A": 3, "B": 1})
    assert value == pytest.approx(2.5 / (3 + 1 / math.log2(3)))
    assert ndcg(["B", "X", "A"], {"A", "B"}, 3) == pytest.approx((1 + 0.5) / (1 + 1 / math.log2(3)))


def _graded_case(seed: int):
    rng = random.Random(seed)
    gold, ranking = _random_case(seed)
    grades = {q: {d: rng.randint(1, 3) for d in docs} for q, docs in gold.items()}
    return gold, grades, ranking


@pytest.mark.parametrize("seed", [5, 6])
def test_graded_ndcg_parity_with_pytrec_eval(seed):
    pytrec_eval = need("pytrec_eval")
    gold, grades, ranking = _graded_case(seed)
    rows = evaluate_queries(ranking, gold, [1, 3, 5, 10], grades=grades)
    ours = {(r["query_id"], r["k"]): r["value"] for r in rows if r["metric"] == "ndcg"}
    qrels = to_qrels(gold, grades)
    assert any(g > 1 for docs in qrels.values() for g in docs.values())
    theirs = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.1,3,5,10"}).evaluate(to_ranx_run(ranking))
    for qid in gold:
        for k in (1, 3, 5, 10):
            assert ours[(qid, k)] == pytest.approx(theirs.get(qid, {}).get(f"ndcg_cut_{k}", 0.0))


def test_ties_ordered_as_trec_eval_orders_them_score_as_pytrec_eval_scores_the_raw_scores():
    """Equal scores by document id, descending, as trec_eval's ``comp_sim_docno``: pytrec_eval given the raw
    (tied) scores and rbench given its ``trec_eval`` order agree per query; the retriever's order (a graded
    copy first, as a corpus's order put it) does not, on the query with a graded and an ungraded copy."""
    from rbench.evaluation.runs import trec_eval_order

    pytrec_eval = need("pytrec_eval")
    ranking = {"copies": [("d1", 0.9), ("d1 copy", 0.9), ("d3", 0.5), ("d10", 0.5), ("d2", 0.5), ("d4", 0.1)],
               "plain": [("a", 2.0), ("b", 1.0), ("c", 1.0)]}
    gold, grades = {"copies": ["d1", "d2", "d10"], "plain": ["b"]}, {"copies": {"d1": 2, "d2": 1, "d10": 1}}
    qrels = to_qrels(gold, grades, {"copies": ["d1 copy"]})
    theirs = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.3,5", "recall.3"}).evaluate(
        {q: dict(docs) for q, docs in ranking.items()})
    ordered = trec_eval_order(ranking)
    # ids compared as bytes, descending: "d1 copy" is written "d1%20copy", which sorts after "d1"
    assert [d for d, _ in ordered["copies"]] == ["d1 copy", "d1", "d3", "d2", "d10", "d4"]
    assert [d for d, _ in ordered["plain"]] == ["a", "c", "b"]
    for order, agrees in ((ordered, True), (ranking, False)):
        rows = evaluate_queries(order, gold, [3, 5], grades=grades)
        ours = {(r["query_id"], r["metric"], r["k"]): r["value"] for r in rows}
        same = [ours[(q, m, k)] == pytest.approx(theirs[q][f"{name}_{k}"]) for q in ranking
                for m, name, k in (("ndcg", "ndcg_cut", 3), ("ndcg", "ndcg_cut", 5), ("recall", "recall", 3))]
        assert all(same) if agrees else not all(same)


def test_trec_qrels_round_trip(tmp_path):
    from rbench.dataset_adapters.qrels import read_qrels
    from rbench.evaluation.runs import to_trec_qrels

    qrels = {"q 1": {"Andy Karl :: awards": 2, "d2": 1}, "q2": {"d3": 0}}
    path = tmp_path / "qrels.trec"
    path.write_text(to_trec_qrels(qrels))
    assert path.read_text().splitlines()[0] == "q%201 0 Andy%20Karl%20%3A%3A%20awards 2"
    assert read_qrels(path) == qrels
    beir = tmp_path / "test.tsv"
    beir.write_text("query-id\tcorpus-id\tscore\nq1\td1\t2\nq1\td2\t0\n")
    assert read_qrels(beir) == {"q1": {"d1": 2, "d2": 0}}
    beir.write_text("q1 d1\n")
    from rbench.core.errors import DataError

    with pytest.raises(DataError, match=r"test.tsv:1 must be .*\(BEIR\) or 'qid 0 docid grade' \(TREC\)"):
        read_qrels(beir)
    beir.write_text("q1 0 d1 high\n")
    with pytest.raises(DataError, match=r"test.tsv:1: relevance 'high' is not an integer grade"):
        read_qrels(beir)
