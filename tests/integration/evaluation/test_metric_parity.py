"""Comparison tier: the macro averages of the standard metrics against ranx, F1 and MRR@k among
them, which pytrec_eval lacks (ranx's first call compiles with numba, about half a minute of CPU on
these machines, so it is kept out of the unit tier; graded nDCG is checked per query against
pytrec_eval in the unit tier)."""

from __future__ import annotations

import pytest

from rbench.dataset_adapters.qrels import read_qrels
from rbench.evaluation.metrics_per_query import evaluate_queries, macro_average
from rbench.evaluation.runs import to_qrels, to_ranx_run, to_trec, to_trec_qrels
from tests.conftest import need, read_trec_run
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


def test_a_tied_run_file_scores_the_same_in_rbench_pytrec_eval_and_ranx(tmp_path):
    """A run whose scores tie (as bm25s's do on near-duplicate rows): rbench ranks ties in the
    retriever's order, and its run file's scores keep that order, so trec_eval's tools read the
    file as rbench scored it. With the raw tied scores in the file, pytrec_eval and ranx each
    re-sorted the ties their own way and disagreed with rbench and with each other."""
    ranx = need("ranx")
    pytrec_eval = need("pytrec_eval")
    gold, ranking = _random_case(5)
    ranking = {q: [(d, float(i // 4)) for i, (d, _) in enumerate(reversed(docs))][::-1]  # ties in fours
               for q, docs in ranking.items() if docs}
    gold = {q: gold[q] for q in ranking}
    agg = {(a["metric"], a["k"]): a["value"] for a in macro_average(evaluate_queries(ranking, gold, [5, 10]))}
    run_file, qrels_file = tmp_path / "tiny.bm25s.trec", tmp_path / "tiny.qrels"
    run_file.write_text(to_trec(ranking, "bm25s"))
    qrels_file.write_text(to_trec_qrels(to_qrels(gold)))

    read = ranx.evaluate(ranx.Qrels.from_file(str(qrels_file), kind="trec"),
                         ranx.Run.from_file(str(run_file), kind="trec"), ["ndcg@10", "recall@5"])
    qrels, run = read_qrels(qrels_file), read_trec_run(run_file)
    per_query = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10", "recall.5"}).evaluate(run)
    trec = {m: sum(q[m] for q in per_query.values()) / len(per_query) for m in ("ndcg_cut_10", "recall_5")}
    assert agg[("ndcg", 10)] == pytest.approx(read["ndcg@10"]) == pytest.approx(trec["ndcg_cut_10"])
    assert agg[("recall", 5)] == pytest.approx(read["recall@5"]) == pytest.approx(trec["recall_5"])
