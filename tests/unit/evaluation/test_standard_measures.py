"""trec_eval's standard measures (MAP, Success@k, R-precision) as rbench reports them: a
hand-computed case, and a random case of thousands of queries against formulas written out
here and against pytrec_eval reading the run file rbench exports."""

from __future__ import annotations

import pytest

from rbench.dataset_adapters.qrels import read_qrels
from rbench.evaluation.metrics_trec import WHOLE, standard_measures
from rbench.evaluation.runs import to_qrels, to_trec, to_trec_qrels
from tests.conftest import read_trec_run
from tests.unit.evaluation.test_metrics import _random_case


def _by_key(rows):
    return {(r["query_id"], r["metric"], r["k"]): r["value"] for r in rows}


def test_a_case_by_hand():
    # relevant a, b; ranked x a y b (tied scores: rbench's order is the list's)
    ranking = {"q1": [("x", 1.0), ("a", 1.0), ("y", 1.0), ("b", 1.0)], "q2": []}
    gold = {"q1": ["a", "b"], "q2": ["c"], "q3": ["d"]}
    got = _by_key(standard_measures(ranking, gold, [1, 3], ["map", "success", "rprec"]))
    assert got[("q1", "map", WHOLE)] == pytest.approx((1 / 2 + 2 / 4) / 2)   # AP: precision at ranks 2 and 4
    assert got[("q1", "map", 3)] == pytest.approx((1 / 2) / 2)                 # map_cut_3: b is beyond rank 3
    assert got[("q1", "map", 1)] == 0.0
    assert got[("q1", "success", 1)] == 0.0 and got[("q1", "success", 3)] == 1.0
    assert got[("q1", "rprec", WHOLE)] == pytest.approx(1 / 2)                 # R = 2: one of x, a
    for qid in ("q2", "q3"):  # an empty ranking and a query the run missed score 0, as rbench's measures do
        assert {v for (q, _, _), v in got.items() if q == qid} == {0.0}
    assert ("q1", "rprec", 3) not in got and len(got) == 3 * (1 + 2 + 2 + 1)
    assert standard_measures(ranking, gold, [1], []) == []
    with pytest.raises(ValueError, match=r"unknown standard measure\(s\) \['bpref'\]"):
        standard_measures(ranking, gold, [1], ["bpref"])


def _average_precision(ranked: list[str], relevant: set[str], cut: int | None = None) -> float:
    hits, total = 0, 0.0
    for rank, doc in enumerate(ranked[:cut] if cut else ranked, 1):
        if doc in relevant:
            hits += 1
            total += hits / rank
    return total / len(relevant)


def test_thousands_of_random_queries_match_the_formulas_and_pytrec_eval_on_the_exported_files(tmp_path):
    import pytrec_eval

    gold, tied = _random_case(11, queries=3000, docs=60, most_gold=6, most_ranked=30)
    ranking = {q: [(d, float(i // 3)) for i, (d, _) in enumerate(reversed(docs))][::-1]  # ties in threes
               for q, docs in tied.items()}
    ks = [1, 5, 10, 20]
    ours = _by_key(standard_measures(ranking, gold, ks, ["map", "success", "rprec"]))
    for qid, relevant in gold.items():
        ranked = [d for d, _ in ranking[qid]]
        rel = set(relevant)
        assert ours[(qid, "map", WHOLE)] == pytest.approx(_average_precision(ranked, rel))
        assert ours[(qid, "rprec", WHOLE)] == pytest.approx(len(rel & set(ranked[:len(rel)])) / len(rel))
        for k in ks:
            assert ours[(qid, "map", k)] == pytest.approx(_average_precision(ranked, rel, k))
            assert ours[(qid, "success", k)] == float(bool(rel & set(ranked[:k])))

    (tmp_path / "run.trec").write_text(to_trec(ranking, "sys"))
    (tmp_path / "qrels").write_text(to_trec_qrels(to_qrels(gold)))
    measures = {"map", "map_cut.1,5,10,20", "success.1,5,10,20", "Rprec"}
    theirs = pytrec_eval.RelevanceEvaluator(read_qrels(tmp_path / "qrels"), measures).evaluate(
        read_trec_run(tmp_path / "run.trec"))
    names = {("map", WHOLE): "map", ("rprec", WHOLE): "Rprec",
             **{("map", k): f"map_cut_{k}" for k in ks}, **{("success", k): f"success_{k}" for k in ks}}
    for (metric, k), name in names.items():
        mine = sum(ours[(q, metric, k)] for q in gold) / len(gold)
        trec = sum(theirs.get(q, {}).get(name, 0.0) for q in gold) / len(gold)  # a query without hits scores 0
        assert mine == pytest.approx(trec), name
