"""The experiment table, as ``pt.Experiment`` and ``ranx.compare`` present one: per dataset,
systems as rows and measures as columns, each system tested against one baseline on each
measure over the queries both scored, the p-values corrected for the table's multiple tests
(Holm), significance marked per cell and the best value per measure marked; beside it, per
system and measure, the mean difference to the baseline with its 95% interval, the effect size,
the queries won, tied and lost, and the raw and corrected p-values.

Holm's step-down correction of m p-values, sorted ascending ``p(1) <= ... <= p(m)``:
``adjusted(i) = max over j <= i of min(1, (m - j + 1) * p(j))``; a cell is significant when
its adjusted p-value is below ``alpha``. Bonferroni: ``min(1, m * p)``."""

from __future__ import annotations

import html
from typing import Literal, Mapping, Sequence

from rbench.core.configfile import did_you_mean
from rbench.evaluation.metrics_ir import Measure, measure_name
from rbench.evaluation.metrics_significance import (
    bootstrap_test,
    paired_effect,
    randomization_test,
    t_test,
    wilcoxon_test,
)

TESTS = {"randomization": randomization_test, "bootstrap": bootstrap_test, "t-test": t_test, "wilcoxon": wilcoxon_test}
"""The paired tests by name: the randomization (sign-flip) and bootstrap tests draw ``trials``
samples from ``seed``; the t-test and Wilcoxon's are scipy's."""
Test = Literal["randomization", "bootstrap", "t-test", "wilcoxon"]
Correction = Literal["holm", "bonferroni", "none"]
PerQuery = Mapping[tuple[str, str], Mapping[tuple[str, "int | None", str], float]]


def adjust(p_values: Sequence[float], correction: Correction = "holm") -> list[float]:
    """The p-values corrected for multiple tests, in the input's order (see the module's docstring)."""
    m = len(p_values)
    if correction == "none":
        return list(p_values)
    if correction == "bonferroni":
        return [min(1.0, m * p) for p in p_values]
    adjusted, running = [0.0] * m, 0.0
    for rank, i in enumerate(sorted(range(m), key=lambda i: p_values[i])):
        running = max(running, min(1.0, (m - rank) * p_values[i]))
        adjusted[i] = running
    return adjusted


def experiment_tables(per_query: PerQuery, measures: Sequence[Measure], baseline: str | None = None,
                      test: Test = "randomization", trials: int = 10_000, alpha: float = 0.05,
                      correction: Correction = "holm", seed: int = 0) -> list[dict]:
    """One table per dataset: ``{dataset, baseline, measures, test, correction, alpha, trials,
    seed, rows}``, each row ``{system, queries, cells: {measure: {mean, p, p_adjusted,
    significant, better, best, versus, differences}}}``; the baseline's cells have no p-value, the
    others' ``versus`` is :func:`~rbench.evaluation.metrics_significance.paired_effect` against it
    and ``differences`` their per-query differences to it.
    ``per_query[(dataset, system)][(metric, k, query_id)]`` holds the per-query values (``k``
    None for an ir_measures name, :mod:`rbench.evaluation.metrics_ir`). ``baseline``: a
    system's name (default: the first system, by name); a dataset without it, or an unknown
    ``test``, is a ValueError naming the choices."""
    if test not in TESTS:
        raise ValueError(f"unknown test {test!r}; choose from {', '.join(TESTS)}{did_you_mean(test, TESTS)}")
    tables = []
    for dataset in sorted({d for d, _ in per_query}):
        systems = sorted(s for d, s in per_query if d == dataset)
        base = baseline or systems[0]
        if base not in systems:
            raise ValueError(f"baseline {base!r} is not a system of dataset {dataset!r}; its systems: {systems}"
                             f"{did_you_mean(base, systems)}")
        systems = [base] + [s for s in systems if s != base]
        scores = {s: per_query[(dataset, s)] for s in systems}
        names = [measure_name(m) for m in measures]
        for (metric, k), name in zip(measures, names):
            if not any(key[0] == metric and key[1] == k for key in scores[base]):
                held = sorted({measure_name(key[:2]) for key in scores[base]})
                raise ValueError(f"dataset {dataset!r} has no {name}; it has {held}")
        rows, tested = [], []
        for system in systems:
            cells = {}
            for (metric, k), name in zip(measures, names):
                mine = {q: v for (mm, kk, q), v in scores[system].items() if mm == metric and kk == k}
                cell = {"mean": sum(mine.values()) / len(mine) if mine else float("nan"), "p": None,
                        "p_adjusted": None, "significant": False, "better": None, "best": False, "versus": None,
                        "differences": {}}
                if system != base:
                    theirs = {q: v for (mm, kk, q), v in scores[base].items() if mm == metric and kk == k}
                    both = sorted(mine.keys() & theirs.keys())
                    if both:
                        a, b = [mine[q] for q in both], [theirs[q] for q in both]
                        cell["better"] = sum(a) > sum(b)
                        cell["versus"] = paired_effect(a, b)
                        cell["differences"] = {q: x - y for q, x, y in zip(both, a, b)}
                        if a == b:  # identical scores: no test (scipy gives NaN), and none counted in the correction
                            cell["p"] = cell["p_adjusted"] = float("nan")
                        else:
                            cell["p"] = TESTS[test](a, b, trials=trials, seed=seed)
                            tested.append(cell)
                cells[name] = cell
            rows.append({"system": system, "queries": len({q for (_, _, q) in scores[system]}), "cells": cells})
        for cell, p in zip(tested, adjust([c["p"] for c in tested], correction)):
            cell["p_adjusted"] = p
            cell["significant"] = p < alpha
        for name in names:
            top = max(r["cells"][name]["mean"] for r in rows)
            for r in rows:
                r["cells"][name]["best"] = r["cells"][name]["mean"] == top
        tables.append({"dataset": dataset, "baseline": base, "measures": names, "test": test,
                       "correction": correction, "alpha": alpha, "trials": trials, "seed": seed, "rows": rows})
    return tables


