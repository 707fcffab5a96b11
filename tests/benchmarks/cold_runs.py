"""Cold runs of an experiment, with CPU-bound processes beside them: how many finish without a
failed stage, and what stage processes cost against running every build in the flow's threads.

Each run is ``rbench run CONFIG --store <fresh> [--mirror DIR]`` in a fresh process with a fresh
Prefect home (so a temporary Prefect server of its own), while ``--busy`` processes spin on the
CPU (default: two per core, as on a shared cluster node). Each run starts in a session of its own,
as from an operator's shell beside other users' work, so that where the kernel groups CPU time by
session (``sched_autogroup_enabled``) every variant gets the same share of it. The variants
alternate run by run:
``processes`` (the default: builds that load torch, FAISS or an LLM client in stage processes),
``threads`` (``execution.stage_processes: false``, every build in the flow's threads) and
``flow``: the benchmark flow called in a fresh process as a deployment's flow-run process calls
it (no CLI pre-flight, no rbench signal handler; Prefect's engine owns the process), with the
deployment's defaults (stage processes on, the config's runner); and ``deployment``: a real one.
For it the script starts a Prefect server (``prefect server start``, one for all runs), creates
a process work pool and deploys ``deployments/prefect.yaml`` with this checkout's ``HEAD`` as the
code to clone; each run starts a fresh worker (``rbench worker``) with a fresh store and
Prefect home, asks the ``adhoc`` deployment for a flow run through the API, waits for its final
state, stops the worker, and reads the stage report that the run logged to MLflow.

Prints one line per run (variant, wall seconds, exit code, stages ran / failed, peak RSS of the
largest process of the run, the dense encode's own seconds from its stage line), then per
variant how many runs had no failed stage, the median wall time, and the ratio of the medians,
with the machine and the settings. ``--log FILE``
appends each run as a JSON line (with the date, commit, machine and settings) and prints the
tally of every run in the file as well, so that runs measured on different days add up.

    python -m tests.benchmarks.cold_runs --runs 20 --mirror ../shared/data
    python -m tests.benchmarks.cold_runs --runs 3 --variants processes,deployment \
        --log tests/benchmarks/results/cold_runs.jsonl
    python -m tests.benchmarks.cold_runs --runs 2 --busy 0 --variants processes,threads
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import multiprocessing
import os
import platform
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from rbench.worker import children
from tests.system.deployments.conftest import free_port, wait_healthy

VARIANTS = {"processes": True, "threads": False, "flow": True, "deployment": True}  # variant: stage_processes
BIN = Path(sys.executable).parent
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
ENCODE = re.compile(r"encode_seconds=([\d.]+)")


def encode_seconds(folder: Path) -> float | None:
    """The dense encode's own seconds, from the stage line a run printed (``out.txt``, ``err.txt``)."""
    for name in ("out.txt", "err.txt"):
        found = ENCODE.search((folder / name).read_text(errors="replace")) if (folder / name).exists() else None
        if found:
            return float(found.group(1))
    return None


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
        proc = subprocess.Popen(command, env=env, stdout=out, stderr=err, start_new_session=True)
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        except BaseException:
            os.killpg(proc.pid, signal.SIGKILL)
            raise
    wall = time.perf_counter() - started
    text = (folder / "out.txt").read_text()
    found = STAGES.search(text)
    ran, failed = (int(found.group(1)), int(found.group(3))) if found else (0, -1)
    return {"wall": wall, "rc": os.waitstatus_to_exitcode(status), "ran": ran, "failed": failed,
            "encode_seconds": encode_seconds(folder), "rss": usage.ru_maxrss / 1024, "session": "own"}


def git(*args: str) -> str:
    """``git ARGS`` in this checkout; its output."""
    return subprocess.run(["git", *args], capture_output=True, text=True, check=True).stdout.strip()


