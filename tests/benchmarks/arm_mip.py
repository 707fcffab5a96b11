"""Solve time of ARM's MIP per formulation and solver, on synthetic instances shaped like
ARM's candidate pools (relevance in [0, 1], compatibility = 0.5 cosine + 0.5 lexical overlap,
a third of the objects tables), or with ``--ottqa MIRROR`` on real ones: ARM's pools for
OTT-QA dev questions (the dense model's top ``n`` objects among the first ``--tables`` tables
and their linked passages; ARM's relevance and compatibility, its default weights). Rotates
the order of the compared settings per instance. ``bnb`` (rbench's branch-and-bound) solves
the exact problem whatever the formulation's model; it is listed under ``degree``, whose
optimum it shares.

    python -m tests.benchmarks.arm_mip [--sizes 30 60 100] [--k 10] [--instances 5] [--time-limit 30]
        [--solvers bnb cp_sat scip] [--ottqa ../shared/data [--tables 150]]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from pathlib import Path

import numpy as np

from rbench.arm.mip import select

SETTINGS = [("degree", "bnb")] + [(f, s) for f in ("quadratic", "degree", "reproduction") for s in ("scip", "cp_sat")]


def instance(rng: np.random.Generator, n: int):
    vectors = rng.normal(size=(n, 32)) + rng.normal(size=32)  # a shared direction: cosines mostly positive
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    cosine = vectors @ vectors.T
    lexical = np.triu(rng.beta(0.5, 4, (n, n)), 1)
    compat = 0.5 * cosine + 0.5 * (lexical + lexical.T)
    relevance = (rng.uniform(-0.2, 0.8, n) + 1) / 2
    return relevance, compat, [i % 3 == 0 for i in range(n)]


def ottqa_pools(mirror: Path, sizes: list[int], questions: int, tables: int, model: str) -> dict[int, list]:
    """Per size, one instance per OTT-QA dev question whose table is among the first ``tables``."""
    import torch
    from sentence_transformers import SentenceTransformer
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    from rbench.dataset_adapters.ottqa import Ottqa, OttqaParams
    from rbench.retrievers.arm import lexical
    from rbench.retrievers.models import resolve_model

    torch.set_num_threads(1)
    adapter, params = Ottqa(), OttqaParams()
    objects, table_docs = [], set()
    for obj in adapter.objects(mirror, params):
        if obj.modality != "text" and obj.doc_id not in table_docs:
            if len(table_docs) == tables:
                break
            table_docs.add(obj.doc_id)
        objects.append(obj)
    asked = [q for q in adapter.queries(mirror, params) if q.gold_doc_ids[0] in table_docs][:questions]
    encoder = SentenceTransformer(resolve_model(model).location, device="cpu")
    started = time.perf_counter()
    vectors = encoder.encode([o.text for o in objects], batch_size=64, normalize_embeddings=True)
    print(f"ottqa: {len(objects):,} objects ({tables} tables and their passages) encoded in "
          f"{time.perf_counter() - started:.0f} s; {len(asked)} questions", flush=True)
    queries = encoder.encode([q.text for q in asked], normalize_embeddings=True)
    stopwords = frozenset(ENGLISH_STOP_WORDS)
    pools: dict[int, list] = {n: [] for n in sizes}
    for query in queries:
        cosine = vectors @ query
        for n in sizes:
            top = np.argsort(-cosine)[:n]
            texts = [objects[i].text for i in top]
            lex = np.array([[lexical(a, b, stopwords) if i < j else 0.0 for j, b in enumerate(texts)]
                            for i, a in enumerate(texts)])
            compat = 0.5 * (vectors[top] @ vectors[top].T) + 0.5 * (lex + lex.T)
            tables = [objects[i].modality not in ("text", "passage") for i in top]
            pools[n].append(((cosine[top] + 1) / 2, compat, tables))
    return pools


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[30, 60, 100])
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--instances", type=int, default=5)
    parser.add_argument("--time-limit", type=float, default=30.0)
    parser.add_argument("--solvers", nargs="+", default=["bnb", "cp_sat", "scip"], choices=["bnb", "cp_sat", "scip"])
    parser.add_argument("--ottqa", type=Path, help="a mirror folder holding ottqa/ (e.g. ../shared/data): real pools")
    parser.add_argument("--tables", type=int, default=150, help="with --ottqa: the OTT-QA tables searched")
    parser.add_argument("--model", default="minilm", help="with --ottqa: the dense model")
    args = parser.parse_args()
    settings = [s for s in SETTINGS if s[1] in args.solvers]
    pools = ottqa_pools(args.ottqa, args.sizes, args.instances, args.tables, args.model) if args.ottqa else None
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores; one solver thread; "
          f"k={args.k}; time limit {args.time_limit}s; {args.instances} instances per size; "
          + (f"OTT-QA pools ({args.model})" if pools else "synthetic instances"))
    print("| n | formulation | solver | median s | max s | statuses | max gap | objective vs quadratic |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    rng = np.random.default_rng(0)
    for n in args.sizes:
        results = {s: [] for s in settings}
        count = len(pools[n]) if pools else args.instances
        for i in range(count):
            r, c, tables = pools[n][i] if pools else instance(rng, n)
            order = settings[i % len(settings):] + settings[:i % len(settings)]
            for setting in order:
                results[setting].append(select(r, c, tables, args.k, *setting, time_limit=args.time_limit))
        reference = [max(x.objective for s, xs in results.items() for x in [xs[i]] if s[0] != "reproduction")
                     for i in range(count)]
        for (formulation, solver), runs in results.items():
            seconds = [x.seconds for x in runs]
            statuses = ",".join(sorted({x.status for x in runs}))
            rel = "n/a (other objective)" if formulation == "reproduction" else \
                f"{min(x.objective / ref for x, ref in zip(runs, reference)):.4f}"
            print(f"| {n} | {formulation} | {solver} | {statistics.median(seconds):.2f} | {max(seconds):.2f} | "
                  f"{statuses} | {max(x.gap for x in runs):.3f} | {rel} |", flush=True)


if __name__ == "__main__":
    main()
