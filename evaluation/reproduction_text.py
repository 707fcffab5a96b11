"""A reproduction document (:func:`rbench.evaluation.reproduction.document`) as text: its table
rows, the notes of its cells, a one-line summary and a caption."""

from __future__ import annotations

from typing import Mapping

HEADER = ("system", "dataset", "metric", "published (n)", "measured (n)", "delta", "95% interval of the delta",
          "verdict")


def rows(doc: Mapping, missing: bool = True) -> list[list[str]]:
    """A comparison document's cells as table rows under :data:`HEADER`; a run's own name for
    a published system or dataset follows it in brackets, an inferred published sample size is
    marked ``~``, and the interval is of the difference when the published sample size is known
    (else the run's bootstrap interval, shifted by the published value). Without ``missing``, the
    cells the run does not have are left out (:func:`not_in_the_run` sums them up). Published values
    are printed at the table's own digits (``decimals``; four where it declares none), the run's mean
    and delta at as many, and at least four (a 0.64508 beside a published 0.64508 read 0.6451)."""
    out, digits = [], doc.get("decimals") or 4
    measured_digits = max(digits, 4)
    for c in doc["cells"]:
        if c["measured"] is None and not missing:
            continue
        n = c.get("published_queries")
        published_n = "" if n is None else f" ({'~' if c.get('published_queries_inferred') else ''}{n})"
        names = [c["system"] if c["run_system"] == c["system"] else f"{c['system']} ({c['run_system']})",
                 c["dataset"] if c["run_dataset"] == c["dataset"] else f"{c['dataset']} ({c['run_dataset']})",
                 f"{c['metric']}@{c['k']}", f"{c['published']:.{digits}f}{published_n}"]
        if c["measured"] is None:
            out.append(names + ["", "", "", f"missing: {c['missing']}"])
            continue
        low, high = ((c["diff_low"], c["diff_high"]) if c.get("diff_low") is not None
                     else (c["ci_low"] - c["published"], c["ci_high"] - c["published"]))
        verdict = c.get("verdict") or ("inside" if c["inside"] else "outside")
        if c.get("reason"):
            verdict += f": {c['reason']}"
        interval = "none: the same computation" if c.get("exact") else f"[{low:+.4f}, {high:+.4f}]"
        out.append(names + [f"{c['measured']:.{measured_digits}f} ({c['queries']})", f"{c['delta']:+.{measured_digits}f}",
                            interval, verdict])
    return out


def not_in_the_run(doc: Mapping) -> str:
    """One line on the published cells the run does not have, by system and dataset ("" when it has them all)."""
    absent = [c for c in doc["cells"] if c["measured"] is None]
    if not absent:
        return ""

    def names(key: str) -> str:
        found = list(dict.fromkeys(c[key] for c in absent))
        return ", ".join(found[:8]) + (f" and {len(found) - 8} more" if len(found) > 8 else "")

    pairs = len({(c["system"], c["dataset"]) for c in absent})
    return (f"Not in the run: {len(absent)} published cells of {pairs} system x dataset pairs (systems "
            f"{names('system')}; datasets {names('dataset')}); `--all` lists them")


def cell_notes(doc: Mapping) -> list[str]:
    """The distinct reviewed notes of the cells outside their interval or off by some queries, in cell order."""
    seen: list[str] = []
    for c in doc["cells"]:
        off = c.get("verdict") == "outside" or bool(c.get("off_by"))
        if c.get("note") and off and c["note"] not in seen:
            seen.append(c["note"])
    return seen


def ceilings_line(ceilings: Mapping[str, Mapping]) -> str:
    """One line on each dataset's evaluated queries whose gold documents are not all in the corpus,
    with the recall and perfect recall no retriever can pass ("" when no dataset was counted)."""
    if not ceilings:
        return ""
    parts = []
    for dataset, c in ceilings.items():
        queries = f" of {c['queries']:.0f}" if c.get("queries") is not None else ""
        if not c.get("gold_outside_corpus"):
            parts.append(f"{dataset}: none{queries}")
        else:
            parts.append(f"{dataset}: {c['gold_outside_corpus']:.0f}{queries} queries (recall ceiling "
                         f"{c['recall_ceiling']:.3f}, perfect recall ceiling {c['perfect_recall_ceiling']:.3f})")
    return ("Gold outside the corpus (queries some of whose gold documents the corpus lacks, and what no retriever "
            "can pass): " + "; ".join(parts))


def summary(doc: Mapping) -> str:
    """One line: how many measured cells equal the published value or are off by some queries (the
    same computation), how many hold it in their interval or are outside, not comparable, or not
    in the run."""
    verdicts = [c.get("verdict") or ("inside" if c["inside"] else "outside") if c["measured"] is not None
                else "missing" for c in doc["cells"]]
    off = sum(v.startswith("off by") for v in verdicts)
    count = {v: verdicts.count(v) for v in ("equal", "inside", "outside", "not comparable", "missing")}
    exact = f"{count['equal']} equal, {off} off by some queries, " if count["equal"] or off else ""
    return (f"{exact}{count['inside']} inside, {count['outside']} outside, {count['not comparable']} not comparable, "
            f"{count['missing']} not in the run, of {len(verdicts)} published cells")


def reproduction_caption(doc: Mapping) -> str:
    """The run, where the published numbers come from, and how the interval was drawn."""
    source, boot = doc["source"], doc["bootstrap"]
    return (f"Run {doc['run']}. Published: {source['reference']} ({source['url']}, read {source['read']}). "
            "Where the run is the same computation as the published one (same model-free method, corpus form, "
            "protocol and queries), the verdict is exact: equal at the printed digits, or off by the fewest "
            "queries whose score must change to explain the gap. Elsewhere the interval: of the difference, run "
            "mean minus published mean, over both query samples (normal approximation, widened by the published "
            "rounding) where the published sample size is known (~: inferred); else the run's percentile bootstrap interval of the mean "
            f"({boot['trials']} resamples, seed {boot['seed']}) minus the published value.")