class Deployed:
    """A Prefect server holding ``deployments/prefect.yaml``'s deployments of this checkout's
    ``HEAD``, in ``folder``; :meth:`run` runs one cold flow run through a fresh worker."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.url = f"http://127.0.0.1:{free_port()}/api"
        self.env = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI", "RBENCH_STORE")}
        self.env.update(PREFECT_HOME=str(folder / "server-home"), PREFECT_API_URL=self.url,
                        PREFECT_SERVER_ANALYTICS_ENABLED="false", PREFECT_WORKER_QUERY_SECONDS="2",
                        RBENCH_GIT_URL=Path.cwd().as_uri(), RBENCH_GIT_COMMIT=git("rev-parse", "HEAD"))
        self.server: subprocess.Popen | None = None

    def __enter__(self) -> Deployed:
        if git("status", "--porcelain", "--untracked-files=no"):
            print(f"note: the deployment runs the committed HEAD ({self.env['RBENCH_GIT_COMMIT'][:12]}), "
                  "not this checkout's uncommitted changes", flush=True)
        log = open(self.folder / "server.log", "w")
        self.server = subprocess.Popen([str(BIN / "prefect"), "server", "start", "--host", "127.0.0.1", "--port",
                                        self.url.split(":")[-1].split("/")[0]], env=self.env, stdout=log,
                                       stderr=subprocess.STDOUT, start_new_session=True)
        wait_healthy(f"{self.url}/health", 180, self.folder / "server.log", self.server)
        for command in (["work-pool", "create", "gpu-pool", "--type", "process"],
                        ["deploy", "--all", "--prefect-file", "deployments/prefect.yaml"]):
            subprocess.run([str(BIN / "prefect"), *command], env=self.env, check=True, capture_output=True)
        return self

    def __exit__(self, *exc) -> None:
        os.killpg(self.server.pid, signal.SIGTERM)
        self.server.wait(timeout=60)

    def run(self, config: Path, mirror: str | None, folder: Path) -> dict:
        """One cold run of ``config`` by the ``adhoc`` deployment, through a fresh worker whose
        environment names a fresh store (and the mirror); the dict of :func:`run_once`."""
        from prefect.client.orchestration import get_client
        from prefect.settings import PREFECT_API_URL, temporary_settings

        env = {**self.env, "PREFECT_HOME": str(folder / "prefect-home"), "RBENCH_STORE": str(folder / "store")}
        env.pop("RBENCH_MIRROR", None)
        env.update({"RBENCH_MIRROR": str(Path(mirror).resolve())} if mirror else {})
        with open(folder / "err.txt", "w") as log:
            worker = subprocess.Popen([str(BIN / "rbench"), "worker", "--pool", "gpu-pool"], cwd=folder,
                                      env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
            try:
                with temporary_settings({PREFECT_API_URL: self.url}), get_client(sync_client=True) as client:
                    adhoc = client.read_deployment_by_name("rbench-benchmark/adhoc")
                    started = time.perf_counter()
                    flow_run = client.create_flow_run_from_deployment(adhoc.id,
                                                                      parameters={"config_path": str(config)})
                    while not (state := client.read_flow_run(flow_run.id).state) or not state.is_final():
                        time.sleep(1)
                    wall = time.perf_counter() - started
                settle(worker)
            finally:
                killed = stop(worker)
        stages = logged_stages(folder / "store", str(flow_run.id), folder)
        ran = sum(s["status"] == "ran" for s in stages)
        failed = len(stages) - ran - sum(s["status"] == "cached" for s in stages) if stages else -1
        (folder / "out.txt").write_text(f"flow run {flow_run.id}: {state.type.value} {state.message or ''}\n")
        return {"wall": wall, "rc": 0 if state.is_completed() else 1, "ran": ran, "failed": failed,
                "encode_seconds": encode_seconds(folder),
                "rss": killed["rss"], "worker_stop": killed["how"], "session": "own"}


def settle(worker: subprocess.Popen, timeout: float = 60) -> None:
    """Wait up to ``timeout`` seconds for the flow-run processes under ``worker`` (an ``rbench
    worker``) to end and be reaped: a flow run reports its final state before its process has
    reaped its stage processes, and stopping it then would lose their peak RSS."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(children(w) for w in children(worker.pid)):
        time.sleep(0.5)


def stop(worker: subprocess.Popen, grace: float = 30) -> dict:
    """Stop ``worker``'s process group as an operator does: SIGTERM, then SIGKILL after ``grace``
    seconds. Returns how it ended (``SIGTERM`` or ``SIGKILL``) and the peak RSS (MiB) of the
    largest process it reaped."""
    os.killpg(worker.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    how = "SIGTERM"
    while True:
        pid, status, usage = os.wait4(worker.pid, os.WNOHANG)
        if pid:
            return {"how": how, "rss": usage.ru_maxrss / 1024}
        if how == "SIGTERM" and time.monotonic() > deadline:
            print(f"note: the worker did not stop within {grace:.0f} s of SIGTERM: SIGKILL", flush=True)
            os.killpg(worker.pid, signal.SIGKILL)
            how = "SIGKILL"
        time.sleep(0.2)


def logged_stages(store: Path, flow_run_id: str, folder: Path) -> list[dict]:
    """The stage report (``stages.json``) that flow run ``flow_run_id`` logged to the store's
    MLflow database; empty when it logged none."""
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    from mlflow import MlflowClient

    database = store / "mlflow.db"
    if not database.is_file():
        return []
    client = MlflowClient(f"sqlite:///{database}")
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()],
                              filter_string=f"tags.`prefect.flow_run_id` = '{flow_run_id}'")
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    if not parents:
        return []
    path = client.download_artifacts(parents[0].info.run_id, "stages.json", str(folder))
    return json.loads(Path(path).read_text())["stages"]


def session_of(row: dict) -> str:
    """Whether a logged run ran in a session of its own or (rows logged before the ``session``
    field, through the CLI) in the busy processes' session, which shares their CPU time when the
    kernel groups it by session (``sched_autogroup_enabled``)."""
    if row.get("session") == "own" or row["variant"] == "deployment":
        return "its own session"
    return "the busy processes' session"


