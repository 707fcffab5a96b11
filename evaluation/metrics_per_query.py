"""Per-query metrics at each cut-off, and their macro average."""

from __future__ import annotations

from statistics import fmean
from typing import Literal, Mapping, Sequence

from rbench.evaluation import metrics as m
from rbench.evaluation.names import STANDARD
from rbench.evaluation.runs import DocRanking


def evaluate_queries(
    ranking: DocRanking,
    gold: Mapping[str, Sequence[str]],
    ks: Sequence[int],
    precision_denominator: Literal["k", "retrieved"] = "k",
    recall_denominator: Literal["gold", "capped"] = "gold",
    grades: Mapping[str, Mapping[str, int]] | None = None,
) -> list[dict]:
    """One row ``{query_id, metric, k, value}`` per query, metric and k.

    Every query in ``gold`` is scored (a query the run missed scores 0); queries with
    no gold documents are skipped, since recall is undefined for them. ``grades``: graded
    relevance per query and gold document, used by nDCG (the other metrics are binary).
    """
    rows = []
    for qid, gold_docs in gold.items():
        relevant = set(gold_docs)
        if not relevant:
            continue
        ranked = [d for d, _ in ranking.get(qid, [])]
        settings = {"precision": (precision_denominator,), "recall": (recall_denominator,),
                    "f1": (precision_denominator, recall_denominator), "ndcg": ((grades or {}).get(qid),)}
        rows.extend({"query_id": qid, "metric": name, "k": k,
                     "value": getattr(m, name)(ranked, relevant, k, *settings.get(name, ()))}
                    for k in ks for name in m.METRICS)
    return rows


def macro_average(rows: Sequence[dict]) -> list[dict]:
    """``{metric, k, value, queries}``: the mean over queries of each (metric, k)."""
    groups: dict[tuple[str, int], list[float]] = {}
    for row in rows:
        groups.setdefault((row["metric"], row["k"]), []).append(row["value"])
    order = {name: i for i, name in enumerate(m.METRICS + STANDARD)}
    return [
        {"metric": metric, "k": k, "value": fmean(values), "queries": len(values)}
        for (metric, k), values in sorted(groups.items(), key=lambda g: (order[g[0][0]], g[0][1]))
    ]
