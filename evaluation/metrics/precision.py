"""Precision@k over de-duplicated documents."""

from __future__ import annotations

from typing import Literal, Sequence


def precision(
    ranked: Sequence[str], gold: set[str], k: int, denominator: Literal["k", "retrieved"] = "k"
) -> float:
    """Relevant documents among the first ``k``, divided by ``k`` (standard IR) or by the
    number of documents actually kept when fewer than ``k`` were retrieved (``retrieved``,
    as in the ARM reproduction)."""
    top = ranked[:k]
    hits = sum(1 for d in top if d in gold)
    denom = k if denominator == "k" else len(top)
    return hits / denom if denom else 0.0
