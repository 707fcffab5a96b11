"""rbench's temporary Prefect server starts while the flow's code loads (issue 58, item 6): the
process :func:`rbench.prefect_server.start_early` starts is the one Prefect's client then asks
for, started with Prefect's own command. About 10 s (one server start)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

from tests.conftest import REPO, prefect_home


def test_the_early_command_is_the_one_prefects_server_class_runs(monkeypatch):
    from prefect.server.api import server as api

    from rbench.prefect_server import uvicorn_command

    seen = {}

    class Recorder:
        def __getattr__(self, name):
            return getattr(subprocess, name)

        @staticmethod
        def Popen(args, env=None, **kwargs):  # noqa: N802 - subprocess's name
            seen.update(args=args, env=env)

    monkeypatch.setattr(api, "subprocess", Recorder())
    server = api.SubprocessASGIServer(port=8999)
    try:
        server._run_uvicorn_command()
    finally:
        api.SubprocessASGIServer._instances.pop(8999, None)
    args, env = uvicorn_command(8999)
    assert args == seen["args"] and env == seen["env"]


SCRIPT = textwrap.dedent("""
    import httpx
    from prefect.settings import get_current_settings
    from rbench import prefect_server as ps

    ps.start_early()
    early = ps._EARLY["process"].pid
    print("EARLY", early, flush=True)
    assert ps.log_temporary_server() == ps.server_log()
    from prefect.server.api.server import SubprocessASGIServer

    server = SubprocessASGIServer()  # what Prefect's client asks for when no PREFECT_API_URL is set
    server.start()
    assert server.server_process.pid == early, (server.server_process.pid, early)
    assert httpx.get(server.api_url + "/health").status_code == 200
    ps.stop_temporary_servers()
    print("STOPPED", flush=True)
""")


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_prefects_client_takes_over_the_server_started_early_and_a_stop_ends_it(tmp_path):
    env = {**os.environ, "PREFECT_HOME": prefect_home(tmp_path / "home")}
    env.pop("PREFECT_API_URL", None)
    proc = subprocess.run([sys.executable, "-c", SCRIPT], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    early = int(proc.stdout.split("EARLY ", 1)[1].split()[0])
    assert "STOPPED" in proc.stdout and _gone(early)
