"""Prefect's temporary server, as an ``rbench`` command starts it: its own output goes to a log
file beside its database, not to the user's terminal, and it starts while the flow's code loads.

With no ``PREFECT_API_URL``, Prefect starts a temporary API server in a child process that
writes to the caller's stderr. Its services log their own troubles there as tracebacks (a
busy sqlite database under load: "database is locked", a batch of task-run events dropped),
which read as rbench failing when the run is fine. :func:`log_temporary_server` starts the
same server with its output appended to ``$PREFECT_HOME/temporary-server.log``; Prefect's
clients find it, since they ask for the one instance per port. In a Jupyter kernel the server
runs in a session of its own: the kernel's "interrupt" signals the kernel's whole process group,
and a server killed by it left the run retrying its Crashed state for minutes; it stops with the
kernel (Prefect stops it at exit).

A cold run waited about 3.5 s for the server to answer after the flow's modules (and Prefect's
server module, 1.3 s) had loaded. :func:`start_early` starts the server's process once the run's
checks have passed, before that loading, with the command Prefect's own server class runs; the
server Prefect's client then asks for takes that process over and waits for it to answer.

Prefect has no public API for either, so this module, and no other, touches three private names
of ``prefect.server.api.server.SubprocessASGIServer`` (listed in :data:`PREFECT_PRIVATE_NAMES`):
``_instances`` (its one instance per port, which Prefect's client asks for), ``_run_uvicorn_command``
(overridden to take the early process over) and ``start(timeout)``'s contract. Each has a test of
its own (``tests/unit/test_prefect_seam.py``), so a Prefect upgrade that changes one fails that
test, not a user's run.
"""

from __future__ import annotations

import atexit
import functools
import os
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

from rbench.core import settings
from rbench.core.errors import RbenchError
from rbench.core.processes import watch_parent
from rbench.core.stopping import in_a_notebook

LOG_NAME = "temporary-server.log"
_EARLY: dict = {}  # "port" and "process" of a server start_early started and no server took over yet


PREFECT_PRIVATE_NAMES = ("SubprocessASGIServer._instances", "SubprocessASGIServer._run_uvicorn_command",
                         "SubprocessASGIServer.start")
"""What this module relies on in ``prefect.server.api.server`` beyond Prefect's public API (one test each)."""

def server_log() -> Path:
    """Where the temporary server's output goes: ``temporary-server.log`` in Prefect's home."""
    from prefect.settings import get_current_settings

    return Path(get_current_settings().home).expanduser() / LOG_NAME


def _last_lines(path: Path, count: int = 5) -> str:
    try:
        lines = [line for line in path.read_text(encoding="utf-8", errors="replace").splitlines() if line.strip()]
    except OSError:
        return ""
    return "\n".join(f"  {line}" for line in lines[-count:])


def uvicorn_command(port: int) -> tuple[list[str], dict[str, str]]:
    """The command and environment of Prefect 3.8's temporary server on ``port``, as
    ``SubprocessASGIServer._run_uvicorn_command`` (``prefect/server/api/server.py``) builds them
    (a test checks that they agree), but for the app, :func:`server_app`, and the process it ends
    with (this one)."""
    import prefect
    from prefect.settings import get_current_settings

    args = [sys.executable, "-m", "uvicorn", "--app-dir", str(prefect.__module_path__.parent), "--factory",
            "rbench.prefect_server:server_app", "--host", "127.0.0.1", "--port", str(port),
            "--log-level", "error", "--lifespan", "on"]
    env = {**os.environ, "PREFECT_UI_ENABLED": "0", "PREFECT__SERVER_EPHEMERAL": "1", "PREFECT__SERVER_FINAL": "1",
           **get_current_settings().to_environment_variables(exclude_unset=True),
           settings.SERVER_PARENT: str(os.getpid())}
    return args, env


