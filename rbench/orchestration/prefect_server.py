"""Prefect's temporary server, as an ``rbench`` command starts it: early, with its output in a log
file beside its database, and given to Prefect as an API address, through Prefect's public settings.

With no ``PREFECT_API_URL``, Prefect's client would start a temporary API server itself, in a
child process that writes to the caller's stderr (its services log their troubles there as
tracebacks: a busy sqlite database under load, a batch of task-run events dropped), after the
flow's modules and Prefect's server module (1.3 s) had loaded in the caller, and then wait
about 3 s for it to answer. Instead :func:`start_early` starts that same server (Prefect's own
app, with the command Prefect's server class runs) once the door's checks have passed, before
Prefect itself is imported; its output is appended to ``$PREFECT_HOME/temporary-server.log``.
:func:`temporary_server` then makes its address the process's ``PREFECT_API_URL`` once it
answers (Prefect's public settings, read again by ``prefect.context.refresh_global_settings_context``,
so that Prefect's background services use it too): the calling process never imports Prefect's
server, and the private names it relies on are :mod:`rbench.orchestration.prefect_seam`'s. In a Jupyter
kernel the server runs in a session of its own (the kernel's
"interrupt" signals the kernel's whole process group, and a server killed by it left the run
retrying its Crashed state for minutes) and serves every run of the kernel; it ends with the
process that started it, however that ends.
"""

from __future__ import annotations

import atexit
import importlib
import importlib.util
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rbench.core import settings
from rbench.core.errors import RbenchError
from rbench.core.processes import watch_parent
from rbench.core.stopping import in_a_notebook
from rbench.orchestration.prefect_seam import SERVER_ENVIRONMENT

LOG_NAME = "temporary-server.log"
_STARTED: list[TemporaryServer] = []  # the one temporary server this process started, while it runs


def prefect_home() -> Path:
    """Prefect's home folder, as Prefect reads it (``PREFECT_HOME``, else ``~/.prefect``), without
    importing Prefect."""
    return Path(os.environ.get("PREFECT_HOME") or "~/.prefect").expanduser()


