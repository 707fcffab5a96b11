"""Wall time of one experiment (2 datasets x 3 retrievers) under each task runner, in one run.

Every measured run starts from an empty store (nothing cached) except for the downloaded
mirror files; runners are timed in rotating order, ``--rounds`` times, after one untimed
warm-up run (imports, model loading, JIT), so that drift on a shared machine hits each
alike. Prints the median wall time per runner, its ratio to ``sequential``, and where the
time goes (summed stage build seconds by stage), with the machine and the settings.

    python tests/benchmarks/parallel_speed.py --mirror ../shared/data
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import yaml

EXPERIMENT = {
    "name": "parallel-speed",
    "depth": 50,
    "subsample": {"size": 200, "seed": 0},
    "metrics": {"k": [1, 5, 10]},
    "datasets": [{"name": "fetaqa", "params": {"granularity": "table"}},
                 {"name": "tabfact", "params": {"granularity": "row"}}],
    "retrievers": [{"name": "bm25"}, {"name": "bm25s"},
                   {"name": "dense", "params": {"model": "sentence-transformers/all-MiniLM-L6-v2"}}],
    "mlflow": {"experiment": "parallel-speed"},
}


def run_once(config: Path, store: Path, mirror: Path, runner: str) -> tuple[float, dict]:
    """Wall time of one uncached run and the stage report."""
    from rbench.flows.benchmark import benchmark

    shutil.rmtree(store, ignore_errors=True)
    started = time.perf_counter()
    result = benchmark(str(config), mirror=str(mirror), store=str(store), runner=runner)
    return time.perf_counter() - started, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mirror", type=Path, default=Path(os.environ.get("RBENCH_MIRROR", "../shared/data")))
    parser.add_argument("--runners", nargs="+", default=["sequential", "threads", "dask"])
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")

    work = Path(tempfile.mkdtemp(prefix="rbench-parallel-"))
    config = work / "experiment.yaml"
    config.write_text(yaml.safe_dump(EXPERIMENT))
    print(f"machine: {platform.node()}, {os.cpu_count()} cores, {platform.processor() or platform.machine()}, "
          f"Python {platform.python_version()}")
    print(f"experiment: {len(EXPERIMENT['datasets'])} datasets x {len(EXPERIMENT['retrievers'])} retrievers "
          f"({', '.join(r['name'] for r in EXPERIMENT['retrievers'])}), {EXPERIMENT['subsample']['size']} queries, "
          f"depth {EXPERIMENT['depth']}; every run from an empty store; {args.rounds} rounds, rotating order")
    run_once(config, work / "warmup", args.mirror, "sequential")

    walls: dict[str, list[float]] = defaultdict(list)
    stage_seconds: dict[str, dict[str, float]] = {}
    for round_ in range(args.rounds):
        order = args.runners[round_ % len(args.runners):] + args.runners[:round_ % len(args.runners)]
        for runner in order:
            wall, result = run_once(config, work / f"store-{runner}", args.mirror, runner)
            walls[runner].append(wall)
            per_stage: dict[str, float] = defaultdict(float)
            for s in result.stages:
                per_stage[s["stage"]] += s["seconds"] or 0.0
            stage_seconds[runner] = dict(per_stage)
            print(f"  round {round_ + 1} {runner:<10} {wall:7.1f}s")
    base = statistics.median(walls["sequential"]) if "sequential" in walls else None
    print(f"\n{'runner':<11} {'median wall':>11} {'vs sequential':>14}   summed stage build seconds (last round)")
    for runner in args.runners:
        median = statistics.median(walls[runner])
        ratio = f"{median / base:.2f}x" if base else "-"
        stages = ", ".join(f"{k} {v:.0f}" for k, v in sorted(stage_seconds[runner].items(), key=lambda kv: -kv[1]))
        print(f"{runner:<11} {median:10.1f}s {ratio:>14}   {stages}")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
