"""rbench's temporary Prefect server starts while the flow's code loads (issue 58, item 6): the
process :func:`rbench.prefect_server.start_early` starts is the one Prefect's client then asks
for, started with Prefect's own command; and it ends when the process that started it is gone.
About 20 s (two server starts)."""

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
    app = args.index("rbench.prefect_server:server_app")  # Prefect's app, in a server that ends with its parent
    assert seen["args"][app] == "prefect.server.api.server:create_app"
    assert args[:app] + args[app + 1:] == seen["args"][:app] + seen["args"][app + 1:]
    assert env == {**seen["env"], "RBENCH_SERVER_PARENT": str(os.getpid())}


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
    """Whether ``pid`` has ended (a zombie that init has not reaped yet counts)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def test_prefects_client_takes_over_the_server_started_early_and_a_stop_ends_it(tmp_path):
    env = {**os.environ, "PREFECT_HOME": prefect_home(tmp_path / "home")}
    env.pop("PREFECT_API_URL", None)
    proc = subprocess.run([sys.executable, "-c", SCRIPT], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    early = int(proc.stdout.split("EARLY ", 1)[1].split()[0])
    assert "STOPPED" in proc.stdout and _gone(early)


ORPHAN = textwrap.dedent("""
    import os
    from rbench import prefect_server as ps

    ps.start_early()
    print("EARLY", ps._EARLY["process"].pid, flush=True)
    os._exit(0)  # as a killed kernel or a kill -9: no atexit, no signal to the server's session
""")


def test_a_temporary_server_whose_starter_is_killed_ends_itself(tmp_path):
    """A temporary server outlives no process that started it (a notebook kernel's runs in a
    session of its own; a killed kernel left it running for good)."""
    import time

    env = {**os.environ, "PREFECT_HOME": prefect_home(tmp_path / "home")}
    env.pop("PREFECT_API_URL", None)
    proc = subprocess.run([sys.executable, "-c", ORPHAN], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=120)
    early = int(proc.stdout.split("EARLY ", 1)[1].split()[0])
    deadline = time.monotonic() + 60  # its imports first (seconds on a busy machine), then half a second
    while not _gone(early) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _gone(early), f"the server {early} outlived the process that started it"
