"""What a fully cached rerun of an experiment costs, against importing rbench and reading the config.

Four commands, each a fresh process, timed in rotating order ``--rounds`` times after one
untimed run that builds (or finds) every stage and logs it:

- ``import``: ``python -c`` that imports ``rbench.cli`` and loads the config (the floor);
- ``server``: ``rbench run CONFIG`` with ``PREFECT_API_URL`` pointing at a Prefect server that
  is already running (the normal case on a cluster; started here once, before the rounds);
- ``temporary``: ``rbench run CONFIG`` without one (rbench would start a temporary server);
- ``flow``: ``rbench run CONFIG --force-flow`` with the running server: the flow run and a new
  MLflow run, as before rbench learned to skip a rerun that changes nothing.

Prints the median wall time and peak RSS (of the command's own process) of each, the overhead
over ``import``, and whether the target (a cached rerun with a running server at most 3 s more
than ``import``) holds, with the machine and the settings.

    python tests/benchmarks/cached_rerun.py --config configs/default.yaml --mirror ../shared/data
"""

from __future__ import annotations

import argparse
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

TARGET_SECONDS = 3.0


def timed(command: list[str], env: dict) -> tuple[float, float]:
    """Wall seconds and peak RSS (MiB) of one process; it must succeed."""
    started = time.perf_counter()
    proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed ({proc.returncode}): {proc.stderr.read().decode()[-2000:]}")
    return wall, usage.ru_maxrss / 1024


def start_server(home: Path) -> tuple[subprocess.Popen, str]:
    """A Prefect server of its own on a free port; returns the process and its API URL."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "PREFECT_HOME": str(home), "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    proc = subprocess.Popen([str(Path(sys.executable).parent / "prefect"), "server", "start", "--host", "127.0.0.1",
                             "--port", str(port)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    url = f"http://127.0.0.1:{port}/api"
    for _ in range(240):
        try:
            urllib.request.urlopen(f"{url}/health", timeout=2).close()
            return proc, url
        except OSError:
            time.sleep(0.5)
    raise SystemExit("the Prefect server did not start in 120 s")


def main() -> None:
    """Command line: see the module docstring."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="configs/default.yaml")
    parser.add_argument("--mirror", help="mirror folder (default: $RBENCH_MIRROR)")
    parser.add_argument("--store", help="store folder (default: the config's)")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    rbench = [sys.executable, "-m", "rbench.cli", "run", args.config,
              *(["--mirror", args.mirror] if args.mirror else []), *(["--store", args.store] if args.store else [])]
    floor = [sys.executable, "-c", "import sys, rbench.cli; from rbench.experiment import resolve_experiment; "
             "resolve_experiment(sys.argv[1], None)", args.config]
    base = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    base.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    with tempfile.TemporaryDirectory() as tmp:
        temporary_env = {**base, "PREFECT_HOME": str(Path(tmp) / "cli-home")}
        print("untimed first run (builds or finds every stage) ...", flush=True)
        timed(rbench, temporary_env)
        server, url = start_server(Path(tmp) / "server-home")
        server_env = {**base, "PREFECT_HOME": str(Path(tmp) / "client-home"), "PREFECT_API_URL": url}
        try:
            timed([*rbench, "--force-flow"], server_env)  # the server's first flow run registers the flows
            commands = {"import": (floor, base), "server": (rbench, server_env), "temporary": (rbench, temporary_env),
                        "flow": ([*rbench, "--force-flow"], server_env)}
            walls = {name: [] for name in commands}
            rss = {name: [] for name in commands}
            order = list(commands)
            for r in range(args.rounds):
                for name in order[r % len(order):] + order[:r % len(order)]:
                    wall, peak = timed(*commands[name])
                    walls[name].append(wall)
                    rss[name].append(peak)
        finally:
            server.terminate()
            server.wait(timeout=30)
    print(f"\nmachine: {platform.node()}, {os.cpu_count()} cores, Python {platform.python_version()}; "
          f"config {args.config}; {args.rounds} rounds, rotating order; medians")
    floor_s = statistics.median(walls["import"])
    print(f"{'command':<10} {'wall s':>8} {'over import s':>14} {'x import':>9} {'peak RSS MiB':>13}")
    for name in commands:
        wall = statistics.median(walls[name])
        print(f"{name:<10} {wall:>8.2f} {wall - floor_s:>14.2f} {wall / floor_s:>9.2f} "
              f"{statistics.median(rss[name]):>13.0f}")
    over = statistics.median(walls["server"]) - floor_s
    print(f"target: a cached rerun with a running server at most {TARGET_SECONDS:.0f} s over import: "
          f"{'met' if over <= TARGET_SECONDS else 'NOT met'} ({over:.2f} s)")


if __name__ == "__main__":
    main()
