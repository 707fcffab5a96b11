"""Comparison tier: the macro averages of the standard metrics against ranx, F1 and MRR@k among
them, which pytrec_eval lacks (ranx's first call compiles with numba, about half a minute of CPU on
these machines, so it is kept out of the unit tier; graded nDCG is checked per query against
pytrec_eval in the unit tier)."""

from __future__ import annotations

import pytest

from rbench.evaluation.evaluate import evaluate_queries, macro_average
from rbench.evaluation.runs import to_qrels, to_ranx_run
from tests.conftest import need
from tests.unit.evaluation.test_metrics import _random_case

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
