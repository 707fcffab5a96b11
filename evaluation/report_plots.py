"""Plots of results (matplotlib, written as PNG files)."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence


def pyplot():
    """matplotlib's ``pyplot`` on its Agg backend (files, no display)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def recall_curves(rows: Sequence[dict], dataset: str, path: Path, metric: str = "recall") -> Path:
    """``metric``@k against k, one line per retriever, for one dataset."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(5, 3.5))
    for retriever in sorted({r["retriever"] for r in rows if r["dataset"] == dataset}):
        points = sorted((r["k"], r["value"]) for r in rows
                        if r["dataset"] == dataset and r["retriever"] == retriever and r["metric"] == metric)
        ax.plot([k for k, _ in points], [v for _, v in points], marker="o", label=retriever)
    ax.set(xlabel="k", ylabel=f"{metric}@k", title=f"{dataset}: {metric}@k", ylim=(0, 1.02))
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def scatter(points: Sequence[dict], x: str, y: str, label: str, path: Path, title: str, log_x: bool = True) -> Path:
    """A labelled scatter plot of ``points[y]`` against ``points[x]``."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(5.5, 4))
    for p in points:
        ax.scatter(p[x], p[y])
        ax.annotate(str(p[label]), (p[x], p[y]), fontsize=7, xytext=(4, 4), textcoords="offset points")
    if log_x:
        ax.set_xscale("log")
    ax.set(xlabel=x, ylabel=y, title=title)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def grouped_bars(points: Sequence[dict], group: str, bar: str, value: str, path: Path, title: str) -> Path:
    """Bars of ``value`` per ``group`` (x axis), one bar per ``bar`` within each group."""
    plt = pyplot()
    groups = sorted({p[group] for p in points})
    bars = sorted({p[bar] for p in points})
    width = 0.8 / max(len(bars), 1)
    fig, ax = plt.subplots(figsize=(max(4, 1.5 * len(groups) + 2), 3.5))
    for i, b in enumerate(bars):
        values = [next((p[value] for p in points if p[group] == g and p[bar] == b), 0.0) for g in groups]
        ax.bar([j + i * width for j in range(len(groups))], values, width, label=b)
    ax.set_xticks([j + width * (len(bars) - 1) / 2 for j in range(len(groups))], groups)
    ax.set(ylabel=value, title=title, ylim=(0, 1.02))
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def difference_plot(table: dict, measure: str, path: Path) -> Path:
    """Per-query differences to the baseline on ``measure`` of an experiment table
    (:func:`rbench.evaluation.report_experiment.experiment_tables`), each system's sorted from its
    largest gain to its largest loss: bars above 0 are queries it wins, below 0 queries it loses."""
    plt = pyplot()
    systems = [r for r in table["rows"] if r["cells"][measure]["differences"]]
    fig, axes = plt.subplots(len(systems), 1, figsize=(6, 1.8 * len(systems) + 0.8), squeeze=False, sharey=True)
    for ax, row in zip(axes[:, 0], systems):
        diffs = sorted(row["cells"][measure]["differences"].values(), reverse=True)
        ax.bar(range(len(diffs)), diffs, width=1.0, color=["tab:green" if d > 0 else "tab:red" for d in diffs])
        ax.axhline(0, color="black", linewidth=0.6)
        ax.set(ylabel="difference", title=f"{row['system']} - {table['baseline']}")
        ax.set_xticks([])
    axes[-1, 0].set_xlabel(f"queries, sorted by difference ({measure})")
    fig.suptitle(f"{table['dataset']}: {measure} per query against {table['baseline']}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
