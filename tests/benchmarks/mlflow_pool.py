"""MLflow's SQL store on a local sqlite database: its default connection pool (``QueuePool``)
against ``NullPool``, which rbench sets (``rbench/tracking/backend.py``, ``prepare_tracking``) so
that a database deleted and made again in one process is written to again. Alternating rounds
in one process, a fresh database (a copy of the migrated empty one) for each; each round creates
an experiment and ``--runs`` runs of 20 metrics, a parameter and an end. Prints each variant's
rounds, median and the cost per MLflow call, with the machine and peak RSS.

    python tests/benchmarks/mlflow_pool.py --rounds 4
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import statistics
import tempfile
import time
from pathlib import Path

METRICS = 20


def one_round(uri: str, runs: int) -> float:
    from mlflow.tracking import MlflowClient

    from rbench.tracking.backend import prepare_tracking

    prepare_tracking(uri)
    started = time.perf_counter()
    client = MlflowClient(uri)
    experiment = client.create_experiment("pool")
    for _ in range(runs):
        run_id = client.create_run(experiment).info.run_id
        for i in range(METRICS):
            client.log_metric(run_id, f"m{i}", i / 10)
        client.log_param(run_id, "p", "v")
        client.set_terminated(run_id)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="rbench-mlflow-pool-"))
    times: dict[str, list[float]] = {"QueuePool": [], "NullPool": []}
    for r in range(args.rounds):
        for pool in times:
            os.environ["MLFLOW_SQLALCHEMYSTORE_POOLCLASS"] = pool  # read when MLflow makes the URI's store
            times[pool].append(one_round(f"sqlite:///{root}/{pool}-{r}.db", args.runs))
    calls = 1 + args.runs * (METRICS + 3)
    print(f"machine: {platform.node()}, {os.cpu_count()} cores, Python {platform.python_version()}; "
          f"{args.rounds} alternating rounds of {calls} MLflow calls")
    for pool, seconds in times.items():
        print(f"  {pool:<9} rounds {[round(s, 2) for s in seconds]}  median {statistics.median(seconds):.2f} s")
    extra = statistics.median(times["NullPool"]) - statistics.median(times["QueuePool"])
    print(f"  NullPool - QueuePool: {extra:+.2f} s, {1000 * extra / calls:+.2f} ms per call")
    print(f"  peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024} MiB")


if __name__ == "__main__":
    main()
