"""Span metrics against hand-computed cases: overlapping chunks, references spanning two
chunks, several references per question."""

from __future__ import annotations

import pytest

from evaluation.span_metrics import intersection, precision_omega, span_scores, union


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
