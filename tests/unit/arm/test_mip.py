"""ARM's MIP: a hand-solved instance, brute force on random ones, the time limit; the
branch-and-bound's bound and quota pieces against brute force."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from tests.conftest import need

need("ortools")

from rbench.arm.bnb import best_under_quota, partner_sums  # noqa: E402
from rbench.arm.mip import objective, quota, select  # noqa: E402

TABLE = [True, True, True, False, False, False]
R = [0.9, 0.5, 0.4, 0.8, 0.3, 0.2]
PAIRS = {(0, 1): 1.0, (0, 4): 0.1, (1, 4): 1.0, (1, 5): 0.1, (2, 3): 0.2, (3, 4): 0.5, (4, 5): 0.3}


def _compat(n: int, pairs: dict) -> np.ndarray:
    c = np.zeros((n, n))
    for (i, j), v in pairs.items():
        c[i, j] = c[j, i] = v
    return c


SETTINGS = [(f, s) for f in ("quadratic", "degree", "reproduction") for s in ("scip", "cp_sat", "bnb")
            if (f, s) != ("reproduction", "bnb")]


@pytest.mark.parametrize("formulation, solver", SETTINGS)
def test_the_hand_solved_instance(formulation, solver):
    c = _compat(6, PAIRS)
    # k=2: one table and one passage. Greedy by relevance takes {0, 3} (0.9 + 0.8 = 1.7); the two
    # tables {0, 1} would score 2.4 but break the quota; {1, 4} scores 0.5 + 0.3 + 1.0 = 1.8.
    two = select(R, c, TABLE, 2, formulation, solver)
    assert two.picked == (1, 4) and two.status == "optimal" and two.objective == pytest.approx(1.8)
    # k=3: one table and two passages; {1, 3, 4}: 0.5 + 0.8 + 0.3 + C14 1.0 + C34 0.5 + C13 0 = 3.1.
    three = select(R, c, TABLE, 3, formulation, solver)
    assert three.picked == (3, 1, 4) and three.objective == pytest.approx(3.1) and three.gap == 0


def _brute_force(r, c, is_table, k, formulation) -> float:
    need_tables, need_passages = quota(k, is_table)
    best = -np.inf
    for picked in itertools.combinations(range(len(r)), k):
        tables = sum(is_table[i] for i in picked)
        if tables >= need_tables and k - tables >= need_passages:
            best = max(best, objective(picked, r, c, formulation, k))
    return best


@pytest.mark.parametrize("formulation", ["quadratic", "degree", "reproduction"])
def test_fifty_random_instances_match_brute_force(formulation):
    rng = np.random.default_rng(7)
    for trial in range(50):
        n = int(rng.integers(2, 13))
        k = int(rng.integers(1, min(n, 6) + 1))
        r = rng.uniform(0, 1, n)
        upper = np.triu(rng.uniform(-0.3, 1.0, (n, n)), 1)
        c = upper + upper.T
        is_table = list(rng.uniform(size=n) < 0.5)
        solver = "scip" if trial % 2 == 0 else "cp_sat"
        got = select(r, c, is_table, k, formulation, solver)
        assert got.status == "optimal", (trial, got)
        assert got.objective == pytest.approx(_brute_force(r, c, is_table, k, formulation), abs=1e-6), (trial, solver)
        tables = sum(is_table[i] for i in got.picked)
        need_tables, need_passages = quota(k, is_table)
        assert len(got.picked) == k and tables >= need_tables and k - tables >= need_passages


def test_the_branch_and_bound_matches_brute_force_on_random_instances():
    rng = np.random.default_rng(11)
    for trial in range(150):
        n = int(rng.integers(2, 13))
        k = int(rng.integers(1, min(n, 7) + 1))
        r = rng.uniform(-0.2, 1, n)
        upper = np.triu(rng.uniform(-0.5, 1.0, (n, n)), 1)
        c = upper + upper.T
        is_table = list(rng.uniform(size=n) < rng.uniform(0.1, 0.9))
        got = select(r, c, is_table, k, "degree", "bnb")
        assert got.status == "optimal" and got.gap == 0, (trial, got)
        assert got.objective == pytest.approx(_brute_force(r, c, is_table, k, "quadratic"), abs=1e-9), trial
        tables = sum(is_table[i] for i in got.picked)
        need_tables, need_passages = quota(k, is_table)
        assert len(set(got.picked)) == k and tables >= need_tables and k - tables >= need_passages


def test_the_branch_and_bound_agrees_with_cp_sat_on_pools_of_thirty():
    rng = np.random.default_rng(5)
    for _ in range(3):
        n = 30
        vectors = rng.normal(size=(n, 8)) + rng.normal(size=8)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        c = 0.5 * vectors @ vectors.T
        r = rng.uniform(0.4, 0.9, n)
        is_table = [i % 3 == 0 for i in range(n)]
        exact = select(r, c, is_table, 8, "degree", "bnb")
        reference = select(r, c, is_table, 8, "degree", "cp_sat", time_limit=60)
        assert exact.status == reference.status == "optimal"
        assert exact.objective == pytest.approx(reference.objective, abs=1e-6)


def test_the_partner_bound_is_the_brute_force_maximum():
    rng = np.random.default_rng(2)
    for _ in range(60):
        f = int(rng.integers(3, 9))
        n_tables = int(rng.integers(0, f + 1))
        m = int(rng.integers(2, f + 1))
        tables = int(rng.integers(0, min(m, n_tables) + 1))
        passages = m - tables if rng.uniform() < 0.7 else int(rng.integers(0, m - tables + 1))
        split = rng.normal(size=(f, f))
        np.fill_diagonal(split, -np.inf)
        sums, used = partner_sums(split.copy(), n_tables, m, tables, passages)
        for u in range(f):
            best = -np.inf
            for partners in itertools.combinations([v for v in range(f) if v != u], m - 1):
                group = (u, *partners)
                count = sum(i < n_tables for i in group)
                if tables + passages < m or (count == tables and m - count == passages):
                    best = max(best, sum(split[u, v] for v in partners))
            assert sums[u] == pytest.approx(best) if np.isfinite(best) else sums[u] == -np.inf, (u, sums, best)
            if np.isfinite(best):
                assert used(np.array([u]))[0].sum() >= m - 1


def test_the_quota_pick_is_the_brute_force_maximum():
    rng = np.random.default_rng(4)
    for _ in range(100):
        n = int(rng.integers(1, 9))
        n_tables = int(rng.integers(0, n + 1))
        m = int(rng.integers(1, n + 1))
        tables, passages = int(rng.integers(0, m + 1)), int(rng.integers(0, m + 1))
        score = rng.normal(size=n)
        feasible = [sum(score[list(s)]) for s in itertools.combinations(range(n), m)
                    if sum(i < n_tables for i in s) >= tables and m - sum(i < n_tables for i in s) >= passages]
        chosen = best_under_quota(score, n_tables, m, tables, passages)
        if not feasible:
            assert chosen is None
        else:
            assert len(set(chosen.tolist())) == m and score[chosen].sum() == pytest.approx(max(feasible))


def test_bnb_refuses_the_reproduction_formulation():
    with pytest.raises(ValueError, match="use solver 'cp_sat' or 'scip' for formulation 'reproduction'"):
        select(R, _compat(6, PAIRS), TABLE, 2, "reproduction", "bnb")


@pytest.mark.parametrize("solver", ["scip", "cp_sat", "bnb"])
def test_a_cut_solve_returns_the_best_found_with_its_gap(solver):
    rng = np.random.default_rng(3)
    n, k = 120, 10
    upper = np.triu(rng.uniform(0, 1, (n, n)), 1)
    is_table = [i % 3 == 0 for i in range(n)]
    cut = select(rng.uniform(0, 1, n), upper + upper.T, is_table, k, "quadratic", solver, time_limit=0.05)
    assert cut.status in ("feasible", "fallback") and cut.gap > 0 and cut.bound >= cut.objective
    if solver == "bnb":
        assert np.isfinite(cut.gap)  # the root's bound stands when time runs out before the first node
    assert len(cut.picked) == k and sum(is_table[i] for i in cut.picked) >= k // 2


def test_bad_instances_are_refused():
    with pytest.raises(ValueError, match="k must be at least 1"):
        select(R, _compat(6, PAIRS), TABLE, 0)
    with pytest.raises(ValueError, match="shapes disagree"):
        select(R, np.zeros((5, 5)), TABLE, 2)
    everything = select(R, _compat(6, PAIRS), TABLE, 9)
    assert sorted(everything.picked) == list(range(6)) and everything.status == "optimal"
