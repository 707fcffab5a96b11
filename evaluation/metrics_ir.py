"""Measures as the field names them, in ir_measures' syntax (``P@10``, ``AP``, ``nDCG@10``,
``R@100``, ``RR``, ``Rprec``, ``Bpref``, ``Success@10``, ``Judged@10``, ``RBP(rel=1)``; see
https://ir-measur.es/), computed by ir_measures itself on a run and its qrels, beside rbench's own
measures, which keep their names (``recall@5``, ``ndcg@10``, ``map@all``: :data:`rbench.evaluation.names.MEASURES`).

A measure is a ``(metric, k)`` pair everywhere a table reads one: rbench's ``("recall", 5)``,
``("map", 0)`` for the whole ranking, and an ir_measures name as ``("P@10", None)``.

Which queries count: every query of the qrels with a relevant document (grade > 0), as in
rbench's own measures; a query the run lacks scores 0 (``trec_eval -c``). ir_measures reads the
run by score, so rbench's run files, whose scores strictly decrease in rbench's order
(:func:`rbench.evaluation.runs.file_scores`), are scored in rbench's order."""

from __future__ import annotations

import subprocess
from typing import Mapping, Sequence

from rbench.evaluation.names import MEASURES

Measure = tuple[str, "int | None"]


def measure_name(measure: Measure) -> str:
    """How a measure is shown: ``recall@5``, ``map@all``, or the ir_measures name as given."""
    metric, k = measure
    return metric if k is None else f"{metric}@{k or 'all'}"


def parse_measure(text: str) -> Measure:
    """``"ndcg@10"`` as ``("ndcg", 10)``, ``"map@all"`` as ``("map", 0)``, ``"P@10"`` as
    ``("P@10", None)``, trec_eval's ``"ndcg_cut_10"`` as ir_measures' ``("nDCG@10", None)``; a
    ValueError names the three forms."""
    name, at, k = text.partition("@")
    if name in MEASURES:
        if at and k == "all":
            return name, 0
        if at and k.isdigit() and int(k) >= 1:
            return name, int(k)
        raise ValueError(f"measure {text!r} must be METRIC@K, such as recall@5, ndcg@10 or map@all")
    import ir_measures

    try:
        ir_measures.parse_measure(text)
    except (ValueError, NameError, SyntaxError, TypeError, AttributeError) as e:
        try:  # trec_eval's name (ndcg_cut_10, P_5, recip_rank): ir_measures' own mapping
            (measure,) = ir_measures.parse_trec_measure(text)
        except (ValueError, NameError, SyntaxError, TypeError, AttributeError):
            import difflib

            close = difflib.get_close_matches(name.lower(), MEASURES, n=1, cutoff=0.75)
            guess = f" Did you mean {close[0]}@{k or 'K'}?" if close and name.lower() != close[0] else ""
            raise ValueError(f"measure {text!r} is neither one of rbench's (METRIC@K with METRIC one of "
                             f"{', '.join(MEASURES)}: recall@5, map@all), nor an ir_measures name (P@10, AP, nDCG@10, "
                             f"R@100, RR, Bpref; https://ir-measur.es/), nor trec_eval's (ndcg_cut_10, P_5): {e}."
                             f"{guess}") from None
        return str(measure), None
    return text, None


def is_ir_measure(measure: Measure) -> bool:
    """Whether ir_measures computes it (rbench's own measures have a cut-off)."""
    return measure[1] is None


def ir_per_query(measures: Sequence[Measure], qrels: Mapping[str, Mapping[str, int]],
                 run: Mapping[str, Mapping[str, float]]) -> dict[tuple[str, None, str], float]:
    """Per-query values of ir_measures ``measures``, keyed ``(name, None, query_id)`` as
    experiment tables read them: every query of ``qrels`` with a relevant document, 0 where ``run``
    lacks it. A measure whose provider is not installed is a ValueError naming it."""
    import ir_measures

    wanted = [m for m in measures if is_ir_measure(m)]
    if not wanted:
        return {}
    parsed = {ir_measures.parse_measure(name): name for name, _ in wanted}
    judged = {q: dict(docs) for q, docs in qrels.items() if any(g > 0 for g in docs.values())}
    ran = {q: dict(docs) for q, docs in run.items() if q in judged and docs}
    out = {(name, None, q): 0.0 for name, _ in wanted for q in judged}
    if not ran:
        return out
    try:
        for metric in ir_measures.iter_calc(list(parsed), judged, ran):
            out[(parsed[metric.measure], None, metric.query_id)] = float(metric.value)
    except (ValueError, RuntimeError, OSError, subprocess.SubprocessError) as e:
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise ValueError(f"ir_measures could not compute {', '.join(n for n, _ in wanted)}: {first}") from None
    return out
