"""MRR@k: reciprocal rank of the first relevant document within the first k."""

from __future__ import annotations

from typing import Sequence


def mrr(ranked: Sequence[str], gold: set[str], k: int) -> float:
    """``1 / rank`` of the first gold document among the first ``k``, else 0."""
    for i, d in enumerate(ranked[:k], 1):
        if d in gold:
            return 1.0 / i
    return 0.0
