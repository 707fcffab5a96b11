"""Plain-text results tables."""

from __future__ import annotations

from typing import Sequence

from rbench.evaluation.metrics import METRICS
from rbench.evaluation.metrics_trec import STANDARD, cut_label, cut_order


def metrics_table(rows: Sequence[dict]) -> str:
    """One line per (dataset, retriever, metric), one column per k.

    ``rows`` hold ``dataset``, ``retriever``, ``metric``, ``k`` and ``value``.
    """
    ks = sorted({r["k"] for r in rows}, key=cut_order)
    cells: dict[tuple[str, str, str], dict[int, float]] = {}
    for r in rows:
        cells.setdefault((r["dataset"], r["retriever"], r["metric"]), {})[r["k"]] = r["value"]
    order = {m: i for i, m in enumerate(METRICS + STANDARD)}
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
