"""Fusing finished runs (``rbench fuse``) as ranx fuses them (``ranx.fuse``; files and lines of ranx 0.3.21):

- ``rrf``: ``score(d) = sum over runs r of 1 / (k + rank_r(d))``, ranks from 1 in each run's
  order (``ranx/fusion/rrf.py`` line 22, ``_rrf_score``: ``1 / (k + i + 1)`` for the i-th document from 0),
  k = 60 by default as there; a run without d adds nothing. ranx min-max normalises each run
  first (``ranx/meta/fuse.py`` line 10, ``norm="min-max"``), which keeps every order, so RRF is the same.
- ``combsum``: the sum of each run's min-max normalised scores, ``(s - min) / max(max - min,
  1e-9)`` per query (``ranx/normalization/min_max_norm.py`` lines 23-24); a run without d
  adds 0 (``ranx/fusion/comb_sum.py``).
- ``combmnz``: CombSUM times the number of runs that retrieved d (``ranx/fusion/comb_mnz.py`` lines 25-26).

The fused ranking is by score, ties by document id; each run is read best first (by score, ties
in its file's order: :func:`rbench.evaluation.runs.read_trec_run`)."""

from __future__ import annotations

from typing import Literal, Sequence

from rbench.evaluation.runs import DocRanking, trec_id

Method = Literal["rrf", "combsum", "combmnz"]
METHODS: tuple[str, ...] = ("rrf", "combsum", "combmnz")


def _min_max(docs: Sequence[tuple[str, float]]) -> dict[str, float]:
    if not docs:
        return {}
    low, high = min(s for _, s in docs), max(s for _, s in docs)
    return {d: (s - low) / max(high - low, 1e-9) for d, s in docs}


def fuse(runs: Sequence[DocRanking], method: Method = "rrf", k: float = 60, depth: int | None = None) -> DocRanking:
    """The fusion of ``runs`` by ``method`` (see the module's docstring), each query's documents
    best first, the first ``depth`` of them (all when None)."""
    if method not in METHODS:
        raise ValueError(f"unknown fusion method {method!r}; choose from {', '.join(METHODS)}")
    if len(runs) < 2:
        raise ValueError(f"fusion needs two runs or more, got {len(runs)}")
    fused: DocRanking = {}
    for qid in sorted({q for run in runs for q in run}):
        scores: dict[str, float] = {}
        hits: dict[str, int] = {}
        for run in runs:
            docs = run.get(qid, [])
            parts = ({d: 1.0 / (k + rank) for rank, (d, _) in enumerate(docs, 1)} if method == "rrf"
                     else _min_max(docs))
            for doc, value in parts.items():
                scores[doc] = scores.get(doc, 0.0) + value
                hits[doc] = hits.get(doc, 0) + 1
        if method == "combmnz":
            scores = {d: s * hits[d] for d, s in scores.items()}
        fused[qid] = sorted(scores.items(), key=lambda item: (-item[1], item[0]))[:depth]
    return fused


def fused_trec(ranking: DocRanking, tag: str) -> str:
    """A fused ranking as a TREC run file: the fused scores as they are (to 12 significant
    digits; ties stay ties), ids percent-encoded as rbench writes them."""
    lines = [f"{trec_id(q)} Q0 {trec_id(d)} {rank} {score:.12g} {trec_id(tag)}"
             for q, docs in ranking.items() for rank, (d, score) in enumerate(docs, 1)]
    return "\n".join(lines) + ("\n" if lines else "")
