"""Prefect's temporary server, as an ``rbench`` command starts it: its own output goes to a log
file beside its database, not to the user's terminal.

With no ``PREFECT_API_URL``, Prefect starts a temporary API server in a child process that
writes to the caller's stderr. Its services log their own troubles there as tracebacks (a
busy sqlite database under load: "database is locked", a batch of task-run events dropped),
which read as rbench failing when the run is fine. :func:`log_temporary_server` starts the
same server with its output appended to ``$PREFECT_HOME/temporary-server.log``; Prefect's
clients find it, since they ask for the one instance per port. In a Jupyter kernel the server
runs in a session of its own: the kernel's "interrupt" signals the kernel's whole process group,
and a server killed by it left the run retrying its Crashed state for minutes; it stops with the
kernel (Prefect stops it at exit).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from prefect.server.api import server as api
from prefect.settings import get_current_settings

from rbench.core import settings
from rbench.core.errors import RbenchError
from rbench.core.stopping import in_a_notebook

LOG_NAME = "temporary-server.log"


class _Popen:
    """``subprocess`` as Prefect's server module sees it while it starts the server: ``Popen``
    writes the child's stdout and stderr to ``log``."""

    def __init__(self, log):
        self._log = log

    def Popen(self, *args, **kwargs):  # noqa: N802 - subprocess's name
        kwargs.setdefault("stdout", self._log)
        kwargs.setdefault("stderr", subprocess.STDOUT)
        kwargs.setdefault("stdin", subprocess.DEVNULL)
        kwargs.setdefault("start_new_session", in_a_notebook())  # a kernel's interrupt is its whole group's
        return subprocess.Popen(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(subprocess, name)


def server_log() -> Path:
    """Where the temporary server's output goes: ``temporary-server.log`` in Prefect's home."""
    return Path(get_current_settings().home).expanduser() / LOG_NAME


def _last_lines(path: Path, count: int = 5) -> str:
    try:
        lines = [line for line in path.read_text(encoding="utf-8", errors="replace").splitlines() if line.strip()]
    except OSError:
        return ""
    return "\n".join(f"  {line}" for line in lines[-count:])


class LoggedServer(api.SubprocessASGIServer):
    """Prefect's temporary server, its output appended to :func:`server_log`, given
    ``RBENCH_SERVER_STARTUP_SECONDS`` to answer; a server that does not start is one error that
    shows the log's last lines and names the setting."""

    def start(self, timeout: int | None = None) -> None:
        wait = timeout or settings.server_startup_seconds()
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
        log = server_log()
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "ab") as out:
            api.subprocess = _Popen(out)
            try:
                return super()._run_uvicorn_command()
            finally:
                api.subprocess = subprocess


def log_temporary_server() -> Path | None:
    """Make the temporary server that Prefect's clients start in this process write to
    :func:`server_log`; return that path, or None when Prefect talks to a server of its own
    (``PREFECT_API_URL``) or a temporary one already runs."""
    if get_current_settings().api.url:
        return None
    existing = api.SubprocessASGIServer._instances.get(None)
    if existing is None:
        existing = LoggedServer()
    return server_log() if isinstance(existing, LoggedServer) else None

