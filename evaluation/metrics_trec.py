"""trec_eval's standard measures, computed by pytrec_eval (trec_eval's own C code) on rbench's
document ranking, beside rbench's table-QA measures:

- ``map``: average precision, ``sum over relevant documents d retrieved at rank r of
  precision@r / |relevant|``; at each k trec_eval's ``map_cut_k`` (ranks beyond k count as
  not retrieved), and over the whole ranking (k = :data:`WHOLE`) trec_eval's ``map``;
- ``success``: 1 if a relevant document is in the first k, else 0 (``success_k``);
- ``rprec``: precision at rank R, R = |relevant| (``Rprec``; whole ranking only, k = :data:`WHOLE`).

Relevant means a grade > 0. pytrec_eval sees the ranking with scores that strictly decrease in
rbench's order (:func:`rbench.evaluation.runs.file_scores`), so ties are ranked as rbench ranks
them; a query the run missed scores 0, as in rbench's other measures."""

from __future__ import annotations

from typing import Mapping, Sequence

from rbench.evaluation.names import STANDARD
from rbench.evaluation.runs import DocRanking, file_scores

WHOLE = 0
"""The ``k`` of a value over the whole ranking (``map``, ``rprec``)."""


def cut_label(k: int) -> str:
    """How a cut-off is shown: ``5``, or ``all`` for :data:`WHOLE`."""
    return "all" if k == WHOLE else str(k)


def cut_order(k: int) -> tuple[bool, int]:
    """A sort key that puts :data:`WHOLE` after every cut-off."""
    return k == WHOLE, k


def standard_measures(ranking: DocRanking, gold: Mapping[str, Sequence[str]], ks: Sequence[int],
                      names: Sequence[str]) -> list[dict]:
    """One row ``{query_id, metric, k, value}`` per query with gold documents, measure of
    ``names`` and k (``map`` also at :data:`WHOLE`, ``rprec`` only there)."""
    if not names:
        return []
    import pytrec_eval

    unknown = sorted(set(names) - set(STANDARD))
    if unknown:
        raise ValueError(f"unknown standard measure(s) {unknown}; choose from {list(STANDARD)}")
    cuts = ",".join(str(k) for k in ks)
    wanted = {"map": {f"map_cut.{cuts}", "map"}, "success": {f"success.{cuts}"}, "rprec": {"Rprec"}}
    qrels = {q: {d: 1 for d in docs} for q, docs in gold.items() if docs}
    run = {q: {doc: float(score) for (doc, _), score in zip(ranking[q], file_scores(s for _, s in ranking[q]))}
           for q in qrels if ranking.get(q)}
    measures = set().union(*(wanted[n] for n in names))
    scored = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(run) if run else {}
    rows = []
    for qid in qrels:
        values = scored.get(qid, {})
        for name in STANDARD:
            if name not in names:
                continue
            keys = ([("map", WHOLE)] + [(f"map_cut_{k}", k) for k in ks] if name == "map"
                    else [(f"success_{k}", k) for k in ks] if name == "success" else [("Rprec", WHOLE)])
            rows += [{"query_id": qid, "metric": name, "k": k, "value": float(values.get(key, 0.0))}
                     for key, k in keys]
    return rows
