"""Fusion of rankings, one module for the fusion retriever and ``rbench fuse``, with ranx's
conventions throughout (``ranx.fuse``; files and lines of ranx 0.3.21):

- ``rrf``: ``score(d) = sum over rankings r of w_r / (k + rank_r(d))``, ranks from 1 in each
  ranking's order (``ranx/fusion/rrf.py`` line 22, ``_rrf_score``: ``1 / (k + i + 1)`` for the
  i-th document from 0), k = 60 by default as there, weights 1 unless given (ranx has none); a
  ranking without d adds nothing. ranx min-max normalises each run first (``ranx/meta/fuse.py``
  line 10, ``norm="min-max"``), which keeps every order, so RRF is the same.
- normalisation, per query: ``min-max``, ``(s - min) / max(max - min, 1e-9)``
  (``ranx/normalization/min_max_norm.py`` lines 23-24), so a ranking whose scores are all equal
  scores 0; ``zmuv``, ``(s - mean) / max(std, 1e-9)`` with the population deviation
  (``ranx/normalization/zmuv_norm.py`` lines 17-26).
- ``combsum``: the sum of each ranking's normalised scores; a ranking without d adds 0
  (``ranx/fusion/comb_sum.py``); ``wsum``, the same weighted (``ranx/fusion/wsum.py``,
  ``res.get(doc_id, 0.0)``).
- ``combmnz``: CombSUM times the number of rankings that retrieved d (``ranx/fusion/comb_mnz.py`` lines 25-26).

The fused ranking is by score, ties by document id; each ranking is read best first (a run file
by score, ties in its file's order: :func:`rbench.evaluation.runs.read_trec_run`)."""

from __future__ import annotations

import statistics
from typing import Literal, Sequence

from rbench.evaluation.runs import DocRanking, trec_id

Ranking = Sequence[tuple[str, float]]
Method = Literal["rrf", "combsum", "combmnz", "wsum"]
Norm = Literal["min-max", "zmuv"]
METHODS: tuple[str, ...] = ("rrf", "combsum", "combmnz")
"""The methods ``rbench fuse`` offers (the fusion retriever adds ``wsum``, weighted)."""


def normalize(ranking: Ranking, norm: Norm = "min-max") -> dict[str, float]:
    """One ranking's scores rescaled as ranx rescales them (see the module's docstring)."""
    if not ranking:
        return {}
    scores = [s for _, s in ranking]
    if norm == "min-max":
        low, high = min(scores), max(scores)
        return {d: (s - low) / max(high - low, 1e-9) for d, s in ranking}
    mean, std = statistics.fmean(scores), statistics.pstdev(scores)
    return {d: (s - mean) / max(std, 1e-9) for d, s in ranking}


def fuse_ranking(rankings: Sequence[Ranking], method: Method = "rrf", k: float = 60,
                 weights: Sequence[float] | None = None, norm: Norm = "min-max",
                 ties: Literal["id", "first_seen"] = "id") -> list[tuple[str, float]]:
    """One query's rankings fused by ``method``: documents best first, ties by id (``first_seen``: in
    the order first met, the first ranking first, each by rank)."""
    weights = list(weights) if weights is not None else [1.0] * len(rankings)
    scores: dict[str, float] = {}
    hits: dict[str, int] = {}
    for weight, ranking in zip(weights, rankings):
        parts = ({d: 1.0 / (k + rank) for rank, (d, _) in enumerate(ranking, 1)} if method == "rrf"
                 else normalize(ranking, norm))
        for doc, value in parts.items():
            scores[doc] = scores.get(doc, 0.0) + weight * value
            hits[doc] = hits.get(doc, 0) + 1
    if method == "combmnz":
        scores = {d: s * hits[d] for d, s in scores.items()}
    if ties == "first_seen":
        return sorted(scores.items(), key=lambda item: -item[1])
    return sorted(scores.items(), key=lambda item: (-item[1], item[0]))


def fuse(runs: Sequence[DocRanking], method: Method = "rrf", k: float = 60, depth: int | None = None) -> DocRanking:
    """The fusion of ``runs`` by ``method`` (see the module's docstring), each query's documents
    best first, the first ``depth`` of them (all when None)."""
    if method not in METHODS:
        raise ValueError(f"unknown fusion method {method!r}; choose from {', '.join(METHODS)}")
    if len(runs) < 2:
        raise ValueError(f"fusion needs two runs or more, got {len(runs)}")
    return {qid: fuse_ranking([run.get(qid, []) for run in runs], method, k)[:depth]
            for qid in sorted({q for run in runs for q in run})}


def fused_trec(ranking: DocRanking, tag: str) -> str:
    """A fused ranking as a TREC run file: the fused scores as they are (to 12 significant
    digits; ties stay ties), ids percent-encoded as rbench writes them."""
    lines = [f"{trec_id(q)} Q0 {trec_id(d)} {rank} {score:.12g} {trec_id(tag)}"
             for q, docs in ranking.items() for rank, (d, score) in enumerate(docs, 1)]
    return "\n".join(lines) + ("\n" if lines else "")
