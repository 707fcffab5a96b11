"""Paired tests: exact small cases, agreement with scipy's permutation test, and bad input."""

from __future__ import annotations

import numpy as np
import pytest

from rbench.evaluation.metrics_significance import (
    bootstrap_test,
    paired_effect,
    randomization_test,
    t_test,
    wilcoxon_test,
)
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


def test_t_test_and_wilcoxon_by_hand():
    """Differences (1, 2, 3): mean 2, sd 1, t = 2 / (1 / sqrt 3) = 3.4641 on 2 degrees of freedom,
    two-sided p = 1 - t / sqrt(t^2 + 2) = 0.0742 (the t distribution's closed form for 2 df).
    Wilcoxon, exact: ranks 1, 2, 3 all positive, W+ = 6 is the largest of 2^3 = 8 equally likely sums,
    two-sided p = 2 / 8 = 0.25."""
    a, b = [1.0, 2.0, 3.0], [0.0, 0.0, 0.0]
    t = 2 / (1 / np.sqrt(3))
    assert t_test(a, b) == pytest.approx(1 - t / np.sqrt(t * t + 2), abs=1e-9)
    assert wilcoxon_test(a, b) == pytest.approx(0.25)
    assert np.isnan(t_test(b, b)) and np.isnan(wilcoxon_test(b, b))  # scipy: no test for identical scores
    assert t_test([1.0, 1.0], [0.0, 0.0]) == 0.0  # a constant difference: t is infinite


def test_paired_effect_by_hand():
    """Differences (1, 2, 3, 0): mean 1.5, sd sqrt(5/3) = 1.2910, Cohen's d = 1.1619; the 95%
    interval 1.5 +- t(0.975, 3) * 1.2910 / 2 = 1.5 +- 3.1824 * 0.6455 = [-0.5543, 3.5543];
    3 wins, 1 tie, 0 losses."""
    v = paired_effect([1.0, 2.0, 3.0, 5.0], [0.0, 0.0, 0.0, 5.0])
    sd = np.sqrt(5 / 3)
    assert v["diff"] == 1.5 and v["effect"] == pytest.approx(1.5 / sd)
    assert v["low"] == pytest.approx(1.5 - 3.182446305 * sd / 2) and v["high"] == pytest.approx(1.5 + 3.182446305 * sd / 2)
    assert (v["wins"], v["ties"], v["losses"]) == (3, 1, 0)
    assert paired_effect([0.5], [0.25]) == {"diff": 0.25, "low": 0.25, "high": 0.25, "effect": 0.0, "wins": 1,
                                            "ties": 0, "losses": 0}
