"""Markdown and HTML reports for one or several finished runs: metrics, curves, significance."""

from __future__ import annotations

import html
from pathlib import Path
from typing import Literal, Sequence

from rbench.evaluation.metrics_trec import cut_label, cut_order
from rbench.evaluation.names import MEASURES
from rbench.evaluation.report_experiment import table_html, table_latex, table_markdown
from rbench.evaluation.report_plots import difference_plot, recall_curves
from rbench.evaluation.reproduction_text import (HEADER, ceilings_line, cell_notes, not_in_the_run,
                                                 reproduction_caption, summary)
from rbench.evaluation.reproduction_text import rows as repro_rows


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], fmt: Literal["md", "html"]) -> str:
    if fmt == "md":
        lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows])
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _reproduction(doc: dict, fmt: Literal["md", "html"], all_cells: bool = True) -> list[str]:
    """A comparison of ``rbench compare`` as report parts: heading, caption, table, summary; without
    ``all_cells``, the cells the run lacks are one line after the summary, not rows."""
    heading = f"Against published {doc['against']}: {doc['title']}"
    notes = [f"Note: {n}" for n in cell_notes(doc)]
    ceilings = [line + "." for line in [ceilings_line(doc.get("ceilings") or {})] if line]
    if fmt == "md":
        absent = [] if all_cells else [line for line in [not_in_the_run(doc)] if line]
        return [f"## {heading}", reproduction_caption(doc), _table(HEADER, repro_rows(doc, missing=all_cells), fmt),
                summary(doc) + ".", *ceilings, *absent, *notes]
    return [f"<h2>{html.escape(heading)}</h2>", f"<p>{html.escape(reproduction_caption(doc))}</p>",
            _table(HEADER, repro_rows(doc), fmt), f"<p>{html.escape(summary(doc))}.</p>",
            *(f"<p>{html.escape(n)}</p>" for n in ceilings + notes)]


def reproduction_markdown(doc: dict) -> str:
    """One comparison as a Markdown section (what ``rbench compare`` prints and writes)."""
    return "\n\n".join(_reproduction(doc, "md")) + "\n"


def reproduction_page(docs: Sequence[dict], title: str, all_cells: bool = True) -> tuple[str, str]:
    """Several comparisons as one page: ``(markdown, html)`` of ``reproduction.md``/``.html``
    (the Markdown without the cells the run lacks unless ``all_cells``; the HTML has them all)."""
    md = "\n\n".join([f"# {title}", *("\n\n".join(_reproduction(d, "md", all_cells)) for d in docs)]) + "\n"
    body = "".join("".join(_reproduction(d, "html")) for d in docs)
    return md, html_page(title, f"<h1>{html.escape(title)}</h1>{body}")


def html_page(title: str, body: str) -> str:
    """A whole HTML page around ``body``, in the reports' one style."""
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            "<style>body{font-family:sans-serif}td,th{padding:2px 8px;border-bottom:1px solid #ddd}"
            f"</style></head><body>{body}</body></html>\n")


def _trace_lines(trace: dict) -> list[str]:
    lines = [f"{trace['dataset']} / {trace['retriever']}: {trace['question']} (stopped: {trace['stop']}, "
             f"{len(trace['turns'])} turns, {trace['found']} objects)"]
    for n, turn in enumerate(trace["turns"], 1):
        action = f"Search[{turn['keywords']}]" if turn["action"] == "search" else turn["action"]
        seen = f" -> {len(turn['observation'])} results" if "observation" in turn else ""
        lines.append(f"  {n}. Thought: {turn['thought']} | Action: {action}{seen}")
    return lines