def server_log() -> Path:
    """Where the temporary server's output goes: ``temporary-server.log`` in Prefect's home."""
    return prefect_home() / LOG_NAME


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
    with (this one). Prefect is not imported: the server reads Prefect's settings (the
    environment, the profile) itself."""
    spec = importlib.util.find_spec("prefect")
    if spec is None or not spec.submodule_search_locations:
        raise RbenchError("Prefect is not installed: install rbench (pip install -e .) to run a flow")
    package = Path(next(iter(spec.submodule_search_locations)))
    args = [sys.executable, "-m", "uvicorn", "--app-dir", str(package.parent), "--factory",
            "rbench.orchestration.prefect_server:server_app", "--host", "127.0.0.1", "--port", str(port),
            "--log-level", "error", "--lifespan", "on"]
    env = {**os.environ, **SERVER_ENVIRONMENT, settings.SERVER_PARENT: str(os.getpid())}
    return args, env


def server_app() -> Any:
    """Prefect's server app (``prefect.server.api.server:create_app``) in a temporary server that
    ends itself (as SIGTERM ends it) when the process that started it is gone: a notebook
    kernel's server runs in a session of its own, which no signal of the kernel's reaches, and a
    killed kernel (or a ``kill -9``'d command) left it running for good. It answers
    :data:`WHO` with its process id, so that a starter knows the server on its port is its own."""
    from prefect.server.api.server import create_app

    parent = settings.server_parent()
    if parent is not None:
        threading.Thread(target=watch_parent, args=(parent, _terminate), name="rbench-parent-watch",
                         daemon=True).start()
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    app = create_app()
    app.router.routes.insert(0, Route(WHO, lambda request: JSONResponse({"pid": os.getpid()})))  # before its mounts
    return app


WHO = "/rbench-server-pid"
"""The temporary server's own route: its process id. Two commands started together could pick one
free port; the second server then failed to bind while the first one answered its starter's checks."""


def _terminate() -> None:
    os.kill(os.getpid(), signal.SIGTERM)  # uvicorn's shutdown: the services stop, the database is closed


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class FirstStart:
    """An exclusive lock (``temporary-server.lock`` in Prefect's home) held while a temporary server
    starts on a database it has not started on before: Prefect migrates its database as it starts,
    and two servers migrating one new ``prefect.db`` together failed ("No such index", "already
    exists"; 1 of 6 started together here, 3 of 6 in the issue). Once one has started, a marker beside
    the database (for this Prefect version) lets later starts run side by side."""

    def __init__(self) -> None:
        self.fd: int | None = None

    @staticmethod
    def needed() -> bool:
        """Whether a start must take the lock: a database this Prefect has not started on yet, or one elsewhere."""
        database = prefect_home() / "prefect.db"
        return bool(os.environ.get("PREFECT_API_DATABASE_CONNECTION_URL")) or not (
            database.is_file() and _marker().is_file())

    def take(self, wait: bool) -> bool:
        """Take the lock (waiting for it with ``wait``); False when another process holds it and ``wait`` is off."""
        import fcntl

        path = prefect_home() / "temporary-server.lock"
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            os.close(fd)
            return False
        self.fd = fd
        return True

    def release(self, started: bool) -> None:
        """Let the next start go (``started``: marking the database as migrated)."""
        if started:
            _marker().touch()
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def _marker() -> Path:
    from importlib.metadata import version

    return prefect_home() / f".rbench-started-prefect-{version('prefect')}"


@dataclass(eq=False)
class TemporaryServer:
    """A temporary Prefect server this process started on ``port`` (its ``process``); its output
    is appended to :func:`server_log`. ``first``: the lock of a first start it holds until it answers."""

    port: int
    process: subprocess.Popen[bytes]
    ready: bool = False
    first: FirstStart | None = None
    attempts: int = 1

    @property
    def url(self) -> str:
        """Its API address, as ``PREFECT_API_URL`` names one."""
        return f"http://127.0.0.1:{self.port}/api"

    @classmethod
    def spawn(cls, first: FirstStart | None = None) -> TemporaryServer:
        """Start one on a free port; in a notebook in a session of its own."""
        port = _free_port()
        return cls(port, cls._process(port), first=first)

    @staticmethod
    def _process(port: int) -> subprocess.Popen[bytes]:
        args, env = uvicorn_command(port)
        log = server_log()
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "ab") as out:
            return subprocess.Popen(args, env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    start_new_session=in_a_notebook())

    def wait_until_ready(self, timeout: float) -> None:
        """Return once it answers :data:`WHO` with its own process id (another command's server on the
        same port, or one that ended as it started, has it started again on another port, twice at most);
        a server that ends, or does not answer within ``timeout`` seconds, is stopped and is one error
        that shows its log's last lines and how to go on."""
        deadline = time.monotonic() + timeout
        while not self.ready:
            code = self.process.poll()
            if code is not None:
                self._again(f"ended as it started (exit code {code})")
                continue
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{WHO}", timeout=2) as answer:
                    pid = json.loads(answer.read()).get("pid")
            except (OSError, ValueError):
                if time.monotonic() > deadline:
                    self._failed(f"did not answer within {timeout:g}s", busy=True)
                time.sleep(0.05)
                continue
            if pid != self.process.pid:
                self._again(f"found another server on port {self.port}")
                continue
            self.ready = True
        if self.first is not None:
            self.first.release(started=True)
            self.first = None

    def _again(self, what: str) -> None:
        """Start it again on another port, or fail when it has been tried three times."""
        if self.attempts >= 3:
            self._failed(what)
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self.attempts += 1
        old = self.url
        self.port = _free_port()
        self.process = self._process(self.port)
        if settings.temporary_api() == old:
            settings.write(settings.TEMPORARY_API, self.url)

    def _failed(self, what: str, busy: bool = False) -> None:
        self.stop()
        tail = _last_lines(server_log())
        raise RbenchError(
            f"Prefect's temporary server {what}; its output is in "
            f"{server_log()}{':' + chr(10) + tail + chr(10) if tail else ' (empty). '}"
            f"{'On a busy machine raise RBENCH_SERVER_STARTUP_SECONDS; or r' if busy else 'R'}un a server "
            "(prefect server start) and set PREFECT_API_URL")

    def stop(self) -> None:
        """End it, and take its address out of this process's settings: once it has answered,
        SIGTERM (its services stop and its database is closed; killed after 5 s); before, SIGKILL
        (a server still loading its code handles SIGTERM only once loaded, seconds later, and a
        run whose stages were all cached would wait for it)."""
        if self in _STARTED:
            _STARTED.remove(self)
        if self.first is not None:
            self.first.release(started=False)
            self.first = None
        _unset(settings.TEMPORARY_API, self.url)
        if _unset("PREFECT_API_URL", self.url):
            _unset("PREFECT_UI_URL", "")
            _settings_changed()
        if self.process.poll() is None:
            if self.ready:
                self.process.terminate()
            else:
                self.process.kill()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def serve_this_process(self) -> None:
        """Make it the API of every Prefect client of this process and of the processes it starts
        (``PREFECT_API_URL``), Prefect's background services included, with no UI links in the
        flows' lines (``PREFECT_UI_URL`` empty, unless set: its UI is off)."""
        if settings.read("PREFECT_API_URL") != self.url:
            settings.write("PREFECT_API_URL", self.url)
            if "PREFECT_UI_URL" not in os.environ:
                settings.write("PREFECT_UI_URL", "")
            _settings_changed()


