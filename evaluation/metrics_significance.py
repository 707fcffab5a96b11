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
