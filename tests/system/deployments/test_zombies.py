"""The zombie automation on a real Prefect server: it crashes a killed rbench-heartbeat run, and
leaves alone a flow that is not rbench's, an ``rbench run`` from a shell (heartbeats at Prefect's
default frequency, far apart), a healthy watched run and a watched run that already finished."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from tests.conftest import REPO
from tests.system.deployments.conftest import wait_final

pytestmark = pytest.mark.slow

GRACE = 60  # the least zombies.py accepts: twice the deployments' 30 s heartbeat

SLEEPER = """
import sys, time
from prefect import flow, tags

@flow(name=sys.argv[1])
def sleeper(seconds: float):
    print("started", flush=True)
    time.sleep(seconds)

with tags(*sys.argv[3:]):
    sleeper(float(sys.argv[2]))
"""


def test_only_a_dead_rbench_heartbeat_run_is_crashed(server, tmp_path):
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowFilter, FlowFilterName
    from prefect.settings import PREFECT_API_URL, temporary_settings

    out = subprocess.run([sys.executable, "deployments/zombies.py", "--grace", str(GRACE)], env=server, cwd=REPO,
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    script = tmp_path / "sleeper.py"
    script.write_text(SLEEPER)
    watched = {**server, "PREFECT_FLOWS_HEARTBEAT_FREQUENCY": "30"}
    runs = {  # flow name: (seconds, environment, tags)
        "other-team": (GRACE + 20, server, []),
        "rbench-shell": (GRACE + 20, server, ["rbench"]),
        "rbench-healthy": (GRACE + 20, watched, ["rbench", "rbench-heartbeat"]),
        "rbench-finished": (1, watched, ["rbench", "rbench-heartbeat"]),
        "rbench-killed": (600, watched, ["rbench", "rbench-heartbeat"]),
    }
    procs = {name: subprocess.Popen([sys.executable, str(script), name, str(seconds), *tags], env=env,
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                    start_new_session=True)
             for name, (seconds, env, tags) in runs.items()}
    try:
        killed = procs["rbench-killed"]
        for line in killed.stdout:
            if line.startswith("started"):
                break
        time.sleep(5)  # its first heartbeat is sent as the flow starts
        os.killpg(killed.pid, signal.SIGKILL)
        killed.wait(timeout=30)
        for name, proc in procs.items():
            if name != "rbench-killed":
                assert proc.wait(timeout=GRACE + 120) == 0, proc.stdout.read()[-2000:]
        with temporary_settings({PREFECT_API_URL: server["PREFECT_API_URL"]}), get_client(sync_client=True) as client:
            def run_of(name):
                (run,) = client.read_flow_runs(flow_filter=FlowFilter(name=FlowFilterName(any_=[name])))
                return run

            crashed = wait_final(client, run_of("rbench-killed").id, timeout=GRACE + 90)
            assert crashed.state.is_crashed() and "no heartbeat" in crashed.state.message
            for name in ("other-team", "rbench-shell", "rbench-healthy", "rbench-finished"):
                run = run_of(name)
                history = client.read_flow_run_states(run.id)
                assert run.state.is_completed(), (name, run.state)
                assert not any(s.is_crashed() for s in history), (name, [s.name for s in history])
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