def _unset(name: str, value: str) -> bool:
    if os.environ.get(name) != value:
        return False
    del os.environ[name]
    return True


def _settings_changed() -> None:
    """Prefect's process-wide settings read the environment again (``refresh_global_settings_context``:
    its threads that carry no settings of their own read those)."""
    if "prefect.context" in sys.modules:
        from prefect.context import refresh_global_settings_context

        refresh_global_settings_context()


def start_early() -> None:
    """Start the temporary server now where this process's flows will need one (no API address
    in Prefect's settings, none started yet): it boots while the run's data phase and the flow's
    code load. Stopped at exit or by :func:`stop_temporary_server`. Where Prefect is not loaded
    yet, only the environment is read: a Prefect profile that names a server, or forbids
    temporary ones, is read later (:func:`temporary_server`), which stops this one unused."""
    start(wait=False)


def start(wait: bool) -> None:
    """Start a temporary server unless one runs or Prefect has a server of the user's: a first start
    on its database under :class:`FirstStart`'s lock (without ``wait``, none is started while
    another process holds it: :func:`temporary_server` waits for it then)."""
    for ended in [s for s in _STARTED if s.process.poll() is not None]:
        ended.stop()
    if _STARTED or own_server() or not _temporary_allowed():
        return
    first = None
    if FirstStart.needed():
        first = FirstStart()
        if not first.take(wait):
            return
        if not FirstStart.needed():  # another process's server started on it while this one waited
            first.release(started=False)
            first = None
    server = TemporaryServer.spawn(first)
    _STARTED.append(server)
    settings.write(settings.TEMPORARY_API, server.url)
    atexit.register(server.stop)
    if settings.verbose():
        logging.getLogger("rbench").info("Starting temporary server on %s (its output: %s)", server.url, server_log())


def temporary_server() -> TemporaryServer | None:
    """The temporary server this process's flows report to, answering: where Prefect has no API
    address of the user's (``PREFECT_API_URL``, in the environment or the profile) and allows
    temporary servers, the one :func:`start_early` started (started now if none or it ended);
    else None, and one started in vain is stopped."""
    importlib.import_module("prefect.settings")  # loaded: the checks below read Prefect's profile too
    if own_server() or not _temporary_allowed():
        stop_temporary_server()
        return None
    start(wait=True)
    server = _STARTED[-1]
    server.wait_until_ready(settings.server_startup_seconds())
    server.serve_this_process()
    return server


def own_server() -> bool:
    """Whether Prefect reports to a server of the user's own (``PREFECT_API_URL``: a deployed run,
    a worker), not to the temporary one an ``rbench`` command started. Before Prefect is loaded,
    as far as the environment tells (a profile is read once it is)."""
    if "prefect.settings" in sys.modules:
        from prefect.settings import get_current_settings

        url = get_current_settings().api.url
    else:
        url = settings.read("PREFECT_API_URL")
    return bool(url) and url != settings.temporary_api()


def _temporary_allowed() -> bool:
    """Whether Prefect allows temporary servers (assumed until Prefect is loaded)."""
    if "prefect.settings" not in sys.modules:
        return True
    from prefect.settings import get_current_settings

    return bool(get_current_settings().server.ephemeral.enabled)


def stop_temporary_server() -> None:
    """Stop the temporary Prefect server this process started (a signal ends the process at once)."""
    for server in list(_STARTED):
        server.stop()
