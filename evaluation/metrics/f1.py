"""F1@k: harmonic mean of precision@k and recall@k."""

from __future__ import annotations

from typing import Literal, Sequence

from rbench.evaluation.metrics.precision import precision
from rbench.evaluation.metrics.recall import recall


def f1(
    ranked: Sequence[str],
    gold: set[str],
    k: int,
    precision_denominator: Literal["k", "retrieved"] = "k",
    recall_denominator: Literal["gold", "capped"] = "gold",
) -> float:
    """``2PR / (P + R)`` with the same definitional options as precision and recall; 0 when both are 0."""
    p = precision(ranked, gold, k, precision_denominator)
    r = recall(ranked, gold, k, recall_denominator)
    return 2 * p * r / (p + r) if p + r else 0.0
