"""The embedding-model comparison: quality, speed and index cost per (model, dataset)."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Sequence

from evaluation.plots import grouped_bars, scatter


def model_rows(results: Sequence[dict], k: int = 5) -> list[dict]:
    """One row per dense (model, dataset) result of ``flows.benchmark.run_stages``.

    Reads recall@k from the evaluation, queries/s from the run, and passages/s and build
    time from the dense index summary.
    """
    from tasks.evaluate import read_aggregate

    rows = []
    for r in results:
        index_info = next((i.info for i in r["indexes"] if "passages_per_second" in i.info), None)
        if index_info is None:
            continue
        recall = next((a["value"] for a in read_aggregate(r["evaluation"]) if a["metric"] == "recall" and a["k"] == k), None)
        rows.append({
            "dataset": r["dataset"], "retriever": r["retriever"].label, "model": r["retriever"].params.get("model"),
            f"recall@{k}": recall, "queries_per_second": r["run"].info.get("queries_per_second"),
            "passages_per_second": index_info["passages_per_second"], "dim": index_info.get("dim"),
            "index_build_seconds": round((index_info.get("encode_seconds") or 0) + (index_info.get("build_seconds") or 0), 2),
        })
    return rows


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
