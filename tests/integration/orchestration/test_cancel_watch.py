"""A cancel is honoured whatever the server did (issue 81, item 3): a run on a real Prefect server of
one's own, the server restarted under it, then ``Cancelling`` set as ``prefect flow-run cancel`` sets
it. ~40-60 s: a Prefect server started twice and a flow process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid

import httpx
import pytest

from rbench.orchestration.prefect_server import uvicorn_command

LONG_RUN = """
import time
from prefect import flow
from prefect.runtime import flow_run
from rbench.orchestration.runner import ended_by_termination

@flow
def long_run():
    with ended_by_termination(grace_seconds=2):
        print(flow_run.get_id(), flush=True)
        for _ in range(600):  # stages that go on for ten minutes
            time.sleep(0.1)

long_run()
"""


def _server(port: int, home) -> subprocess.Popen:
    args, env = uvicorn_command(port)
    env = {**env, "PREFECT_HOME": str(home), "PREFECT_API_DATABASE_CONNECTION_URL": f"sqlite+aiosqlite:///{home}/p.db"}
    proc = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/api/health", timeout=2).status_code == 200:
                return proc
        except httpx.HTTPError:
            pass
        if proc.poll() is not None:
            raise RuntimeError(f"the Prefect server ended with {proc.returncode}")
        time.sleep(0.3)
    proc.kill()
    raise RuntimeError("the Prefect server did not answer in 120 s")


def _stop(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def test_a_cancel_after_the_server_restarted_ends_the_run_within_ten_seconds(tmp_path):
    """On main 5aabe61 nothing of the run watched for its cancel: it ran to its end (here ten more minutes)."""
    from prefect.client.orchestration import get_client
    from prefect.settings import PREFECT_API_URL, temporary_settings
    from prefect.states import Cancelling

    port = int(subprocess.check_output([sys.executable, "-c", "import socket; s = socket.socket(); "
                                        "s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])"]))
    url = f"http://127.0.0.1:{port}/api"
    server = _server(port, tmp_path)
    env = {**os.environ, "PREFECT_API_URL": url, "PREFECT_HOME": str(tmp_path / "client"),
           "PREFECT_LOGGING_LEVEL": "WARNING"}
    run = subprocess.Popen([sys.executable, "-c", LONG_RUN], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True)
    try:
        flow_run_id = uuid.UUID(run.stdout.readline().strip())
        _stop(server)
        time.sleep(3)  # the run's watch finds no server for a while
        server = _server(port, tmp_path)
        with temporary_settings(updates={PREFECT_API_URL: url}), get_client(sync_client=True) as client:
            assert client.read_flow_run(flow_run_id).state.is_running()
            client.set_flow_run_state(flow_run_id, Cancelling(message="cancelled by the test"), force=True)
            cancelled = time.monotonic()
            try:
                run.wait(timeout=30)
            except subprocess.TimeoutExpired:
                pytest.fail("the run went on 30 s after its cancel")
            took = time.monotonic() - cancelled
            state = client.read_flow_run(flow_run_id).state
            history = [(s.type.value, s.message) for s in client.read_flow_run_states(flow_run_id)]
        err = run.stderr.read()
        assert took < 10, (took, err[-2000:])
        assert run.returncode in (-15, 143), err[-2000:]
        assert state.is_cancelled(), (history, err[-3000:])
        assert "was cancelled (its state is Cancelling): stopping" in err
    finally:
        run.kill()
        _stop(server)
