"""Comparison tier: the standard metrics against ranx (its first call compiles with numba,
about a minute on these machines, so it is kept out of the unit tier)."""

from __future__ import annotations

import pytest

from rbench.evaluation.evaluate import evaluate_queries, macro_average
from rbench.evaluation.runs import to_qrels, to_ranx_run
from tests.conftest import need
from tests.unit.evaluation.test_metrics import _graded_case, _random_case

pytestmark = pytest.mark.xdist_group("ranx")  # on one worker, which compiles ranx once


@pytest.mark.parametrize("seed", [3, 4])
def test_parity_with_ranx(seed):
    ranx = need("ranx")
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


@pytest.mark.parametrize("seed", [5, 6])
def test_graded_ndcg_parity_with_pytrec_eval_and_ranx(seed):
    pytrec_eval = need("pytrec_eval")
    ranx = need("ranx")
    gold, grades, ranking = _graded_case(seed)
    ranking = {q: docs for q, docs in ranking.items() if docs}
    gold = {q: gold[q] for q in ranking}
    rows = evaluate_queries(ranking, gold, [1, 3, 5, 10], grades=grades)
    ours = {(r["query_id"], r["k"]): r["value"] for r in rows if r["metric"] == "ndcg"}
    qrels = to_qrels(gold, grades)
    assert any(g > 1 for docs in qrels.values() for g in docs.values())
    theirs = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.1,3,5,10"}).evaluate(to_ranx_run(ranking))
    for qid in gold:
        for k in (1, 3, 5, 10):
            assert ours[(qid, k)] == pytest.approx(theirs[qid][f"ndcg_cut_{k}"])
    agg = {a["k"]: a["value"] for a in macro_average(rows) if a["metric"] == "ndcg"}
    scores = ranx.evaluate(ranx.Qrels(qrels), ranx.Run(to_ranx_run(ranking)), [f"ndcg@{k}" for k in (1, 3, 5, 10)])
    for k in (1, 3, 5, 10):
        assert agg[k] == pytest.approx(scores[f"ndcg@{k}"])
