"""The chunking grid's results table (mean +- std, best per metric marked) and its figures."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Sequence

import pyarrow.parquet as pq

METRICS = ("recall", "precision", "f1", "iou", "precision_omega")


def write_grid_report(results: Sequence[dict], reference_token_lengths: Sequence[int],
                      references_per_question: Sequence[int], out: Path, settings: dict) -> dict[str, dict]:
    """Write ``grid.csv``, ``grid.md``, box plots of the best combinations and two histograms.

    ``results`` rows hold ``chunk_size``, ``overlap``, ``n``, ``summary`` ({metric: {mean,
    std_population, std_sample}}) and ``per_question`` (a Parquet path). ``settings`` names
    ``size_unit``, ``metric_unit``, ``std`` (population or sample), ``scope``, ``corpora``
    and ``questions``; the table states them. Every row tied with the best mean at the
    shown precision is marked. Returns the first best row per metric.
    """
    from rbench.evaluation.report_plots import pyplot

    out.mkdir(parents=True, exist_ok=True)
    std = f"std_{settings['std']}"
    best = {m: max(results, key=lambda r: r["summary"][m]["mean"]) for m in METRICS if m != "precision_omega"}
    tops = {m: round(row["summary"][m]["mean"], 4) for m, row in best.items()}
    header = [f"chunk_size ({settings['size_unit']})", f"overlap ({settings['size_unit']})", "n"] + list(METRICS)
    with open(out / "grid.csv", "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["chunk_size", "overlap", "n"] + [f"{m}_{s}" for m in METRICS for s in ("mean", std)])
        for r in results:
            writer.writerow([r["chunk_size"], r["overlap"], r["n"]] +
                            [r["summary"][m][s] for m in METRICS for s in ("mean", std)])
    lines = [f"Span metrics counted in {settings['metric_unit']}; mean +- {settings['std']} standard deviation "
             f"over {settings['questions']} questions of {', '.join(settings['corpora'])}; retrieval scope "
             f"{settings['scope']}; **best**: every row tied with the best mean at 4 decimals.", "",
             "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for r in results:
        cells = [f"{r['summary'][m]['mean']:.4f} +- {r['summary'][m][std]:.4f}"
                 + (" **best**" if m in tops and round(r["summary"][m]["mean"], 4) == tops[m] else "")
                 for m in METRICS]
        lines.append("| " + " | ".join([str(r["chunk_size"]), str(r["overlap"]), str(r["n"])] + cells) + " |")
    (out / "grid.md").write_text("\n".join(lines) + "\n", encoding="utf-8")

    plt = pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.8))
    for ax, metric in zip(axes, ("precision", "recall", "f1")):
        labels, data = [], []
        for m, row in best.items():
            labels.append(f"best {m}\n{row['chunk_size']}/{row['overlap']}/N={row['n']}")
            data.append(pq.read_table(row["per_question"], columns=[metric]).column(0).to_pylist())
        ax.boxplot(data)
        ax.set_xticks(range(1, len(labels) + 1), labels, fontsize=6)
        ax.set_title(f"per-question {metric}")
    fig.tight_layout()
    fig.savefig(out / "best_boxplots.png", dpi=120)
    plt.close(fig)
    for values, name, xlabel in ((references_per_question, "references_per_question.png", "references per question"),
                                 (reference_token_lengths, "reference_length_tokens.png", "reference length (cl100k tokens)")):
        fig, ax = plt.subplots(figsize=(5, 3.5))
        ax.hist(values, bins=30)
        ax.set(xlabel=xlabel, ylabel="count")
        fig.tight_layout()
        fig.savefig(out / name, dpi=120)
        plt.close(fig)
    return best
