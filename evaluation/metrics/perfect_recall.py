"""Perfect Recall@k: did the first k documents include every gold document?"""

from __future__ import annotations

from typing import Sequence


def perfect_recall(ranked: Sequence[str], gold: set[str], k: int) -> float:
    """1.0 when all gold documents are among the first ``k``, else 0.0."""
    if not gold:
        raise ValueError("perfect recall is undefined for a query without gold documents")
    return float(gold <= set(ranked[:k]))