def tally(rows: list[dict], title: str) -> dict[str, float]:
    """Print per variant how many of ``rows`` had no failed stage, the median wall time and the
    peak RSS; return the median wall time per variant."""
    print(title)
    medians = {}
    for variant in dict.fromkeys(r["variant"] for r in rows):
        mine = [r for r in rows if r["variant"] == variant]
        clean = sum(1 for r in mine if r["rc"] == 0 and r["failed"] == 0)
        medians[variant] = statistics.median(r["wall"] for r in mine)
        commits = sorted({r.get("commit", "?")[:8] for r in mine})
        print(f"  {variant:10s} {clean}/{len(mine)} runs without a failed stage; median wall {medians[variant]:.1f} s; "
              f"peak RSS {max(r['rss'] for r in mine):.0f} MiB; commits {', '.join(commits)}")
        sessions = sorted({session_of(r) for r in mine})
        for session in sessions if len(sessions) > 1 else ():
            some = [r for r in mine if session_of(r) == session]
            print(f"    run in {session:27s} {sum(r['rc'] == 0 and r['failed'] == 0 for r in some)}/{len(some)}; "
                  f"median wall {statistics.median(r['wall'] for r in some):.1f} s")
    return medians


def main() -> None:
    """Command line: see the module docstring."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="configs/default.yaml")
    parser.add_argument("--mirror", default=os.environ.get("RBENCH_MIRROR") or
                        (str(Path("../shared/data")) if Path("../shared/data").is_dir() else None))
    parser.add_argument("--runs", type=int, default=20, help="cold runs per variant (default 20)")
    parser.add_argument("--busy", type=int, default=2 * (os.cpu_count() or 1),
                        help="CPU-bound processes beside the runs (default: two per core)")
    parser.add_argument("--variants", default="processes",
                        help="comma-separated: processes, threads, flow, deployment")
    parser.add_argument("--log", type=Path, help="a JSON-lines file to append each run to; its whole tally is printed")
    args = parser.parse_args()
    signal.signal(signal.SIGINT, signal.default_int_handler)  # ignored when started in the background
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    variants = [v.strip() for v in args.variants.split(",")]
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        raise SystemExit(f"unknown variant(s) {unknown}; choose from {sorted(VARIANTS)}")
    spec = yaml.safe_load(Path(args.config).read_text())
    machine = (f"{platform.machine()}, {os.cpu_count()} cores, "
               f"{os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30:.0f} GiB, "
               f"Python {platform.python_version()}")
    settings = {"config": args.config, "busy": args.busy, "machine": machine, "commit": git("rev-parse", "HEAD")}
    busy = [multiprocessing.Process(target=spin, daemon=True) for _ in range(args.busy)]
    for p in busy:
        p.start()
    results: list[dict] = []
    try:
        with tempfile.TemporaryDirectory(prefix="rbench-cold-") as tmp, contextlib.ExitStack() as stack:
            deployed = stack.enter_context(Deployed(Path(tmp))) if "deployment" in variants else None
            for i in range(args.runs):
                for variant in variants:
                    folder = Path(tmp) / f"{variant}-{i}"
                    folder.mkdir()
                    config = folder / "experiment.yaml"
                    execution = {**spec.get("execution", {}), "stage_processes": VARIANTS[variant]}
                    config.write_text(yaml.safe_dump({**spec, "execution": execution}))
                    row = (deployed.run(config, args.mirror, folder) if variant == "deployment" else
                           run_once(config, args.mirror, folder, flow=variant == "flow"))
                    row = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                           "variant": variant, **row, **settings}
                    results.append(row)
                    if args.log:
                        args.log.parent.mkdir(parents=True, exist_ok=True)
                        with open(args.log, "a") as f:
                            f.write(json.dumps(row) + "\n")
                    print(f"run {i + 1:2d} {variant:9s} {row['wall']:7.1f} s  rc {row['rc']}  stages ran {row['ran']}, "
                          f"failed {row['failed']}  peak RSS {row['rss']:.0f} MiB  encode {row['encode_seconds']} s",
                          flush=True)
                    if row["rc"] != 0 or row["failed"] != 0:
                        print((folder / "err.txt").read_text()[-3000:], flush=True)
                        shutil.copytree(folder, Path(tempfile.gettempdir()) / f"rbench-cold-failed-{variant}-{i}",
                                        ignore=shutil.ignore_patterns("store", "*-home"), dirs_exist_ok=True)
    finally:
        for p in busy:
            p.terminate()
    print(f"\nmachine: {machine}; config {args.config}; mirror {args.mirror}; {args.busy} busy processes; "
          f"commit {settings['commit'][:12]}; cold store and Prefect home per run")
    if not results:
        return
    medians = tally(results, "this run:")
    if args.log:
        logged = [json.loads(line) for line in args.log.read_text().splitlines() if line.strip()]
        tally([r for r in logged if r["config"] == args.config and r["busy"] == args.busy],
              f"every run in {args.log} with this config and {args.busy} busy processes:")
    if len(medians) == 2 and "threads" in medians and "processes" in medians:
        print(f"processes / threads wall time: {medians['processes'] / medians['threads']:.3f}")


if __name__ == "__main__":
    main()
