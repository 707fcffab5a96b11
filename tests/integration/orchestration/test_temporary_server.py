"""rbench's temporary Prefect server (issue 58, item 6; issue 67, items 3 and 4): the process
:func:`rbench.orchestration.prefect_server.start_early` starts, with Prefect's own command, is the API every
Prefect client of the run talks to, its background services included, and Prefect's own server
module is never loaded in the run's process; a stop ends it, at once while it still loads; and it
ends when the process that started it is gone. About 20 s (three server starts)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

from tests.conftest import REPO, prefect_home


def test_the_early_command_is_the_one_prefects_server_class_runs(monkeypatch):
    from prefect.server.api import server as api

    from rbench.orchestration.prefect_server import uvicorn_command

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
        server._run_uvicorn_command()  # a test's look at Prefect's private command, so that rbench needs none
    finally:
        api.SubprocessASGIServer._instances.pop(8999, None)
    args, env = uvicorn_command(8999)
    app = args.index("rbench.orchestration.prefect_server:server_app")  # Prefect's, in a server ending with its parent
    assert seen["args"][app] == "prefect.server.api.server:create_app"
    assert args[:app] + args[app + 1:] == seen["args"][:app] + seen["args"][app + 1:]
    server_env = {k: seen["env"][k]
                  for k in ("PREFECT_UI_ENABLED", "PREFECT__SERVER_EPHEMERAL", "PREFECT__SERVER_FINAL")}
    assert env == {**os.environ, **server_env, "RBENCH_SERVER_PARENT": str(os.getpid())}


SCRIPT = textwrap.dedent("""
    import os, sys, time
    from rbench.orchestration import prefect_server as ps

    ps.start_early()
    early = ps._STARTED[-1].process.pid
    assert "prefect" not in sys.modules  # started before Prefect is imported
    print("EARLY", early, flush=True)
    server = ps.temporary_server()
    assert server.process.pid == early and os.environ["PREFECT_API_URL"] == server.url
    from prefect import flow, get_run_logger
    from prefect.client.orchestration import get_client

    @flow
    def hello():
        get_run_logger().info("hello")  # sent by Prefect's log service, from a thread of its own
        return 1

    assert hello() == 1
    with get_client(sync_client=True) as client:
        assert client.api_healthcheck() is None and client.api_url == server.url + "/"
        assert [r.name for r in client.read_flow_runs() if r.state.is_completed()]
        deadline = time.monotonic() + 30  # the log service sends in batches
        while not any(l.message == "hello" for l in client.read_logs()) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert any(l.message == "hello" for l in client.read_logs())
    assert "prefect.server.api.server" not in sys.modules  # Prefect started no server of its own
    ps.stop_temporary_server()
    assert "PREFECT_API_URL" not in os.environ and "RBENCH_TEMPORARY_API" not in os.environ
    print("STOPPED", flush=True)
""")


def _gone(pid: int) -> bool:
    """Whether ``pid`` has ended (a zombie that init has not reaped yet counts)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def test_every_prefect_client_of_a_run_talks_to_the_early_server_and_a_stop_ends_it(tmp_path):
    env = {**os.environ, "PREFECT_HOME": prefect_home(tmp_path / "home")}
    env.pop("PREFECT_API_URL", None)
    proc = subprocess.run([sys.executable, "-c", SCRIPT], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    early = int(proc.stdout.split("EARLY ", 1)[1].split()[0])
    assert "STOPPED" in proc.stdout and _gone(early)


ORPHAN = textwrap.dedent("""
    import os
    from rbench.orchestration import prefect_server as ps

    ps.start_early()
    print("EARLY", ps._STARTED[-1].process.pid, flush=True)
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


LOADING = textwrap.dedent("""
    import time
    from rbench.orchestration import prefect_server as ps

    ps.start_early()
    pid = ps._STARTED[-1].process.pid
    started = time.monotonic()
    ps.stop_temporary_server()
    print("STOPPED", pid, round(time.monotonic() - started, 2), flush=True)
""")


def test_a_server_stopped_while_it_loads_ends_at_once(tmp_path):
    """A run whose stages are all cached stops the server it started early before that server has
    loaded its code: the stop kills it rather than wait seconds for it to handle SIGTERM."""
    env = {**os.environ, "PREFECT_HOME": prefect_home(tmp_path / "home")}
    env.pop("PREFECT_API_URL", None)
    proc = subprocess.run([sys.executable, "-c", LOADING], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    pid, seconds = proc.stdout.split("STOPPED ", 1)[1].split()
    assert _gone(int(pid)) and float(seconds) < 1.0, proc.stdout


def test_a_server_that_does_not_answer_in_time_is_stopped_and_one_error_names_the_setting(tmp_path, monkeypatch):
    """A process that never answers ``/health`` (a busy machine's server) is stopped after the wait
    and the error names the wait and ``RBENCH_SERVER_STARTUP_SECONDS``. Under a second."""
    import pytest

    from rbench.core.errors import RbenchError
    from rbench.orchestration.prefect_server import TemporaryServer, _free_port

    monkeypatch.setenv("PREFECT_HOME", str(tmp_path))
    (tmp_path / "temporary-server.log").write_text("loading\n")
    silent = TemporaryServer(_free_port(), subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]))
    with pytest.raises(RbenchError) as error:
        silent.wait_until_ready(0.3)
    assert str(error.value).startswith("Prefect's temporary server did not answer within 0.3s; its output is in "
                                       f"{tmp_path / 'temporary-server.log'}:\n  loading\n")
    assert "raise RBENCH_SERVER_STARTUP_SECONDS" in str(error.value) and silent.process.poll() is not None


PROFILE = textwrap.dedent("""
    import os
    from rbench.orchestration import prefect_server as ps

    ps.start_early()  # Prefect is not loaded yet: only the environment was read
    early = ps._STARTED[-1].process
    assert ps.temporary_server() is None  # the profile names a server: the flows report there
    assert early.poll() is not None and not ps._STARTED and "RBENCH_TEMPORARY_API" not in os.environ
    ps.start_early()  # Prefect is loaded now: its settings are read, and nothing starts
    assert not ps._STARTED
    print("UNUSED", early.pid, flush=True)
""")


def test_a_server_a_prefect_profile_names_stops_the_early_one_unused(tmp_path):
    """A Prefect profile (not the environment) that names a server of its own is read once Prefect
    loads: the server started early in vain is stopped, and none starts again. ~2 s."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "profiles.toml").write_text('active = "own"\n\n[profiles.own]\n'
                                        'PREFECT_API_URL = "http://127.0.0.1:9/api"\n')
    env = {**os.environ, "PREFECT_HOME": str(home), "PREFECT_PROFILES_PATH": str(home / "profiles.toml")}
    env.pop("PREFECT_API_URL", None)
    proc = subprocess.run([sys.executable, "-c", PROFILE], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert _gone(int(proc.stdout.split("UNUSED ", 1)[1].split()[0]))
