"""What checking every byte of a run's handed-on artifacts costs, against the cached run it guards.

A run hands its pairs' evaluate and retrieve artifacts on (to MLflow, the summary, the Python API)
only after :meth:`rbench.core.store.Store.verified` has re-hashed them against their manifests
(issue 81, item 1). This builds the experiment once (untimed), then ``--rounds`` times, alternating
in one script: ``rbench run CONFIG --force-flow`` in a fresh process (every stage a cache hit, the
flow and MLflow logging run, the check included), and the check alone in this process over the
same artifacts with a fresh ``Store`` (nothing remembered). Prints the medians, the bytes checked,
the check's share of the cached run (goal: under 2%), peak RSS, the machine and the settings.

    python tests/benchmarks/full_check_cost.py --config configs/default.yaml --mirror ../shared/data
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

GOAL = 0.02


def run(command: list[str], env: dict) -> tuple[float, float]:
    """Wall seconds and peak RSS (MiB) of one process, which must succeed."""
    started = time.perf_counter()
    proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(command)} failed: {proc.stderr.read().decode()[-2000:]}")
    return wall, usage.ru_maxrss / 1024


def check(store_root: Path) -> tuple[float, int, int]:
    """Seconds to check every evaluate and retrieve artifact of the store in full, the bytes and the artifacts."""
    from rbench.core.store import Artifact, Store

    store = Store(store_root)
    folders = [f for stage in ("evaluate", "retrieve") for f in sorted((store_root / stage).glob("*"))
               if (f / "_manifest.json").is_file()]
    started = time.perf_counter()
    for folder in folders:
        store.verified(Artifact(folder.parent.name, folder.name, folder))
    seconds = time.perf_counter() - started
    size = sum(p.stat().st_size for f in folders for p in f.rglob("*") if p.is_file())
    return seconds, size, len(folders)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="configs/default.yaml")
    parser.add_argument("--mirror", required=True)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    rbench = str(Path(sys.executable).parent / "rbench")
    with tempfile.TemporaryDirectory() as tmp:
        store, mlruns = Path(tmp) / "store", Path(tmp) / "mlruns.db"
        env = {**os.environ, "RBENCH_STORE": str(store), "MLFLOW_TRACKING_URI": f"sqlite:///{mlruns}",
               "PREFECT_HOME": str(Path(tmp) / "prefect")}
        command = [rbench, "run", args.config, "--mirror", args.mirror]
        built, _ = run(command, env)
        flows, checks, rss = [], [], []
        for _ in range(args.rounds):
            wall, peak = run([*command, "--force-flow"], env)
            flows.append(wall)
            rss.append(peak)
            seconds, size, count = check(store)
            checks.append(seconds)
    flow, checked = statistics.median(flows), statistics.median(checks)
    print(f"machine: {platform.node()} {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; "
          f"{args.config}, mirror {args.mirror}, {args.rounds} rounds (the first, building run: {built:.1f} s)")
    print(f"cached run (--force-flow, fresh process): median {flow:.2f} s, peak RSS {max(rss):.0f} MiB")
    print(f"full check of {count} evaluate/retrieve artifacts, {size / 1e6:.1f} MB: median {checked * 1000:.1f} ms, "
          f"this process's peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")
    share = checked / flow
    print(f"check / cached run: {share:.2%} (goal under {GOAL:.0%}): {'met' if share < GOAL else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
