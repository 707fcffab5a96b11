"""Span-level chunking metrics (Chroma's "Evaluating Chunking Strategies for Retrieval").

Spans are half-open ``(start, end)`` offsets into one corpus text. For one question:
recall = reference units covered by retrieved chunks / reference units; precision =
reference units covered / total units of the retrieved chunks (overlapping chunks counted
each time, as Chroma counts them); IoU = covered / (reference units + retrieved units -
covered); precision-Omega = the precision of the set of *all* chunks that overlap a
reference, the best any covering set could reach. Units are characters, or tokens when
the spans are token offsets.
"""

from __future__ import annotations

from typing import Iterable, Sequence

Span = tuple[int, int]


def union(spans: Iterable[Span]) -> list[Span]:
    """Merge overlapping or touching spans into disjoint sorted spans."""
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


def span_scores(retrieved: Sequence[Span], references: Sequence[Span], unrelated_units: int = 0) -> dict[str, float]:
    """recall, precision, f1 and iou of retrieved chunk spans against reference spans.

    ``unrelated_units``: the size of retrieved chunks from other texts (pooled retrieval),
    which cover no reference but count in precision's and IoU's denominators.
    """
    ref_units = length(union(references))
    if ref_units == 0:
        raise ValueError("span metrics need at least one non-empty reference")
    covered = length(intersection(retrieved, references))
    retrieved_units = length(retrieved) + unrelated_units
    recall = covered / ref_units
    precision = covered / retrieved_units if retrieved_units else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    iou = covered / (ref_units + retrieved_units - covered)
    return {"recall": recall, "precision": precision, "f1": f1, "iou": iou}


def precision_omega(chunks: Sequence[Span], references: Sequence[Span]) -> float:
    """Precision of every chunk that overlaps a reference: the ceiling for any retrieval."""
    overlapping = [c for c in chunks if intersection([c], references)]
    return span_scores(overlapping, references)["precision"] if overlapping else 0.0
