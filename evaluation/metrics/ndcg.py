"""nDCG@k with binary relevance (as ranx and trec_eval's ndcg_cut compute it)."""

from __future__ import annotations

import math
from typing import Sequence


def ndcg(ranked: Sequence[str], gold: set[str], k: int) -> float:
    """DCG of the first ``k`` documents (gain 1 / log2(rank + 1)) over the ideal DCG."""
    if not gold:
        raise ValueError("nDCG is undefined for a query without gold documents")
    dcg = sum(1 / math.log2(i + 2) for i, d in enumerate(ranked[:k]) if d in gold)
    ideal = sum(1 / math.log2(i + 2) for i in range(min(k, len(gold))))
    return dcg / ideal
