"""Plain-text results tables."""

from __future__ import annotations

from statistics import fmean
from typing import Mapping, Sequence

from rbench.evaluation.metrics_ir import Measure, measure_name
from rbench.evaluation.metrics_trec import cut_label, cut_order
from rbench.evaluation.names import MEASURES


def metrics_table(rows: Sequence[dict]) -> str:
    """One line per (dataset, retriever, metric), one column per k.

    ``rows`` hold ``dataset``, ``retriever``, ``metric``, ``k`` and ``value``.
    """
    ks = sorted({r["k"] for r in rows}, key=cut_order)
    cells: dict[tuple[str, str, str], dict[int, float]] = {}
    for r in rows:
        cells.setdefault((r["dataset"], r["retriever"], r["metric"]), {})[r["k"]] = r["value"]
    order = {m: i for i, m in enumerate(MEASURES)}
    keys = sorted(cells, key=lambda c: (c[0], c[1], order.get(c[2], len(order)), c[2]))
    width = max([len("dataset / retriever")] + [len(f"{d} / {r}") for d, r, _ in keys])
    header = f"{'dataset / retriever':<{width}}  {'metric':<15}" + "".join(f"{'@' + cut_label(k):>8}" for k in ks)
    lines = [header, "-" * len(header)]
    for d, r, metric in keys:
        values = "".join(
            f"{cells[(d, r, metric)][k]:>8.4f}" if k in cells[(d, r, metric)] else f"{'':>8}" for k in ks
        )
        lines.append(f"{d + ' / ' + r:<{width}}  {metric:<15}{values}")
    return "\n".join(lines)


def measures_table(scores: Mapping[tuple[str, str], Mapping[tuple], float], measures: Sequence[Measure]) -> str:
    """One line per (dataset, system), one column per measure: the mean over the queries that
    have a value (``scores[(dataset, system)][(metric, k, query_id)]``)."""
    names = [measure_name(m) for m in measures]
    keys = sorted(scores)
    width = max([len("dataset / system")] + [len(f"{d} / {s}") for d, s in keys])
    widths = [max(8, len(n)) for n in names]
    header = f"{'dataset / system':<{width}}" + "".join(f"  {n:>{w}}" for n, w in zip(names, widths))
    lines = [header, "-" * len(header)]
    for dataset, system in keys:
        cells = []
        for (metric, k), w in zip(measures, widths):
            values = [v for (m, kk, _), v in scores[(dataset, system)].items() if m == metric and kk == k]
            cells.append(f"  {fmean(values):>{w}.4f}" if values else f"  {'':>{w}}")
        lines.append(f"{dataset + ' / ' + system:<{width}}" + "".join(cells))
    return "\n".join(lines)
