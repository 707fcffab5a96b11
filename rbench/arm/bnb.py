"""An exact branch-and-bound for ARM's selection problem: pick ``k`` of ``n`` objects maximising
``sum_i R_i + sum_{i<j} C_ij`` over the picked ones, with at least ``tables`` table objects and
``passages`` passages.

- **Bound** (Lagrangian edge splitting): every pair's compatibility is split between its ends,
  ``C_uv = A_uv + A_vu``. For any split, a free object ``u`` adds at most ``R_u`` plus its links
  to the objects already picked plus the largest sum of ``A_uv`` over ``m - 1`` free partners that
  could complete a set with it (``m`` objects are still to pick; when the quota fixes how many
  tables and passages remain, that many of each), so the best ``m`` of these gains under the
  quota bound the node. Subgradient steps (Polyak's rule, aimed at the incumbent) move the split
  where the bound is loose; children start from their parent's split (``ROOT_STEPS`` steps at
  the root, ``NODE_STEPS`` at a node, ``REFIX_STEPS`` after each round of fixing).
- **Fixing**: a free object whose entry in place of the weakest exchangeable member of the
  bound's set would take the bound to the incumbent or below is dropped; a member whose exit
  would do the same is picked. (The per-object gains are separable and the quota's sets are the
  bases of a matroid, so one exchange gives the best set with or without an object.)
- **Incumbent**: the most relevant objects meeting the quota, improved by best-exchange local
  search; every node's bound set is evaluated too.
- **Branching**: depth first on the member of the bound's set whose exit would cost the bound
  most, picked first.

Objects are renumbered tables first, so every node's free tables and passages are two
contiguous blocks of its arrays.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

STEP = 1.5
ROOT_STEPS = 100
NODE_STEPS = 3
REFIX_STEPS = 1
EPS = 1e-9


@dataclass(frozen=True)
class Solved:
    """The best set found (indices), its value, an upper bound on the optimum (equal to the
    value when ``optimal``) and the number of nodes searched."""

    picked: tuple[int, ...]
    value: float
    bound: float
    optimal: bool
    nodes: int


def best_under_quota(score: np.ndarray, n_tables: int, m: int, tables: int, passages: int) -> np.ndarray | None:
    """Indices of the ``m`` largest scores holding at least ``tables`` of the first ``n_tables``
    indices (the tables) and ``passages`` of the others, or None when no such set exists."""
    n = len(score)
    if n_tables < tables or n - n_tables < passages or n < m or tables + passages > m:
        return None
    tab = np.argsort(-score[:n_tables], kind="stable")
    pas = np.argsort(-score[n_tables:], kind="stable") + n_tables
    chosen = np.concatenate([tab[:tables], pas[:passages]])
    extra = m - tables - passages
    if extra > 0:
        rest = np.concatenate([tab[tables:], pas[passages:]])
        chosen = np.concatenate([chosen, rest[np.argsort(-score[rest], kind="stable")[:extra]]])
    return chosen


def partner_sums(split: np.ndarray, n_tables: int, m: int, tables: int,
                 passages: int) -> tuple[np.ndarray, Callable[[np.ndarray], np.ndarray]]:
    """Per free object, the largest sum of its row of ``split`` over ``m - 1`` partners that can
    complete a set with it: when the quota fixes the numbers of tables and passages (``tables +
    passages == m``), that many of each less the object itself, else any ``m - 1``. Returns the
    sums (``-inf`` for an object that cannot be in such a set) and a function giving, for some
    rows, the partners used (a boolean matrix; ties may mark more)."""
    f = len(split)
    if tables + passages < m:
        kth = f - (m - 1)
        part = np.partition(split, kth, axis=1)
        return part[:, kth:].sum(1), lambda rows: split[rows] >= part[rows, kth][:, None]
    sums = np.zeros(f)
    threshold = np.full((f, 2), np.inf)
    blocks = (slice(0, n_tables), slice(n_tables, f))
    for row_block, row_is_table in zip(blocks, (True, False)):
        for c, (block, need) in enumerate(zip(blocks, (tables - row_is_table, passages - (not row_is_table)))):
            width = block.stop - block.start - (c == (not row_is_table))
            if need < 0 or need > width:
                sums[row_block] = -np.inf
            elif need:
                part = np.partition(split[row_block, block], width + (c == (not row_is_table)) - need, axis=1)
                cut = part.shape[1] - need
                sums[row_block] += part[:, cut:].sum(1)
                threshold[row_block, c] = part[:, cut]

    def used(rows: np.ndarray) -> np.ndarray:
        marks = np.empty((len(rows), f), bool)
        for c, block in enumerate(blocks):
            marks[:, block] = split[rows, block] >= threshold[rows, c][:, None]
        return marks

    return sums, used


class _Search:
    """One instance, renumbered tables first; ``run`` searches it."""

    def __init__(self, relevance: np.ndarray, compat: np.ndarray, n_tables: int, k: int, tables: int,
                 passages: int, deadline: float):
        self.r, self.c = relevance, compat
        self.n_tables, self.k, self.tables, self.passages = n_tables, k, tables, passages
        self.deadline = deadline
        self.nodes = 0
        start = best_under_quota(relevance, n_tables, k, tables, passages)
        if start is None:
            raise ValueError(f"no {k} of {len(relevance)} objects hold {tables} tables and {passages} passages")
        self.picked = self.local_search(start)
        self.best = self.value(self.picked)

    def value(self, picked: np.ndarray) -> float:
        return float(self.r[picked].sum() + self.c[np.ix_(picked, picked)].sum() / 2)

    def local_search(self, picked: np.ndarray) -> np.ndarray:
        """Best-improvement exchanges (one picked object for one other) that keep the quota."""
        inside = np.zeros(len(self.r), bool)
        inside[picked] = True
        is_table = np.arange(len(self.r)) < self.n_tables
        while True:
            members, others = np.flatnonzero(inside), np.flatnonzero(~inside)
            if not len(others):
                return members
            gain = self.r + self.c[:, members].sum(1)
            delta = gain[others][None, :] - self.c[np.ix_(members, others)] - gain[members][:, None]
            after = int(is_table[members].sum()) - is_table[members][:, None].astype(int) + is_table[others][None, :]
            delta[(after < self.tables) | (self.k - after < self.passages)] = -np.inf
            a, u = np.unravel_index(np.argmax(delta), delta.shape)
            if not delta[a, u] > EPS:
                return members
            inside[members[a]], inside[others[u]] = False, True

    def lagrange(self, gain: np.ndarray, split: np.ndarray, n_tables: int, m: int, tables: int, passages: int,
                 target: float, steps: int):
        """The bound on the free objects' part (``split`` is updated in place), the per-object
        gains and the bound's set, or ``(-inf, None, None)`` when the quota cannot be met."""
        if m == 1:
            chosen = best_under_quota(gain, n_tables, 1, tables, passages)
            return (-np.inf, None, None) if chosen is None else (float(gain[chosen].sum()), gain, chosen)
        best, best_score, best_set = np.inf, None, None
        for step in range(steps):
            partners, used = partner_sums(split, n_tables, m, tables, passages)
            score = gain + partners
            chosen = best_under_quota(score, n_tables, m, tables, passages)
            if chosen is None:
                return -np.inf, None, None
            bound = float(score[chosen].sum())
            if bound < best:
                best, best_score, best_set = bound, score, chosen
            if best <= target or step == steps - 1:
                break
            marks = used(chosen).astype(float)
            rows = marks.copy()
            rows[:, chosen] = marks[:, chosen] - marks[:, chosen].T
            outside = np.ones(len(gain), bool)
            outside[chosen] = False
            norm = float((rows * rows).sum() + marks[:, outside].sum())
            if norm == 0:
                break
            move = STEP * (bound - target) / norm
            split[chosen] -= move * rows
            split[np.ix_(outside, chosen)] += move * marks[:, outside].T
        return best, best_score, best_set

    def node(self, picked: np.ndarray, free: np.ndarray, split: np.ndarray, steps: int) -> list[tuple]:
        """Bound and fix one node; returns its children (the last is searched first)."""
        split = split.copy()  # the parent's is shared with this node's sibling
        while True:
            m = self.k - len(picked)
            picked_tables = int((picked < self.n_tables).sum())
            tables = max(0, self.tables - picked_tables)
            passages = max(0, self.passages - (len(picked) - picked_tables))
            base = self.value(picked)
            if m == 0:
                if tables == 0 and passages == 0 and base > self.best + EPS:
                    self.best, self.picked = base, picked
                return []
            if len(free) < m:
                return []
            n_tables = int(np.searchsorted(free, self.n_tables))
            gain = self.r[free] + self.c[np.ix_(picked, free)].sum(0)
            bound, score, chosen = self.lagrange(gain, split, n_tables, m, tables, passages, self.best - base, steps)
            steps = REFIX_STEPS
            if base + bound <= self.best + EPS:
                return []
            candidate = np.concatenate([picked, free[chosen]])
            value = self.value(candidate)
            if value > self.best + EPS:
                self.best, self.picked = value, candidate
            slack = base + bound - self.best - EPS
            is_table = np.arange(len(free)) < n_tables
            inside = np.zeros(len(free), bool)
            inside[chosen] = True
            chosen_tables = int(is_table[chosen].sum())
            leaves_table = is_table[chosen].astype(int)
            drop = np.zeros(len(free), bool)
            replacement = np.full(len(chosen), -np.inf)
            for kind in (True, False):
                after = chosen_tables - leaves_table + kind
                exchangeable = (after >= tables) & (m - after >= passages)
                weakest = score[chosen[exchangeable]].min(initial=np.inf)
                entering = ~inside & (is_table == kind)
                drop |= entering & (score - weakest < -slack)
                strongest = score[entering & (score - weakest >= -slack)].max(initial=-np.inf)
                replacement = np.where(exchangeable, np.maximum(replacement, strongest), replacement)
            force = np.zeros(len(free), bool)
            force[chosen[replacement - score[chosen] < -slack]] = True
            if not drop.any() and not force.any():
                break
            picked = np.concatenate([picked, free[force]])
            rest = np.flatnonzero(~drop & ~force)
            free, split = free[rest], split[np.ix_(rest, rest)]
        branch = chosen[np.argmax(score[chosen] - replacement)]
        rest = np.flatnonzero(np.arange(len(free)) != branch)
        child = split[np.ix_(rest, rest)]
        bound = base + bound
        return [(picked, free[rest], child, bound), (np.append(picked, free[branch]), free[rest], child, bound)]

    def run(self) -> Solved:
        n = len(self.r)
        split = self.c / 2
        np.fill_diagonal(split, -np.inf)
        root, _, _ = self.lagrange(self.r, split.copy(), self.n_tables, self.k, self.tables, self.passages,
                                   -np.inf, 1)  # the bound before any step, if time runs out first
        stack = [(np.array([], int), np.arange(n), split, root)]
        while stack:
            if time.perf_counter() > self.deadline:
                bound = max(self.best, max(b for *_, b in stack))
                return Solved(tuple(int(i) for i in self.picked), self.best, bound, False, self.nodes)
            picked, free, split, _ = stack.pop()
            self.nodes += 1
            stack.extend(self.node(picked, free, split, ROOT_STEPS if self.nodes == 1 else NODE_STEPS))
        return Solved(tuple(int(i) for i in self.picked), self.best, self.best, True, self.nodes)


def branch_and_bound(relevance: np.ndarray, compat: np.ndarray, is_table: np.ndarray, k: int, tables: int,
                     passages: int, time_limit: float) -> Solved:
    """Solve one instance exactly, or return the best set found and a bound when ``time_limit``
    (seconds) runs out; ``compat`` is symmetric (its diagonal is ignored), ``1 <= k < n``."""
    order = np.argsort(~np.asarray(is_table, bool), kind="stable")
    c = np.asarray(compat, float)[np.ix_(order, order)]
    np.fill_diagonal(c, 0.0)
    search = _Search(np.asarray(relevance, float)[order], c, int(np.sum(is_table)), k, tables, passages,
                     time.perf_counter() + time_limit)
    solved = search.run()
    return Solved(tuple(int(order[i]) for i in solved.picked), solved.value, solved.bound, solved.optimal,
                  solved.nodes)