def _test_name(table: Mapping) -> str:
    name = {"t-test": "t-test", "wilcoxon": "Wilcoxon signed-rank test"}.get(table["test"], f"{table['test']} test")
    drawn = (f" ({table['trials']:,} trials, seed {table['seed']})" if table["test"] in ("randomization", "bootstrap")
             else "")
    return f"paired {name}{drawn}"


def experiment_caption(table: Mapping) -> str:
    """What the marks of a table mean."""
    correction = {"holm": "Holm-corrected", "bonferroni": "Bonferroni-corrected", "none": "uncorrected"}
    return (f"{table['dataset']}: mean over queries; baseline {table['baseline']}. † a {_test_name(table)} "
            f"against the baseline ({correction[table['correction']]} over the table's "
            f"{sum(c['p'] is not None and c['p'] == c['p'] for r in table['rows'] for c in r['cells'].values())} "
            "tests) gives "
            f"p < {table['alpha']}, with ▲ better and ▼ worse than the baseline; the best value per measure "
            "is marked (* in text, bold elsewhere). p-values are the corrected ones.")


def versus_rows(table: Mapping) -> tuple[list[str], list[list[str]]]:
    """Each system against the baseline, a row per measure: the mean difference and its 95%
    interval, Cohen's d, the queries won/tied/lost, the raw and corrected p-values."""
    header = ["system", "measure", "difference", "95% interval", "effect (d)", "win/tie/loss", "p", "p corrected"]
    body = []
    for row in table["rows"]:
        for name in table["measures"]:
            cell = row["cells"][name]
            v = cell["versus"]
            if v is None:
                continue
            body.append([row["system"], name, f"{v['diff']:+.4f}", f"[{v['low']:+.4f}, {v['high']:+.4f}]",
                         f"{v['effect']:+.2f}", f"{v['wins']}/{v['ties']}/{v['losses']}", p_text(cell["p"]),
                         p_text(cell["p_adjusted"])])
    return header, body


def _aligned(header: Sequence[str], body: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in [header, *body]) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths)))
             for row in [header, *body]]
    return [lines[0], "-" * len(lines[0]), *lines[1:]]


