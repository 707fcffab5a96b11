"""A real Prefect server for the deployment tests, and helpers to drive it."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.conftest import REPO, missing, prefect_home

BIN = Path(sys.executable).parent


def free_port(count: int = 1) -> int:
    """A free port, the first of ``count`` free consecutive ones (the workers' health ports bind
    base, base + 1, ... on all interfaces; a taken base + 1 failed a run once)."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            base = s.getsockname()[1]
        try:
            for port in range(base, base + count):
                with socket.socket() as s:
                    s.bind(("0.0.0.0", port))
            return base
        except OSError:
            continue


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, check=True).stdout.strip()


POSTGRES = "RBENCH_TEST_POSTGRES"  # a postgresql+asyncpg:// URL: each server gets a fresh database there


def _postgres_database(url: str, name: str, create: bool) -> str:
    """Create (or drop) database ``name`` on the Postgres server of ``url``; return its URL."""
    import asyncio

    import asyncpg

    async def run() -> None:
        connection = await asyncpg.connect(url.replace("postgresql+asyncpg://", "postgresql://"))
        try:
            await connection.execute(f'CREATE DATABASE "{name}"' if create else f'DROP DATABASE IF EXISTS "{name}"')
        finally:
            await connection.close()

    asyncio.run(run())
    return f"{url.rsplit('/', 1)[0]}/{name}"


@pytest.fixture
def server(tmp_path):
    """A Prefect server on SQLite, or on a fresh Postgres database when ``RBENCH_TEST_POSTGRES`` names
    a Postgres server; its log is ``server.log`` in the test's folder."""
    if shutil.which("git") is None or not (REPO / ".git").exists():
        missing("the deployment clones the repository with git: needs git and a checkout")
    port = free_port()
    env = {**os.environ, "PREFECT_HOME": prefect_home(tmp_path / "prefect-home"), "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
           "PREFECT_API_URL": f"http://127.0.0.1:{port}/api", "PREFECT_SERVER_SERVICES_SCHEDULER_LOOP_SECONDS": "2",
           "PREFECT_LOGGING_LEVEL": "WARNING", "PREFECT_WORKER_QUERY_SECONDS": "2"}
    database = f"rbench_test_{port}" if os.environ.get(POSTGRES) else None
    if database:
        env["PREFECT_API_DATABASE_CONNECTION_URL"] = _postgres_database(os.environ[POSTGRES], database, create=True)
    log = open(tmp_path / "server.log", "w")
    proc = subprocess.Popen([str(BIN / "prefect"), "server", "start", "--host", "127.0.0.1", "--port", str(port)],
                            env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_healthy(f"http://127.0.0.1:{port}/api/health", 120, tmp_path / "server.log", proc)
        yield env
    finally:
        os.killpg(proc.pid, 15)
        proc.wait(timeout=30)
        log.close()
        if database:
            _postgres_database(os.environ[POSTGRES], database, create=False)


def wait_healthy(url: str, timeout: float, log: Path, proc: subprocess.Popen | None = None) -> None:
    """Wait until ``url`` answers; fail with the end of ``log`` after ``timeout`` s or when ``proc`` exits."""
    deadline = time.time() + timeout
    while True:
        try:
            urllib.request.urlopen(url, timeout=2).close()
            return
        except OSError:
            if time.time() > deadline or (proc is not None and proc.poll() is not None):
                raise RuntimeError(log.read_text()[-3000:]) from None
            time.sleep(1)


def stop_group(proc: subprocess.Popen, timeout: float = 30) -> None:
    """SIGTERM to ``proc``'s process group, as an operator stops workers; SIGKILL what is left
    after ``timeout`` s (a worker under load can take longer to shut down gracefully). A group
    that has ended already is only waited for."""
    try:
        os.killpg(proc.pid, 15)
    except ProcessLookupError:
        proc.wait(timeout=timeout)
        return
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        proc.wait(timeout=30)


def prefect(env, *args: str, **kwargs) -> subprocess.CompletedProcess:
    out = subprocess.run([str(BIN / "prefect"), *args], env=env, cwd=REPO, capture_output=True, text=True, **kwargs)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    return out


def wait_final(client, flow_run_id, timeout=600):
    deadline = time.time() + timeout
    while time.time() < deadline:
        run = client.read_flow_run(flow_run_id)
        if run.state is not None and run.state.is_final():
            return run
        time.sleep(2)
    raise TimeoutError(f"flow run {flow_run_id} did not finish in {timeout}s: {run.state}")


