"""Span metrics against hand-computed cases: overlapping chunks, references spanning two
chunks, several references per question."""

from __future__ import annotations

import pytest

from rbench.evaluation.metrics_spans import (
    intersection,
    precision_omega,
    span_scores,
    union,
)


def test_union_and_intersection():
    assert union([(5, 8), (0, 3), (2, 4), (8, 9)]) == [(0, 4), (5, 9)]
    assert intersection([(0, 10)], [(2, 4), (8, 12)]) == [(2, 4), (8, 10)]


def test_reference_inside_one_chunk():
    # chunk 0-100 retrieved, reference 10-30: all covered, 20 of 100 retrieved chars relevant
    s = span_scores([(0, 100)], [(10, 30)])
    assert s["recall"] == 1.0 and s["precision"] == 0.2
    assert s["iou"] == pytest.approx(20 / 100)
    assert s["f1"] == pytest.approx(2 * 0.2 / 1.2)


def test_reference_spanning_two_chunks_only_one_retrieved():
    # chunks 0-50 and 50-100; reference 40-60; only 0-50 retrieved: 10 of 20 covered
    s = span_scores([(0, 50)], [(40, 60)])
    assert s["recall"] == 0.5 and s["precision"] == 10 / 50
    assert s["iou"] == pytest.approx(10 / (20 + 50 - 10))


def test_overlapping_chunks_count_each_time_in_precision():
    # chunks 0-60 and 40-100 overlap by 20; reference 45-55 lies in the overlap
    s = span_scores([(0, 60), (40, 100)], [(45, 55)])
    assert s["recall"] == 1.0
    assert s["precision"] == pytest.approx(10 / 120)  # 120 retrieved chars, not 100
    assert s["iou"] == pytest.approx(10 / (10 + 120 - 10))


def test_several_references():
    # references 0-10 and 90-100; retrieved chunk 0-50 covers the first only
    s = span_scores([(0, 50)], [(0, 10), (90, 100)])
    assert s["recall"] == 0.5 and s["precision"] == 10 / 50


def test_nothing_retrieved_and_no_reference():
    assert span_scores([], [(0, 10)]) == {"recall": 0.0, "precision": 0.0, "f1": 0.0, "iou": 0.0}
    with pytest.raises(ValueError):
        span_scores([(0, 10)], [])


def test_precision_omega_uses_all_overlapping_chunks():
    chunks = [(0, 50), (50, 100), (100, 150)]
    # reference 40-60 touches the first two chunks: 20 relevant of 100 characters
    assert precision_omega(chunks, [(40, 60)]) == pytest.approx(0.2)
    assert precision_omega(chunks, [(40, 60), (120, 130)]) == pytest.approx(30 / 150)


def test_precision_omega_takes_the_union_of_overlapping_chunks_and_counts_touching_ones():
    # chunks of 20 overlapping by 10; reference 10-30. Chunks (0,20), (10,30), (20,40) overlap it
    # and (30,50) touches its end: their union is 0-50, so 20 / 50. Summing lengths would give
    # 20 / 80 (or 20 / 60 without the touching chunk).
    chunks = [(0, 20), (10, 30), (20, 40), (30, 50), (40, 60)]
    assert precision_omega(chunks, [(10, 30)]) == pytest.approx(0.4)


def test_precision_omega_counts_the_uncovered_part_of_a_reference():
    # the chunks end at 50; reference 40-70 is covered 40-50 only, by chunk 25-50 (0-25 does not
    # hold it): 10 / |25-50 and 50-70| = 10 / 45
    assert precision_omega([(0, 25), (25, 50)], [(40, 70)]) == pytest.approx(10 / 45)


def test_overlapping_references_are_summed_as_chroma_sums_them():
    # references 10-30 and 20-40 overlap; chunk 0-25 covers 10-25 (15 units)
    s = span_scores([(0, 25)], [(10, 30), (20, 40)])
    assert s["recall"] == pytest.approx(15 / 40)        # 20 + 20, not |10-40| = 30
    assert s["precision"] == pytest.approx(15 / 25)
    assert s["iou"] == pytest.approx(15 / (25 + 5 + 15))  # uncovered: 25-30 of one, 25-40 of the other


def test_pooled_chunks_from_other_corpora_count_in_precision_and_iou_only():
    s = span_scores([(0, 20)], [(10, 30)], unrelated_units=15)
    assert s["recall"] == 0.5
    assert s["precision"] == pytest.approx(10 / 35)
    assert s["iou"] == pytest.approx(10 / (35 + 10))


def _chroma_steps(chunks, references, retrieved):
    """Chroma's per-question procedure, step by step: walk chunks and references pairwise,
    keep a running list of uncovered reference pieces and a running union of intersections
    and of holding chunks (re-stated from base_evaluation.py's logic)."""
    def merge(ranges):
        out = []
        for s, e in sorted(ranges):
            if out and s <= out[-1][1]:
                out[-1] = (out[-1][0], max(out[-1][1], e))
            else:
                out.append((s, e))
        return out

    def drop(ranges, cut):
        cs, ce = cut
        kept = []
        for s, e in ranges:
            if e < cs or s > ce:
                kept.append((s, e))
            elif s < cs and e > ce:
                kept += [(s, cs), (ce, e)]
            elif s < cs:
                kept.append((s, cs))
            elif e > ce:
                kept.append((ce, e))
        return kept

    def walk(chunk_list):
        numerator, holding, unused = [], [], list(references)
        for c in chunk_list:
            for r in references:
                lo, hi = max(c[0], r[0]), min(c[1], r[1])
                if lo <= hi:
                    unused = drop(unused, (lo, hi))
                    numerator = merge([(lo, hi)] + numerator)
                    holding = merge([c] + holding)
        return sum(e - s for s, e in numerator), holding, unused

    covered, holding, unused = walk(chunks)
    omega = covered / sum(e - s for s, e in merge(holding + unused)) if covered else 0.0
    covered, _, unused = walk(retrieved)
    size = sum(e - s for s, e in retrieved)
    return {"recall": covered / sum(e - s for s, e in references), "precision": covered / size,
            "iou": covered / (size + sum(e - s for s, e in unused)), "precision_omega": omega}


def test_random_overlapping_cases_equal_chromas_procedure():
    import random

    rng = random.Random(0)
    for _ in range(300):
        size, step = rng.randint(5, 40), rng.randint(1, 40)
        chunks = [(s, s + size) for s in range(0, 200, min(step, size))]
        references = []
        for _ in range(rng.randint(1, 3)):
            start = rng.randint(0, 180)
            references.append((start, start + rng.randint(1, 40)))
        retrieved = rng.sample(chunks, rng.randint(1, min(5, len(chunks))))
        want = _chroma_steps(chunks, references, retrieved)
        got = {**span_scores(retrieved, references), "precision_omega": precision_omega(chunks, references)}
        for metric, value in want.items():
            assert got[metric] == pytest.approx(value), (metric, chunks[:3], references, retrieved)
