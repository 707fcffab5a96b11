"""Per-query measures of a run that rbench did not make (a TREC run file from Pyserini,
PyTerrier, a paper's release) against qrels, keyed as experiment tables read them, so that it
sits in one table, and one test, with rbench's systems.

rbench's own measures are computed by rbench's code, as ``rbench run`` computes them with its
defaults (precision over k, recall over the gold count; :mod:`rbench.evaluation.metrics_per_query`),
a document of grade > 0 being gold and nDCG using the grades; trec_eval's ``map``, ``success``
and ``rprec`` by pytrec_eval (:mod:`rbench.evaluation.metrics_trec`); ir_measures names by
ir_measures (:mod:`rbench.evaluation.metrics_ir`). Queries: those of the qrels with a relevant
document; one the run lacks scores 0."""

from __future__ import annotations

from typing import Mapping, Sequence

from rbench.evaluation.metrics_ir import Measure, ir_per_query, is_ir_measure
from rbench.evaluation.metrics_per_query import evaluate_queries
from rbench.evaluation.metrics_trec import WHOLE, standard_measures
from rbench.evaluation.names import METRICS, STANDARD
from rbench.evaluation.runs import DocRanking, to_ranx_run

PerQueryValues = dict[tuple[str, "int | None", str], float]


def gold_of(qrels: Mapping[str, Mapping[str, int]]) -> tuple[dict[str, list[str]], dict[str, dict[str, int]]]:
    """Each query's relevant documents (grade > 0) and their grades, from qrels."""
    gold = {q: [d for d, g in docs.items() if g > 0] for q, docs in qrels.items()}
    gold = {q: docs for q, docs in gold.items() if docs}
    return gold, {q: {d: qrels[q][d] for d in docs} for q, docs in gold.items()}


def file_values(ranking: DocRanking, qrels: Mapping[str, Mapping[str, int]], measures: Sequence[Measure],
                ks: Sequence[int] = ()) -> PerQueryValues:
    """Per-query values of ``ranking`` for ``measures``, and rbench's measures at each of ``ks``
    too (for the report's metrics table), keyed ``(metric, k, query_id)``."""
    gold, grades = gold_of(qrels)
    cuts = sorted({k for m, k in measures if m in METRICS and k} | {k for k in ks if k})
    values: PerQueryValues = {}
    if cuts:
        rows = evaluate_queries(ranking, gold, cuts, grades=grades)
        values.update({(r["metric"], r["k"], r["query_id"]): r["value"] for r in rows})
    standard = sorted({m for m, _ in measures if m in STANDARD})
    if standard:
        trec_cuts = sorted({k for m, k in measures if m in STANDARD and k != WHOLE} | set(cuts)) or [10]
        rows = standard_measures(ranking, gold, trec_cuts, standard)
        values.update({(r["metric"], r["k"], r["query_id"]): r["value"] for r in rows})
    values.update(ir_per_query([m for m in measures if is_ir_measure(m)], qrels, to_ranx_run(ranking)))
    return values
