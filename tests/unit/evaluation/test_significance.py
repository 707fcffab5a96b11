"""Paired tests: exact small cases, agreement with scipy's permutation test, and bad input."""

from __future__ import annotations

import numpy as np
import pytest

from rbench.evaluation.metrics_significance import bootstrap_test, randomization_test
from tests.conftest import need


def test_identical_systems_are_not_different():
    a = [0.2, 0.5, 1.0, 0.0]
    assert randomization_test(a, a, trials=500) == 1.0
    assert bootstrap_test(a, a, trials=500) == 1.0


def test_exact_two_query_case():
    # differences (1, 1): of the 4 sign patterns, 2 reach |mean| = 1, so p -> 0.5
    p = randomization_test([1.0, 1.0], [0.0, 0.0], trials=20_000, seed=1)
    assert p == pytest.approx(0.5, abs=0.02)


def test_clear_difference_is_significant():
    rng = np.random.default_rng(0)
    b = rng.random(200)
    a = b + 0.2 + rng.normal(0, 0.05, 200)
    assert randomization_test(a, b, trials=2000) < 0.01
    assert bootstrap_test(a, b, trials=2000) < 0.01


def test_agrees_with_scipy_permutation_test():
    stats = need("scipy.stats")
    rng = np.random.default_rng(3)
    a, b = rng.random(40), rng.random(40) * 0.9
    ours = randomization_test(a, b, trials=20_000, seed=5)
    theirs = stats.permutation_test((a, b), lambda x, y: np.mean(x - y), permutation_type="samples",
                                    n_resamples=20_000, alternative="two-sided", random_state=5).pvalue
    assert ours == pytest.approx(theirs, abs=0.02)


def test_unpaired_input_is_an_error():
    with pytest.raises(ValueError, match="same queries"):
        randomization_test([1.0], [1.0, 0.0])
