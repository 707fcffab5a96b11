"""Span-level chunking metrics, as Chroma's reference code computes them
(``chunking_evaluation/evaluation_framework/base_evaluation.py``, "Evaluating Chunking
Strategies for Retrieval").

Spans are half-open ``(start, end)`` offsets into one corpus text; units are characters,
or cl100k tokens when the spans are token offsets. For one question with reference spans
R_i and retrieved chunks c_j, *covered* is the size of (union of c_j) ∩ (union of R_i):

- recall = covered / Σ|R_i| (references summed, as Chroma sums them);
- precision = covered / Σ|c_j| (chunks summed: overlapping chunks count each time; chunks
  retrieved from other corpora count here and in IoU, never in covered);
- IoU = covered / (Σ|c_j| + Σ|R_i minus the chunks|);
- F1 = the harmonic mean of precision and recall (ours; Chroma reports no F1);
- precision-Ω = covered / |union of (every chunk of the corpus that touches a reference)
  and (the parts of references no chunk covers)|: chunks are taken as a **union**, and a
  chunk that only touches a reference at its boundary counts, as in Chroma's code.
"""

from __future__ import annotations

from typing import Iterable, Sequence

Span = tuple[int, int]


def union(spans: Iterable[Span]) -> list[Span]:
    """Merge overlapping or touching spans into disjoint sorted spans (empty spans dropped)."""
    merged: list[list[int]] = []
    for start, end in sorted(s for s in spans if s[1] > s[0]):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return [(s, e) for s, e in merged]


def length(spans: Iterable[Span]) -> int:
    """Total length of spans (overlaps counted once per span)."""
    return sum(e - s for s, e in spans)


def intersection(a: Sequence[Span], b: Sequence[Span]) -> list[Span]:
    """Intersection of two span sets, as disjoint spans."""
    out = []
    for s1, e1 in union(a):
        for s2, e2 in union(b):
            lo, hi = max(s1, s2), min(e1, e2)
            if lo < hi:
                out.append((lo, hi))
    return union(out)


def minus(span: Span, cut: Sequence[Span]) -> list[Span]:
    """The parts of ``span`` outside every span of ``cut``."""
    parts, cursor = [], span[0]
    for s, e in union(cut):
        if e <= cursor or s >= span[1]:
            continue
        if s > cursor:
            parts.append((cursor, s))
        cursor = max(cursor, e)
    if cursor < span[1]:
        parts.append((cursor, span[1]))
    return parts


def touches(a: Span, b: Span) -> bool:
    """Overlap or a shared boundary, Chroma's test for a chunk that holds a reference."""
    return max(a[0], b[0]) <= min(a[1], b[1])


def _reference_total(references: Sequence[Span]) -> int:
    total = length(references)
    if total <= 0:
        raise ValueError("span metrics need at least one non-empty reference")
    return total


def span_scores(retrieved: Sequence[Span], references: Sequence[Span], unrelated_units: int = 0) -> dict[str, float]:
    """recall, precision, f1 and iou of retrieved chunk spans against reference spans.

    ``unrelated_units``: the size of retrieved chunks from other texts (pooled retrieval),
    which cover no reference but count in precision's and IoU's denominators.
    """
    ref_total = _reference_total(references)
    covered = length(intersection(retrieved, references))
    unused = sum(length(minus(r, retrieved)) for r in references)
    retrieved_units = length(retrieved) + unrelated_units
    recall = covered / ref_total
    precision = covered / retrieved_units if retrieved_units else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    iou = covered / (retrieved_units + unused) if retrieved_units + unused else 0.0
    return {"recall": recall, "precision": precision, "f1": f1, "iou": iou}


def precision_omega(chunks: Sequence[Span], references: Sequence[Span]) -> float:
    """The precision ceiling: every chunk touching a reference, taken as a union, with the
    parts of references no chunk covers."""
    _reference_total(references)
    holding = [c for c in chunks if any(touches(c, r) for r in references)]
    covered = length(intersection(holding, references))
    if not covered:
        return 0.0
    unused = [p for r in references for p in minus(r, holding)]
    return covered / length(union(holding + unused))
