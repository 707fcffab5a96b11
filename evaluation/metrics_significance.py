"""Paired significance tests over per-query scores of two systems on the same queries."""

from __future__ import annotations

from typing import Sequence

import numpy as np


def _differences(a: Sequence[float], b: Sequence[float]) -> np.ndarray:
    if len(a) != len(b):
        raise ValueError(f"paired tests need scores for the same queries: got {len(a)} and {len(b)}")
    if not len(a):
        raise ValueError("paired tests need at least one query")
    return np.asarray(a, dtype=float) - np.asarray(b, dtype=float)


def randomization_test(a: Sequence[float], b: Sequence[float], trials: int = 10_000, seed: int = 0) -> float:
    """Two-sided paired randomisation (sign-flip) test of mean(a) = mean(b); returns the p-value.

    Each trial swaps the two systems' scores on a random subset of queries;
    ``p = (1 + #trials with |mean diff| >= observed) / (1 + trials)``. When ``2^n <= trials``
    for n queries, every sign pattern is enumerated instead, and the p-value is exact:
    ``#patterns with |mean diff| >= observed / 2^n``.
    """
    diff = _differences(a, b)
    observed = abs(diff.mean())
    if 2 ** diff.size <= trials:
        patterns = ((np.arange(2 ** diff.size)[:, None] >> np.arange(diff.size)) & 1) * 2.0 - 1.0
        return float(np.count_nonzero(np.abs((patterns * diff).mean(axis=1)) >= observed - 1e-12)) / 2 ** diff.size
    signs = np.random.default_rng(seed).choice([-1.0, 1.0], size=(trials, diff.size))
    extreme = np.count_nonzero(np.abs((signs * diff).mean(axis=1)) >= observed - 1e-12)
    return (1 + extreme) / (1 + trials)


def bootstrap_test(a: Sequence[float], b: Sequence[float], trials: int = 10_000, seed: int = 0) -> float:
    """Two-sided paired bootstrap test: resample queries, shift the differences to mean zero,
    and count resampled means at least as far from zero as the observed one."""
    diff = _differences(a, b)
    observed = abs(diff.mean())
    centred = diff - diff.mean()
    idx = np.random.default_rng(seed).integers(0, diff.size, size=(trials, diff.size))
    extreme = np.count_nonzero(np.abs(centred[idx].mean(axis=1)) >= observed - 1e-12)
    return (1 + extreme) / (1 + trials)


def t_test(a: Sequence[float], b: Sequence[float], trials: int = 0, seed: int = 0) -> float:
    """Two-sided paired t-test (``scipy.stats.ttest_rel``); differences all 0 give NaN (no test: scipy's
    answer), all equal and not 0 give 0 (an infinite t). ``trials`` and ``seed`` are unused (the
    signature the tests share)."""
    from scipy import stats

    diff = _differences(a, b)
    if np.all(diff == diff[0]):
        return float("nan") if diff[0] == 0 else 0.0
    return float(stats.ttest_rel(np.asarray(a, float), np.asarray(b, float)).pvalue)


def wilcoxon_test(a: Sequence[float], b: Sequence[float], trials: int = 0, seed: int = 0) -> float:
    """Two-sided Wilcoxon signed-rank test (``scipy.stats.wilcoxon``, its defaults: zero
    differences dropped, the exact distribution for small samples without ties, else the normal
    approximation); every difference 0 gives NaN (no test: scipy's answer)."""
    from scipy import stats

    diff = _differences(a, b)
    if not np.any(diff):
        return float("nan")
    return float(stats.wilcoxon(diff).pvalue)


def paired_effect(a: Sequence[float], b: Sequence[float], confidence: float = 0.95) -> dict:
    """The difference of ``a`` over ``b`` per query: ``{diff, low, high, effect, wins, ties,
    losses}``: the mean difference, its ``confidence`` interval by the t distribution (``mean +-
    t * sd / sqrt(n)``, sd with n - 1; the mean itself for one query), the effect size as Cohen's
    d of paired samples (``mean / sd``; 0 when sd is 0), and the queries ``a`` scores higher on,
    equal on and lower on."""
    from scipy import stats

    diff = _differences(a, b)
    mean = float(diff.mean())
    sd = float(diff.std(ddof=1)) if diff.size > 1 else 0.0
    half = float(stats.t.ppf(0.5 + confidence / 2, diff.size - 1)) * sd / np.sqrt(diff.size) if sd > 0 else 0.0
    return {"diff": mean, "low": mean - half, "high": mean + half, "effect": mean / sd if sd > 0 else 0.0,
            "wins": int(np.count_nonzero(diff > 0)), "ties": int(np.count_nonzero(diff == 0)),
            "losses": int(np.count_nonzero(diff < 0))}
