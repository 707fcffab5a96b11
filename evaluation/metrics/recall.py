"""Recall@k over de-duplicated documents."""

from __future__ import annotations

from typing import Literal, Sequence


def recall(
    ranked: Sequence[str], gold: set[str], k: int, denominator: Literal["gold", "capped"] = "gold"
) -> float:
    """Relevant documents among the first ``k`` divided by the number of gold documents
    (standard IR) or by ``min(k, |gold|)`` (``capped``, as TARGET reports it)."""
    if not gold:
        raise ValueError("recall is undefined for a query without gold documents")
    hits = sum(1 for d in ranked[:k] if d in gold)
    return hits / (len(gold) if denominator == "gold" else min(k, len(gold)))
