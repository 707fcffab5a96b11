"""Solve time of ARM's MIP per formulation and solver, on synthetic instances shaped like
ARM's candidate pools (relevance in [0, 1], compatibility = 0.5 cosine + 0.5 lexical overlap,
a third of the objects tables). Rotates the order of the compared settings per instance.

    python -m tests.benchmarks.arm_mip [--sizes 50 100 200] [--k 10] [--instances 3] [--time-limit 30]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics

import numpy as np

from rbench.arm.mip import select

SETTINGS = [(f, s) for f in ("quadratic", "degree", "reproduction") for s in ("scip", "cp_sat")]


def instance(rng: np.random.Generator, n: int):
    vectors = rng.normal(size=(n, 32)) + rng.normal(size=32)  # a shared direction: cosines mostly positive
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    cosine = vectors @ vectors.T
    lexical = np.triu(rng.beta(0.5, 4, (n, n)), 1)
    compat = 0.5 * cosine + 0.5 * (lexical + lexical.T)
    relevance = (rng.uniform(-0.2, 0.8, n) + 1) / 2
    return relevance, compat, [i % 3 == 0 for i in range(n)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[50, 100, 200])
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--instances", type=int, default=3)
    parser.add_argument("--time-limit", type=float, default=30.0)
    args = parser.parse_args()
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores; one solver thread; "
          f"k={args.k}; time limit {args.time_limit}s; {args.instances} instances per size")
    print("| n | formulation | solver | median s | max s | statuses | max gap | objective vs quadratic |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    rng = np.random.default_rng(0)
    for n in args.sizes:
        results = {s: [] for s in SETTINGS}
        for i in range(args.instances):
            r, c, tables = instance(rng, n)
            order = SETTINGS[i % len(SETTINGS):] + SETTINGS[:i % len(SETTINGS)]
            for setting in order:
                results[setting].append(select(r, c, tables, args.k, *setting, time_limit=args.time_limit))
        reference = [max(x.objective for s, xs in results.items() for x in [xs[i]] if s[0] != "reproduction")
                     for i in range(args.instances)]
        for (formulation, solver), runs in results.items():
            seconds = [x.seconds for x in runs]
            statuses = ",".join(sorted({x.status for x in runs}))
            rel = "n/a (other objective)" if formulation == "reproduction" else \
                f"{min(x.objective / ref for x, ref in zip(runs, reference)):.4f}"
            print(f"| {n} | {formulation} | {solver} | {statistics.median(seconds):.2f} | {max(seconds):.2f} | "
                  f"{statuses} | {max(x.gap for x in runs):.3f} | {rel} |", flush=True)


if __name__ == "__main__":
    main()
