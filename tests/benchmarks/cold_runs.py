"""Cold runs of an experiment, with CPU-bound processes beside them: how many finish without a
failed stage, and what stage processes cost against running every build in the flow's threads.

Each run is ``rbench run CONFIG --store <fresh> [--mirror DIR]`` in a fresh process with a fresh
Prefect home (so a temporary Prefect server of its own), while ``--busy`` processes spin on the
CPU (default: two per core, as on a shared cluster node). The variants alternate run by run:
``processes`` (the default: builds that load torch, FAISS or an LLM client in stage processes),
``threads`` (``execution.stage_processes: false``, every build in the flow's threads) and
``flow``: the benchmark flow called in a fresh process as a deployment's flow-run process calls
it (no CLI pre-flight, no rbench signal handler; Prefect's engine owns the process), with the
deployment's defaults (stage processes on, the config's runner).

Prints one line per run (variant, wall seconds, exit code, stages ran / failed, peak RSS of the
largest process of the run), then per variant how many runs had no failed stage, the median
wall time, and the ratio of the medians, with the machine and the settings.

    python -m tests.benchmarks.cold_runs --runs 20 --mirror ../shared/data
    python -m tests.benchmarks.cold_runs --runs 2 --busy 0 --variants processes,threads
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

VARIANTS = {"processes": True, "threads": False, "flow": True}  # variant: stage_processes
FLOW = ("import sys\n"
        "from rbench.flows.benchmark import benchmark, summary_of\n"
        "state = benchmark(config_path=sys.argv[1], store=sys.argv[2], mirror=sys.argv[3] or None, return_state=True)\n"
        "result = summary_of(state)\n"
        "rows = result['stages'] if isinstance(result, dict) else []\n"
        "ran = sum(r['status'] == 'ran' for r in rows)\n"
        "cached = sum(r['status'] == 'cached' for r in rows)\n"
        "print(f'stages: {ran} ran, {cached} cached, {len(rows) - ran - cached} failed')\n"
        "sys.exit(0 if state.is_completed() else 1)\n")
STAGES = re.compile(r"^stages: (\d+) ran, (\d+) cached, (\d+) failed", re.M)


def spin() -> None:
    """A CPU-bound busy loop (a busy process's whole life)."""
    x = 0
    while True:
        x = (x * 31 + 7) % 1_000_003


def run_once(config: Path, mirror: str | None, folder: Path, flow: bool = False) -> dict:
    """One cold run in ``folder`` (fresh store and Prefect home), through the CLI or (``flow``)
    the flow alone: wall seconds, exit code, stage counts and the peak RSS (MiB) of the largest
    process of the run."""
    env = {k: v for k, v in os.environ.items() if k not in ("PREFECT_API_URL", "MLFLOW_TRACKING_URI")}
    env.update(PREFECT_HOME=str(folder / "prefect-home"), RBENCH_STORE=str(folder / "store"))
    if flow:  # a worker's flow runs talk to a server of their own; the temporary one gets the CLI's start timeout
        env.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")
        command = [sys.executable, "-c", FLOW, str(config), str(folder / "store"), mirror or ""]
    else:
        command = [sys.executable, "-m", "rbench.cli", "run", str(config), "--store", str(folder / "store"),
                   *(["--mirror", mirror] if mirror else [])]
    started = time.perf_counter()
    with open(folder / "out.txt", "w") as out, open(folder / "err.txt", "w") as err:
        proc = subprocess.Popen(command, env=env, stdout=out, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    text = (folder / "out.txt").read_text()
    found = STAGES.search(text)
    ran, failed = (int(found.group(1)), int(found.group(3))) if found else (0, -1)
    return {"wall": wall, "rc": os.waitstatus_to_exitcode(status), "ran": ran, "failed": failed,
            "rss": usage.ru_maxrss / 1024}


def main() -> None:
    """Command line: see the module docstring."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="configs/default.yaml")
    parser.add_argument("--mirror", default=os.environ.get("RBENCH_MIRROR") or
                        (str(Path("../shared/data")) if Path("../shared/data").is_dir() else None))
    parser.add_argument("--runs", type=int, default=20, help="cold runs per variant (default 20)")
    parser.add_argument("--busy", type=int, default=2 * (os.cpu_count() or 1),
                        help="CPU-bound processes beside the runs (default: two per core)")
    parser.add_argument("--variants", default="processes", help="comma-separated: processes, threads, flow")
    args = parser.parse_args()
    variants = [v.strip() for v in args.variants.split(",")]
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        raise SystemExit(f"unknown variant(s) {unknown}; choose from {sorted(VARIANTS)}")
    spec = yaml.safe_load(Path(args.config).read_text())
    busy = [multiprocessing.Process(target=spin, daemon=True) for _ in range(args.busy)]
    for p in busy:
        p.start()
    results: dict[str, list[dict]] = {v: [] for v in variants}
    try:
        with tempfile.TemporaryDirectory(prefix="rbench-cold-") as tmp:
            for i in range(args.runs):
                for variant in variants:
                    folder = Path(tmp) / f"{variant}-{i}"
                    folder.mkdir()
                    config = folder / "experiment.yaml"
                    execution = {**spec.get("execution", {}), "stage_processes": VARIANTS[variant]}
                    config.write_text(yaml.safe_dump({**spec, "execution": execution}))
                    row = run_once(config, args.mirror, folder, flow=variant == "flow")
                    results[variant].append(row)
                    print(f"run {i + 1:2d} {variant:9s} {row['wall']:7.1f} s  rc {row['rc']}  stages ran {row['ran']}, "
                          f"failed {row['failed']}  peak RSS {row['rss']:.0f} MiB", flush=True)
                    if row["rc"] != 0 or row["failed"] != 0:
                        print((folder / "err.txt").read_text()[-3000:], flush=True)
    finally:
        for p in busy:
            p.terminate()
    print(f"\nmachine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; "
          f"config {args.config}; mirror {args.mirror}; {args.busy} busy processes; "
          "cold store and Prefect home per run")
    medians = {}
    for variant, rows in results.items():
        clean = sum(1 for r in rows if r["rc"] == 0 and r["failed"] == 0)
        medians[variant] = statistics.median(r["wall"] for r in rows)
        print(f"{variant:9s} {clean}/{len(rows)} runs without a failed stage; median wall {medians[variant]:.1f} s; "
              f"peak RSS {max(r['rss'] for r in rows):.0f} MiB")
    if len(medians) == 2 and "threads" in medians:
        print(f"processes / threads wall time: {medians['processes'] / medians['threads']:.3f}")


if __name__ == "__main__":
    main()
