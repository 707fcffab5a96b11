"""The embedding-model comparison: quality, speed and index cost per (model, dataset)."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Sequence

from rbench.evaluation.report_plots import grouped_bars, scatter


def write_comparison(rows: Sequence[dict], out: Path, k: int = 5) -> list[Path]:
    """``models.csv``, ``models.md``, a recall vs QPS scatter and per-dataset recall bars."""
    out.mkdir(parents=True, exist_ok=True)
    columns = list(rows[0])
    with open(out / "models.csv", "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)
    fmt = lambda v: f"{v:.4f}" if isinstance(v, float) else str(v)  # noqa: E731
    table = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    table += ["| " + " | ".join(fmt(r[c]) for c in columns) + " |" for r in rows]
    (out / "models.md").write_text("\n".join(table) + "\n", encoding="utf-8")
    metric = f"recall@{k}"
    return [
        out / "models.csv", out / "models.md",
        scatter(rows, "queries_per_second", metric, "retriever", out / "recall_vs_qps.png", f"{metric} vs queries/s"),
        grouped_bars(rows, "dataset", "retriever", metric, out / "recall_per_dataset.png", f"{metric} per dataset"),
    ]
