"""The Prefect server's database under several clients at once: SQLite against Postgres.

Starts ``prefect server start`` on each database given (``sqlite``: the server's default file
in a fresh ``PREFECT_HOME``; or a ``postgresql+asyncpg://`` URL), then runs ``--clients``
``rbench run`` processes at once against it, as workers on one server do. Each client runs a
generated experiment (a small corpus, ``--retrievers`` bm25s variants on the thread runner) in
a store of its own, so every stage task runs and reports its states. Prints, per database:
wall seconds, client failures, and the server log lines that say "database is locked".

    python tests/benchmarks/server_database.py --database sqlite \\
        --database postgresql+asyncpg://prefect:PASSWORD@127.0.0.1:5432/prefect
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]


def experiment(folder: Path, retrievers: int) -> Path:
    """A generated experiment: 300 objects, 20 questions, ``retrievers`` bm25s variants."""
    corpus = [{"doc": f"d{i % 60}", "text": f"object {i} about topic {i % 60} and item {i * 7 % 101}"}
              for i in range(300)]
    queries = [{"id": f"q{i}", "q": f"topic {i} item {i * 7 % 101}", "gold": [f"d{i}"]} for i in range(20)]
    (folder / "corpus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in corpus))
    (folder / "queries.jsonl").write_text("".join(json.dumps(r) + "\n" for r in queries))
    config = {
        "name": "server-load", "depth": 10, "subsample": {"size": 20}, "metrics": {"k": [1, 5]},
        "execution": {"runner": "threads", "max_workers": 8},
        "datasets": [{"name": "load", "adapter": "jsonl", "params": {
            "corpus": str(folder / "corpus.jsonl"), "queries": str(folder / "queries.jsonl"), "text_field": "text",
            "doc_id_fields": ["doc"], "query_id_field": "id", "query_text_field": "q", "gold_field": "gold"}}],
        "retrievers": [{"name": "bm25s", "label": f"bm25s-{i}", "params": {"k1": round(0.5 + 0.05 * i, 2)}}
                       for i in range(retrievers)],
    }
    path = folder / "load.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def start_server(home: Path, database: str) -> tuple[subprocess.Popen, str, Path]:
    """A Prefect server on ``database``; returns the process, its API URL and its log file."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "PREFECT_HOME": str(home), "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    if database != "sqlite":
        env["PREFECT_API_DATABASE_CONNECTION_URL"] = database
    log = home / "server.log"
    home.mkdir(parents=True)
    proc = subprocess.Popen([str(Path(sys.executable).parent / "prefect"), "server", "start", "--host", "127.0.0.1",
                             "--port", str(port)], env=env, stdout=log.open("w"), stderr=subprocess.STDOUT,
                            start_new_session=True)
    url = f"http://127.0.0.1:{port}/api"
    for _ in range(240):
        try:
            urllib.request.urlopen(f"{url}/health", timeout=2).close()
            return proc, url, log
        except OSError:
            time.sleep(0.5)
    raise SystemExit(f"the Prefect server on {database.split('@')[-1]} did not start in 120 s: see {log}")


def load(database: str, clients: int, config: Path, work: Path) -> dict:
    """Run ``clients`` ``rbench run`` processes at once against a server on ``database``."""
    server, url, log = start_server(work / "server", database)
    try:
        env = {**os.environ, "PREFECT_API_URL": url, "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
        env.pop("MLFLOW_TRACKING_URI", None)
        started = time.perf_counter()
        procs = [subprocess.Popen([sys.executable, "-m", "rbench.cli", "run", str(config), "--store",
                                   str(work / f"store{i}")], cwd=REPO, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.PIPE, text=True,
                                  env={**env, "PREFECT_HOME": str(work / f"client{i}")}) for i in range(clients)]
        errors = [p.communicate()[1] for p in procs]
        wall = time.perf_counter() - started
    finally:
        server.terminate()
        server.wait(timeout=60)
    failed = [e.strip().splitlines()[-1] if e.strip() else f"exit {p.returncode}"
              for p, e in zip(procs, errors) if p.returncode != 0]
    locked = sum("database is locked" in line for line in log.read_text(errors="replace").splitlines())
    return {"wall": wall, "failed": failed, "locked": locked}


def main() -> None:
    """Command line: see the module docstring."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database", action="append", required=True,
                        help="'sqlite' or a postgresql+asyncpg:// URL (repeat to compare)")
    parser.add_argument("--clients", type=int, default=2)
    parser.add_argument("--retrievers", type=int, default=12)
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        config = experiment(Path(tmp), args.retrievers)
        for n, database in enumerate(args.database):
            result = load(database, args.clients, config, Path(tmp) / f"db{n}")
            rows.append((database.split("://")[0] if "@" in database else database, result))
    print(f"\nmachine: {platform.node()}, {os.cpu_count()} cores, Python {platform.python_version()}; "
          f"{args.clients} clients at once, {args.retrievers} retrievers each ({3 + 3 * args.retrievers} stage "
          "tasks per client, thread runner, 8 workers)")
    print(f"{'database':<22} {'wall s':>7} {'clients failed':>15} {'database is locked':>19}")
    for name, r in rows:
        print(f"{name:<22} {r['wall']:>7.1f} {len(r['failed']):>15} {r['locked']:>19}")
        for line in r["failed"]:
            print(f"  failed: {line}")


if __name__ == "__main__":
    main()