def _cell(cell: Mapping, fmt: str) -> str:
    value = f"{cell['mean']:.4f}"
    mark = ("▲" if cell["better"] else "▼") + "†" if cell["significant"] else ""
    if fmt == "latex":
        mark = (r"$^{\dagger\uparrow}$" if cell["better"] else r"$^{\dagger\downarrow}$") if cell["significant"] else ""
        return (rf"\textbf{{{value}}}" if cell["best"] else value) + mark
    if fmt == "md":
        return (f"**{value}**" if cell["best"] else value) + mark
    if fmt == "html":
        return (f"<b>{value}</b>" if cell["best"] else value) + html.escape(mark)
    return value + ("*" if cell["best"] else "") + mark


def p_text(p: float) -> str:
    """A p-value as the tables show it: 4 decimals, or 2 significant digits below 0.0001; ``nan``
    (scipy's answer) for no test: scores identical to the baseline's on every query."""
    if p != p:
        return "nan"
    return f"{p:.4f}" if p >= 0.0001 or p == 0 else f"{p:.1e}"


def _p(cell: Mapping) -> str:
    return "" if cell["p_adjusted"] is None else p_text(cell["p_adjusted"])


def _grid(table: Mapping, fmt: str) -> tuple[list[str], list[list[str]]]:
    header = ["system", *table["measures"], *(f"p {m}" for m in table["measures"])]
    body = [[r["system"] + (" (baseline)" if r["system"] == table["baseline"] else ""),
             *(_cell(r["cells"][m], fmt) for m in table["measures"]),
             *(_p(r["cells"][m]) for m in table["measures"])] for r in table["rows"]]
    return header, body


def table_text(table: Mapping) -> str:
    """The table as aligned plain text, for the console, with the comparisons against the baseline."""
    header, body = _grid(table, "text")
    lines = [*_aligned(header, body), experiment_caption(table)]
    versus = versus_rows(table)
    if versus[1]:
        lines += ["", f"against {table['baseline']}: {_test_name(table)}, {table['correction']} correction",
                  *_aligned(*versus)]
    return "\n".join(lines)


def table_markdown(table: Mapping) -> str:
    """The table as Markdown, with its caption and the comparisons against the baseline."""
    parts = [_markdown(*_grid(table, "md")), experiment_caption(table)]
    versus = versus_rows(table)
    if versus[1]:
        parts.append(_markdown(*versus))
    return "\n\n".join(parts)


def _markdown(header: Sequence[str], body: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header), *("| " + " | ".join(r) + " |" for r in body)]
    return "\n".join(lines)


def _html(header: Sequence[str], body: Sequence[Sequence[str]], escape: bool = True) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    rows = "".join("<tr>" + "".join(f"<td>{html.escape(c) if escape else c}</td>" for c in r) + "</tr>" for r in body)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>"


def table_html(table: Mapping) -> str:
    """The table as HTML, with its caption and the comparisons against the baseline."""
    versus = versus_rows(table)
    return (_html(*_grid(table, "html"), escape=False) + f"<p>{html.escape(experiment_caption(table))}</p>"
            + (_html(*versus) if versus[1] else ""))


def table_latex(table: Mapping) -> str:
    """The table as a LaTeX ``table`` with a booktabs ``tabular`` (p-values left out, marks kept)."""
    header, body = _grid(table, "latex")
    n = len(table["measures"])

    def tex(text: str) -> str:
        return text.replace("_", r"\_").replace("@", r"@").replace("&", r"\&").replace("%", r"\%")

    lines = [r"\begin{table}", r"\centering", rf"\begin{{tabular}}{{l{'r' * n}}}", r"\toprule",
             " & ".join(tex(h) for h in header[:n + 1]) + r" \\", r"\midrule"]
    lines += [" & ".join([tex(r[0]), *r[1:n + 1]]) + r" \\" for r in body]
    marks = r"$^{\dagger\uparrow}$ / $^{\dagger\downarrow}$: significantly better / worse than the baseline"
    lines += [r"\bottomrule", r"\end{tabular}",
              rf"\caption{{{tex(table['dataset'])}: mean over queries; baseline {tex(table['baseline'])}; {marks} "
              rf"(paired {table['test']} test, {table['correction']} correction, $p < {table['alpha']}$); best in "
              r"bold.}", r"\end{table}"]
    return "\n".join(lines) + "\n"