def write_report(
    title: str, metrics: Sequence[dict], tables: Sequence[dict], out: Path,
    costs: Sequence[dict] = (), traces: Sequence[dict] = (), reproductions: Sequence[dict] = (),
    runs: Sequence[dict] = (),
) -> tuple[Path, Path]:
    """Write ``report.md``, ``report.html``, ``experiment.tex`` (the experiment tables of
    :func:`rbench.evaluation.report_experiment.experiment_tables`, ``tables``, as LaTeX), one
    recall@k curve PNG per dataset and one plot of per-query differences to the baseline per
    table (its first measure) into ``out``; ``costs`` (rows of dataset, retriever, name,
    value: queries/s, LLM calls, seconds per step) and ``traces`` (agent traces) add a cost
    table and sample traces; ``reproductions`` (documents of ``rbench compare``) a section per
    published table; ``runs`` (rows of :func:`rbench.tracking.read.differing_params`) a table
    of the runs compared and the parameters that differ between them."""
    out.mkdir(parents=True, exist_ok=True)
    ks = sorted({m["k"] for m in metrics}, key=cut_order)
    keyed = {(m["dataset"], m["retriever"], m["metric"], m["k"]): m["value"] for m in metrics}
    order = {name: i for i, name in enumerate(MEASURES)}
    combos = sorted({(m["dataset"], m["retriever"], m["metric"]) for m in metrics},
                    key=lambda c: (c[0], c[1], order.get(c[2], len(order))))
    metric_rows = [[d, r, name] + [f"{keyed[(d, r, name, k)]:.4f}" if (d, r, name, k) in keyed else "" for k in ks]
                   for d, r, name in combos]
    metric_header = ["dataset", "retriever", "metric"] + [f"@{cut_label(k)}" for k in ks]
    cost_names = sorted({c["name"] for c in costs})
    cost_keyed = {(c["dataset"], c["retriever"], c["name"]): c["value"] for c in costs}
    cost_pairs = sorted({(c["dataset"], c["retriever"]) for c in costs})
    cost_rows = [[d, r, name, f"{cost_keyed[(d, r, name)]:g}"] for d, r in cost_pairs for name in cost_names
                 if (d, r, name) in cost_keyed]
    trace_text = "\n".join(line for t in traces for line in _trace_lines(t))
    plots = [recall_curves(metrics, d, out / f"recall_at_k_{i}.png") for i, d in enumerate(sorted({m["dataset"] for m in metrics}))]
    differences = [difference_plot(t, t["measures"][0], out / f"per_query_{i}.png") for i, t in enumerate(tables)
                   if t["measures"] and any(r["cells"][t["measures"][0]]["differences"] for r in t["rows"])]
    parts = {}
    for fmt in ("md", "html"):
        figures = "\n".join(f"![recall@k]({p.name})" if fmt == "md" else f'<img src="{p.name}" alt="recall@k">' for p in plots)
        per_query = "\n".join(f"![per query]({p.name})" if fmt == "md" else f'<img src="{p.name}" alt="per query">'
                               for p in differences)
        h = (lambda t: f"## {t}") if fmt == "md" else (lambda t: f"<h2>{html.escape(t)}</h2>")
        parts[fmt] = "\n\n".join([
            f"# {title}" if fmt == "md" else f"<h1>{html.escape(title)}</h1>",
            *([h("Runs compared"), _table(list(runs[0]), [[str(v) for v in r.values()] for r in runs], fmt)]
              if runs else []),
            h("Systems against the baseline"),
            *([(table_markdown if fmt == "md" else table_html)(t) for t in tables] or ["(no table)"]),
            *([h("Per-query differences to the baseline (the table's first measure)"), per_query]
              if differences else []),
            h("Metrics"), _table(metric_header, metric_rows, fmt),
            h("Recall@k curves"), figures,
            *([h("Cost and time per retriever"), _table(["dataset", "retriever", "measure", "value"], cost_rows, fmt)]
              if cost_rows else []),
            *[part for doc in reproductions for part in _reproduction(doc, fmt)],
            *([h("Agent traces (a sample per retriever)"),
               f"```\n{trace_text}\n```" if fmt == "md" else f"<pre>{html.escape(trace_text)}</pre>"]
              if traces else []),
        ])
    (out / "experiment.tex").write_text("\n".join(table_latex(t) for t in tables), encoding="utf-8")
    md = out / "report.md"
    md.write_text(parts["md"] + "\n", encoding="utf-8")
    page = out / "report.html"
    page.write_text(html_page(title, parts["html"]), encoding="utf-8")
    return md, page
