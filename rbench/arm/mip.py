"""ARM's selection step as a mixed-integer program, solved with OR-Tools.

Pick ``k`` of ``n`` candidate objects maximising ``sum_i R_i b_i + sum_{i<j} C_ij c_ij``
with ``sum b = k``, where ``c_ij`` says that both ends of a pair are picked, and (where
available) at least ``floor(k/2)`` table objects and ``ceil(k/2)`` passages.

Formulations (``formulation``):

- ``quadratic``: the exact quadratic objective (every pair of picked objects counts):
  ``c_ij <= b_i``, ``c_ij <= b_j``, ``c_ij >= b_i + b_j - 1``.
- ``degree``: the same optimum, with the degree equality ``sum_j c_ij = (k - 1) b_i``
  in place of the lower linking (it tightens the relaxation).
- ``reproduction``: the ARM reproduction's model, a different problem: at most
  ``2(k - 1)`` pairs count (``2 c_ij <= b_i + b_j``, ``sum c <= 2(k - 1)``).

Solvers: ``bnb`` (default), rbench's exact branch-and-bound for the exact problem
(``rbench/arm/bnb.py``, NumPy only; not for ``reproduction``), or OR-Tools' ``cp_sat`` and
``scip`` on the formulation's model.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Literal, Sequence

import numpy as np

from rbench.arm.bnb import best_under_quota, branch_and_bound
from rbench.core.errors import MissingExtraError

Formulation = Literal["quadratic", "degree", "reproduction"]
Solver = Literal["bnb", "scip", "cp_sat"]
_SOLVER_IDS = {"scip": "SCIP", "cp_sat": "CP-SAT"}


@dataclass(frozen=True)
class Selection:
    """A solved instance: picked indices (by decreasing relevance), the solver's status
    (``optimal``, ``feasible`` or ``fallback`` when it found nothing in time and the
    hint was kept), the objective of the picked set under the formulation, the best
    bound, the relative gap and the seconds the solve took."""

    picked: tuple[int, ...]
    status: str
    objective: float
    bound: float
    gap: float
    seconds: float


def quota(k: int, is_table: Sequence[bool]) -> tuple[int, int]:
    """The minimum numbers of table objects and passages: ``floor(k/2)`` and ``ceil(k/2)``,
    each capped by how many are available."""
    tables = sum(bool(t) for t in is_table)
    return min(k // 2, tables), min(k - k // 2, len(is_table) - tables)


def objective(picked: Sequence[int], relevance: np.ndarray, compat: np.ndarray, formulation: Formulation,
              k: int) -> float:
    """The objective value of a picked set under ``formulation``."""
    picked = sorted(picked)
    pairs = [compat[i, j] for a, i in enumerate(picked) for j in picked[a + 1:]]
    value = float(sum(relevance[i] for i in picked))
    if formulation == "reproduction":
        best = sorted((p for p in pairs if p > 0), reverse=True)[: 2 * (k - 1)]
        return value + float(sum(best))
    return value + float(sum(pairs))


def _hint(relevance: np.ndarray, is_table: Sequence[bool], k: int) -> list[int]:
    """A feasible start: the most relevant objects that meet the table/passage quota."""
    order = np.argsort(~np.asarray(is_table, bool), kind="stable")  # tables first, as best_under_quota wants
    chosen = best_under_quota(np.asarray(relevance, float)[order], int(sum(is_table)), k, *quota(k, is_table))
    return [int(order[i]) for i in chosen]


def select(relevance: Sequence[float], compat: np.ndarray, is_table: Sequence[bool], k: int,
           formulation: Formulation = "degree", solver: Solver = "bnb", time_limit: float = 10.0,
           threads: int = 1) -> Selection:
    """Solve one instance; ``compat`` is a symmetric ``n x n`` matrix (its diagonal is ignored).

    Raises ValueError for inconsistent shapes, ``k < 1`` or ``bnb`` with ``reproduction``. With
    ``k >= n`` every object is picked. A solve cut by ``time_limit`` still returns a feasible set
    (status ``feasible`` and its gap): the best found, at least the most relevant objects
    meeting the quota (OR-Tools gets them as a hint).
    """
    r = np.asarray(relevance, dtype=float)
    c = np.asarray(compat, dtype=float)
    n = len(r)
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    if c.shape != (n, n) or len(is_table) != n:
        raise ValueError(f"shapes disagree: {n} relevances, compatibility {c.shape}, {len(is_table)} modality flags")
    if solver == "bnb" and formulation == "reproduction":
        raise ValueError("solver 'bnb' solves the exact problem (formulation 'degree' or 'quadratic'); "
                         "use solver 'cp_sat' or 'scip' for formulation 'reproduction'")
    started = time.perf_counter()
    if k >= n:
        picked = tuple(sorted(range(n), key=lambda i: -r[i]))
        value = objective(picked, r, c, formulation, n)
        return Selection(picked, "optimal", value, value, 0.0, time.perf_counter() - started)
    if solver == "bnb":
        solved = branch_and_bound(r, c, np.asarray(is_table, bool), k, *quota(k, is_table), time_limit)
        picked, status, bound = solved.picked, "optimal" if solved.optimal else "feasible", solved.bound
    else:
        picked, status, bound = _or_tools(r, c, is_table, k, formulation, solver, time_limit, threads)
    seconds = time.perf_counter() - started
    picked = tuple(sorted(picked, key=lambda i: -r[i]))
    value = objective(picked, r, c, formulation, k)
    if status == "optimal":
        bound, gap = value, 0.0
    else:
        gap = abs(bound - value) / max(abs(value), 1e-9) if math.isfinite(bound) else math.inf
    return Selection(picked, status, value, bound, gap, seconds)


def _or_tools(r: np.ndarray, c: np.ndarray, is_table: Sequence[bool], k: int, formulation: Formulation,
              solver: Solver, time_limit: float, threads: int) -> tuple[list[int], str, float]:
    """The formulation's model solved by OR-Tools: picked indices, status and best bound."""
    try:
        from ortools.linear_solver import pywraplp
    except ImportError:
        raise MissingExtraError("ortools", "arm", "ARM's MIP selection") from None
    n = len(r)
    s = pywraplp.Solver.CreateSolver(_SOLVER_IDS[solver])
    b = [s.BoolVar(f"b{i}") for i in range(n)]
    pairs = [(i, j) for i in range(n) for j in range(i + 1, n)]
    cv = {(i, j): s.BoolVar(f"c{i}_{j}") for i, j in pairs}
    s.Add(sum(b) == k)
    need_tables, need_passages = quota(k, is_table)
    if need_tables:
        s.Add(sum(b[i] for i in range(n) if is_table[i]) >= need_tables)
    if need_passages:
        s.Add(sum(b[i] for i in range(n) if not is_table[i]) >= need_passages)
    if formulation == "reproduction":
        for (i, j), v in cv.items():
            s.Add(2 * v <= b[i] + b[j])
        s.Add(sum(cv.values()) <= 2 * (k - 1))
    else:
        for (i, j), v in cv.items():
            s.Add(v <= b[i])
            s.Add(v <= b[j])
            if formulation == "quadratic":
                s.Add(v >= b[i] + b[j] - 1)
        if formulation == "degree":
            for i in range(n):
                s.Add(sum(cv[min(i, j), max(i, j)] for j in range(n) if j != i) == (k - 1) * b[i])
    s.Maximize(sum(float(r[i]) * b[i] for i in range(n)) + sum(float(c[i, j]) * v for (i, j), v in cv.items()))
    hint = set(_hint(r, is_table, k))
    variables = b + list(cv.values())
    values = [1.0 if i in hint else 0.0 for i in range(n)] + [1.0 if i in hint and j in hint else 0.0 for i, j in cv]
    s.SetHint(variables, values)
    s.SetTimeLimit(int(time_limit * 1000))
    s.SetNumThreads(threads)
    code = s.Solve()
    if code in (pywraplp.Solver.OPTIMAL, pywraplp.Solver.FEASIBLE):
        picked = [i for i in range(n) if b[i].solution_value() > 0.5]
        return picked, "optimal" if code == pywraplp.Solver.OPTIMAL else "feasible", s.Objective().BestBound()
    return sorted(hint), "fallback", math.inf