def server_app():
    """Prefect's server app (``prefect.server.api.server:create_app``) in a temporary server that
    ends itself (as SIGTERM ends it) when the process that started it is gone: a notebook
    kernel's server runs in a session of its own, which no signal of the kernel's reaches, and a
    killed kernel (or a ``kill -9``'d command) left it running for good."""
    from prefect.server.api.server import create_app

    parent = settings.server_parent()
    if parent is not None:
        threading.Thread(target=watch_parent, args=(parent, _terminate), name="rbench-parent-watch",
                         daemon=True).start()
    return create_app()


def _terminate() -> None:
    os.kill(os.getpid(), signal.SIGTERM)  # uvicorn's shutdown: the services stop, the database is closed


def _spawn(port: int) -> subprocess.Popen:
    """Prefect's temporary server on ``port``, its output appended to :func:`server_log`; in a
    notebook in a session of its own (a kernel's interrupt is its whole process group's)."""
    args, env = uvicorn_command(port)
    log = server_log()
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        return subprocess.Popen(args, env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=in_a_notebook())


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _server_module():
    return sys.modules.get("prefect.server.api.server")


def start_early() -> None:
    """Start the temporary server's process now, where this process will ask Prefect for one (no
    ``PREFECT_API_URL``, Prefect's temporary servers allowed, none started yet); it answers while
    the flow's code loads. Stopped at exit, or by :func:`stop_temporary_servers`, unless a
    server took it over."""
    from prefect.settings import get_current_settings

    module, current = _server_module(), get_current_settings()
    if _EARLY or current.api.url or not current.server.ephemeral.enabled or \
            (module and module.SubprocessASGIServer._instances):
        return
    port = _free_port()
    _EARLY.update(port=port, process=_spawn(port))
    atexit.register(_stop_early)


def _stop_early() -> None:
    process = _EARLY.pop("process", None)
    _EARLY.clear()
    if process is not None and process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def stop_temporary_servers() -> None:
    """Stop the temporary Prefect server this process started (a signal ends the process at once)."""
    _stop_early()
    module = _server_module()
    for instance in list(getattr(getattr(module, "SubprocessASGIServer", None), "_instances", {}).values()):
        instance.stop()


@functools.cache
def _logged_server_class() -> type:
    from prefect.server.api import server as api

    class LoggedServer(api.SubprocessASGIServer):
        """Prefect's temporary server, its output appended to :func:`server_log`, given
        ``RBENCH_SERVER_STARTUP_SECONDS`` to answer; a server that does not start is one error
        that shows the log's last lines and names the setting. It takes over the process
        :func:`start_early` started."""

        def start(self, timeout: int | None = None) -> None:
            wait = timeout or settings.server_startup_seconds()
            if self.port is None and _EARLY:
                self.port = _EARLY["port"]
            try:
                super().start(wait)
            except Exception as e:
                first = str(e).splitlines()[0] if str(e) else type(e).__name__
                tail = _last_lines(server_log())
                raise RbenchError(
                    f"Prefect's temporary server did not start within {wait:.0f}s ({first}); its output is in "
                    f"{server_log()}{':' + chr(10) + tail + chr(10) if tail else ' (empty). '}"
                    "On a busy machine raise RBENCH_SERVER_STARTUP_SECONDS; or run a server (prefect server start) "
                    "and set PREFECT_API_URL") from None

        def _run_uvicorn_command(self):
            early = _EARLY.get("process")
            if early is not None and _EARLY["port"] == self.port and early.poll() is None:
                _EARLY.clear()
                return early
            _stop_early()
            return _spawn(self.port)

    return LoggedServer


def log_temporary_server() -> Path | None:
    """Make the temporary server that Prefect's clients start in this process write to
    :func:`server_log` (taking over the one :func:`start_early` started); return that path, or
    None when Prefect talks to a server of its own (``PREFECT_API_URL``) or a temporary one of
    Prefect's already runs."""
    from prefect.settings import get_current_settings

    if get_current_settings().api.url:
        return None
    from prefect.server.api.server import SubprocessASGIServer

    logged = _logged_server_class()
    existing = SubprocessASGIServer._instances.get(None)
    if existing is None:
        existing = logged()
    return server_log() if isinstance(existing, logged) else None
