"""Rewrite-stage throughput through rbench vs the same backend called directly, and a
fully cached rerun, in one process (runs alternate so both see the same machine state).

    python -m tests.benchmarks.rewrite_speed [--queries 40] [--rounds 2] [--base-url URL --model NAME]

Default backend: transformers with the packaged SmolLM2-135M-Instruct (greedy, 64 new
tokens, decomposition prompt) on FeTaQA dev questions from the shared mirror. With
``--base-url`` the ``openai`` backend calls that server (for example ``make vllm-serve``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

REPO = Path(__file__).resolve().parents[2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--queries", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--base-url")
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--data", default=str(REPO.parent / "shared" / "data" / "fetaqa" / "fetaQA-v1_dev.jsonl"))
    args = parser.parse_args()

    from rbench.core.store import Artifact, Store
    from rbench.llm.backends import Request, backend_for
    from rbench.llm.config import LLMConfig, Sampling
    from rbench.llm.rewrite import RewriteSpec
    from rbench.tasks.rewrite import REWRITE

    if args.base_url:
        llm = LLMConfig(backend="openai", base_url=args.base_url, model=args.model, max_concurrency=16)
    else:
        llm = LLMConfig(backend="transformers", model="smollm2-135m", batch_size=8)
    sampling = Sampling(max_tokens=64)
    spec = RewriteSpec.of("decompose", llm, "decompose", sampling=sampling)
    lines = Path(args.data).read_text(encoding="utf-8").splitlines()
    questions = [json.loads(line)["question"] for line in lines]
    backend = backend_for(llm)  # loaded once, outside every timing
    work = Path(tempfile.mkdtemp(prefix="rewrite-speed-"))

    def subset(round_: int) -> tuple[list[str], Artifact]:
        chosen = questions[round_ * args.queries:(round_ + 1) * args.queries]  # new questions each round: no cache
        folder = work / f"queries-{round_}"
        folder.mkdir(exist_ok=True)
        pq.write_table(pa.table({"query_id": [f"q{i}" for i in range(len(chosen))], "text": chosen}),
                       folder / "queries.parquet")
        return chosen, Artifact("subsample", f"bench-{round_}", folder)

    def direct(chosen: list[str]) -> float:
        prompt = spec.prompt()
        requests = [Request(tuple(prompt.render(question=q, max_queries=str(spec.max_queries))), sampling)
                    for q in chosen]
        started = time.perf_counter()
        backend.generate(requests, lambda i, c: None)
        return time.perf_counter() - started

    def through_rbench(artifact: Artifact, store: Store) -> float:
        started = time.perf_counter()
        REWRITE.run(store, [artifact], spec)
        return time.perf_counter() - started

    timings = {"direct": [], "rbench": []}
    for round_ in range(args.rounds):
        chosen_a, artifact_a = subset(2 * round_)
        chosen_b, artifact_b = subset(2 * round_ + 1)
        store = Store(work / f"store-{round_}")
        if round_ % 2 == 0:
            timings["direct"].append(direct(chosen_a))
            timings["rbench"].append(through_rbench(artifact_b, store))
        else:
            timings["rbench"].append(through_rbench(artifact_a, store))
            timings["direct"].append(direct(chosen_b))
    direct_qps = args.queries * args.rounds / sum(timings["direct"])
    rbench_qps = args.queries * args.rounds / sum(timings["rbench"])

    store = Store(work / "store-0")
    _, artifact = subset(1)
    reused = through_rbench(artifact, store)                       # the artifact exists: nothing is built
    key = REWRITE.key([artifact], spec)
    for folder in (store.root / "rewrite").glob(f"{key}*"):
        import shutil

        shutil.rmtree(folder)
    all_hits = through_rbench(artifact, store)                     # rebuilt from the call cache alone

    print(f"machine: {platform.node()}, {os.cpu_count()} cores, backend {llm.backend} ({llm.model}), "
          f"{args.queries} queries x {args.rounds} rounds, max_tokens {sampling.max_tokens}")
    runs = {name: ", ".join(f"{t:.1f}" for t in times) for name, times in timings.items()}
    print(f"direct backend.generate: {direct_qps:.3f} queries/s  ({runs['direct']} s)")
    print(f"rbench rewrite stage:    {rbench_qps:.3f} queries/s  ({runs['rbench']} s)")
    print(f"ratio rbench/direct: {rbench_qps / direct_qps:.2f}x (aim >= 0.9x)")
    print(f"cached rerun (artifact reused): {reused * 1000:.0f} ms; "
          f"rebuilt from the call cache: {all_hits * 1000:.0f} ms")


if __name__ == "__main__":
    main()
