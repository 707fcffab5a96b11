"""Stage builds in processes of their own: the process that holds the flow only orchestrates,
waits and handles signals, while torch encoders, FAISS builds and LLM clients run in a
spawned child.

A :class:`StageProcess` is a child that runs one function call at a time, sent over a pipe,
and sends back its result or its error; its log records come back as they are made and are
handled in the calling thread, so that they read as the stage's own. Children are pooled per
process (:data:`STAGE_PROCESSES`, a :class:`Pool`): a run imports torch and loads a model once
per child, not once per stage. A child ignores SIGINT (its parent decides), ends itself within
a second when its parent is gone, and is killed and reaped when a signal stops the run.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import pickle
import signal
import threading
import time
import traceback
import weakref
from typing import Any, Callable

from rbench.core.errors import RbenchError
from rbench.core.lease import LeaseLost
from rbench.core.stopping import on_stop, stops_end_the_process

WATCH_SECONDS = 0.5


class StageProcessError(RbenchError):
    """A stage's work failed in its process with an error that cannot cross processes as it is,
    or the process ended during the work (the message says which, with the child's traceback)."""


def watch_parent(parent: int, end: Callable[[], None] = lambda: os._exit(0)) -> None:
    """End this (child) process when its parent ``parent`` is gone (checked every half second):
    ``end()``, at once by default."""
    while os.getppid() == parent:
        time.sleep(WATCH_SECONDS)
    end()


GROUP_SIGNALS = {signal.SIGINT, signal.SIGHUP}
"""What a Ctrl-C or a closed terminal sends to the whole process group: a stage process ignores them."""


def as_child(parent: int) -> None:
    """Set up a spawned child of ``parent``: it ignores SIGINT and SIGHUP, which a Ctrl-C or a
    closed terminal sends to the whole process group (the parent decides when it stops; the child
    was started with them blocked, see :func:`_start_without_main`, so one sent while its Python
    was still starting is discarded here, not raised in its bootstrap), ends
    itself when the parent is gone, and keeps progress bars' locks to its threads:
    tqdm would make a multiprocessing lock, a semaphore that a child ended with ``os._exit``
    leaves for the resource tracker to warn about at shutdown."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, GROUP_SIGNALS)
    threading.Thread(target=watch_parent, args=(parent,), daemon=True).start()
    try:
        from tqdm import tqdm
    except ImportError:
        return
    tqdm.set_lock(threading.RLock())


def portable(error: BaseException, wrapper: type[RbenchError], details: str = "") -> BaseException:
    """``error`` if it is rbench's own and survives pickling as it is, else a ``wrapper`` naming
    it, with ``details`` (a traceback) appended."""
    if isinstance(error, (RbenchError, LeaseLost)):
        try:
            pickle.loads(pickle.dumps(error))
            return error
        except Exception:
            pass
    return wrapper(f"{type(error).__name__}: {error}{details}")


def stop_process(process) -> None:
    """Kill a child process and reap it."""
    if process.is_alive():
        process.kill()
    process.join(timeout=2)


def stop_resource_tracker() -> None:
    """Kill and reap multiprocessing's resource tracker, which spawning a child started: when a
    signal stops the run, nothing of its process group outlives it, not even as a zombie."""
    from multiprocessing import resource_tracker

    pid = getattr(getattr(resource_tracker, "_resource_tracker", None), "_pid", None)
    if pid:
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass


class _ToParent(logging.Handler):
    """The child's log handler: each record goes to the parent, formatted (its arguments and
    exception rendered here, since they may not cross processes)."""

    def __init__(self, conn, lock: threading.Lock):
        super().__init__()
        self._conn, self._lock = conn, lock

    def emit(self, record: logging.LogRecord) -> None:
        try:
            record.msg = record.getMessage()
            record.args = None
            if record.exc_info:
                record.exc_text = logging.Formatter().formatException(record.exc_info)
                record.exc_info = None
            with self._lock:
                self._conn.send(("log", record))
        except Exception:
            self.handleError(record)


def _serve(conn, parent: int, levels: dict[str, int]) -> None:
    """The child's main loop: run each function call sent, answer with its result or error."""
    as_child(parent)
    multiprocessing.current_process().daemon = False  # a stage may start a child of its own (a Lucene worker)
    lock = threading.Lock()
    root = logging.getLogger()
    root.handlers[:] = [_ToParent(conn, lock)]
    for name, level in levels.items():
        logging.getLogger(name or None).setLevel(level)
    while True:
        try:
            fn, args, kwargs, environ, folder, levels = conn.recv()
        except (EOFError, OSError):
            os._exit(0)
        os.chdir(folder)
        for name, level in levels.items():
            logging.getLogger(name or None).setLevel(level)
        for name in set(os.environ) - set(environ):
            del os.environ[name]
        os.environ.update(environ)
        try:
            result = ("ok", fn(*args, **kwargs))
        except BaseException as e:  # every failure goes back to the caller, which raises it
            details = "" if isinstance(e, (RbenchError, LeaseLost)) else "\n" + traceback.format_exc()
            result = ("error", portable(e, StageProcessError, details))
        with lock:
            conn.send(result)


_STARTING = threading.Lock()


def _start_without_main(process) -> None:
    """Start a spawned ``process`` without it importing the caller's ``__main__``: Python's spawn
    runs the parent's main script again in every child, so a user's script that calls
    ``rbench.run`` without an ``if __name__ == "__main__":`` guard would start a run in each
    stage process. rbench's children run rbench's functions only, which never live in
    ``__main__``, so the script's path and spec are hidden while the child is prepared.

    SIGINT and SIGHUP are blocked in this thread while it starts the child, which inherits the
    mask through spawn's fork and exec: a Ctrl-C to the process group during the child's start
    stays pending there until :func:`as_child` ignores it (here it is delivered once unblocked).
    multiprocessing's resource tracker is started first: starting it unblocks SIGINT in the
    calling thread (``resource_tracker.ensure_running`` ends with ``SIG_UNBLOCK``), which,
    inside ``process.start()``, would undo the block before the child is forked."""
    import sys
    from multiprocessing import resource_tracker

    main = sys.modules.get("__main__")
    with _STARTING:
        hidden = {k: main.__dict__.pop(k) for k in ("__file__",) if main is not None and k in main.__dict__}
        spec = getattr(main, "__spec__", None)
        if main is not None:
            main.__spec__ = None
        resource_tracker.ensure_running()
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, GROUP_SIGNALS)
        try:
            process.start()
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
            if main is not None:
                main.__dict__.update(hidden)
                main.__spec__ = spec


class Child:
    """A spawned child serving requests over a pipe, one at a time: the shape shared by stage
    processes and Lucene workers. ``target(conn, parent_pid, *args)`` is the child's loop; it
    answers each request with ``("ok", value)`` or ``("error", exception)``, after any number
    of ``("log", record)`` messages, which are handled here as they arrive. A child whose pipe
    breaks mid-request raises ``died`` naming what it was doing and its exit code."""

    died: type[Exception] = RbenchError
    role = "child process"

    def __init__(self, target: Callable[..., None], name: str, *args: Any):
        context = multiprocessing.get_context("spawn")
        self._conn, child_conn = context.Pipe()
        self._process = context.Process(target=target, args=(child_conn, os.getpid(), *args), name=name, daemon=True)
        _start_without_main(self._process)
        child_conn.close()
        self._lock = threading.Lock()
        self._finalizer = weakref.finalize(self, close_process, self._process, self._conn)

    @property
    def pid(self) -> int | None:
        """The child's process id."""
        return self._process.pid

    def _request(self, message: tuple, doing: str) -> Any:
        """Send ``message`` and wait for its answer; return its value or raise its error."""
        with self._lock:
            try:
                self._conn.send(message)
                while True:
                    status, value = self._conn.recv()
                    if status != "log":
                        break
                    logger = logging.getLogger(value.name)
                    if logger.isEnabledFor(value.levelno):
                        logger.handle(value)
            except (EOFError, OSError, BrokenPipeError):
                self._process.join(timeout=1)
                code = self._process.exitcode
                raise self.died(f"the {self.role} (pid {self._process.pid}) ended during {doing}"
                                f"{f' with exit code {code}' if code is not None else ''}") from None
        if status == "ok":
            return value
        raise value

    def alive(self) -> bool:
        """Whether the child is still running."""
        return self._finalizer.alive and self._process.is_alive()

    def close(self) -> None:
        """Stop the child (idempotent)."""
        self._finalizer()


class StageProcess(Child):
    """A spawned child that runs function calls (:meth:`call`) one at a time."""

    died = StageProcessError
    role = "stage process"

    def __init__(self):
        super().__init__(_serve, "rbench-stage", _log_levels())

    def call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``fn(*args, **kwargs)`` in the child (``fn`` importable by name, the arguments
        picklable), with this process's environment variables, working folder and log levels as
        they are now (as a thread would see them); its log records are handled here as they arrive."""
        return self._request((fn, args, kwargs, dict(os.environ), os.getcwd(), _log_levels()),
                             getattr(fn, "__name__", str(fn)))


def _log_levels() -> dict[str, int]:
    """The root's and rbench's effective log levels here, for a stage process to log at."""
    return {name: logging.getLogger(name or None).getEffectiveLevel() for name in ("", "rbench")}


def loads_native(stage, config: Any) -> bool:
    """Whether ``stage``'s build for ``config`` loads a native runtime (the stage's ``native``)."""
    native = getattr(stage, "native", None)
    return native is not None and bool(native(config))


def build_call(stage, config: Any, processes: bool) -> Callable[..., Any] | None:
    """How ``stage`` builds for ``config`` (the ``call`` of ``Stage.run``): in a stage process
    when ``processes`` and the build loads a native runtime (the stage's ``native``), else here."""
    return call_in_process if processes and loads_native(stage, config) else None


def close_process(process, conn) -> None:
    """Close the pipe to a child process, then let it end (terminated, else killed) and reap it."""
    try:
        conn.close()
    except OSError:
        pass
    if process.is_alive():
        process.terminate()
        process.join(timeout=5)
    stop_process(process)


class Pool:
    """Idle child processes of one kind, reused by this process's threads (and runs): :meth:`take`
    one (``factory`` makes a new one when none is idle), :meth:`put` it back; :meth:`stop_all`
    kills and reaps every one made, then multiprocessing's resource tracker; a stop of a run that
    took one calls it (:func:`rbench.core.stopping.on_stop`)."""

    def __init__(self, factory: Callable[[], Any]):
        self._factory = factory
        self.idle: list = []
        self._made: weakref.WeakSet = weakref.WeakSet()
        self._lock = threading.Lock()

    def take(self):
        """An idle, living worker, or a new one; a stop of the current run stops the pool's workers."""
        on_stop(self.stop_all)
        with self._lock:
            while self.idle:
                worker = self.idle.pop()
                if worker.alive():
                    return worker
        worker = self._factory()
        self._made.add(worker)
        return worker

    def put(self, worker) -> None:
        """Hand ``worker`` back (one that ended is dropped)."""
        if worker.alive():
            with self._lock:
                self.idle.append(worker)

    def close_idle(self, keep: int = 0) -> int:
        """Stop the idle workers but the ``keep`` used last, freeing what they hold (a model, a
        JVM); a :meth:`take` with none idle starts a new one. Returns how many were stopped."""
        with self._lock:
            kept = self.idle[len(self.idle) - keep:] if keep > 0 else []
            idle, self.idle = self.idle[:len(self.idle) - len(kept)], kept
        for worker in idle:
            worker.close()
        return len(idle)

    def stop_all(self) -> None:
        """Kill and reap every worker this pool made (a signal is stopping the run), and the resource
        tracker where the process ends too (a kernel that outlives the stop keeps it for its next run:
        a killed one is relaunched with a warning)."""
        for worker in list(self._made):
            stop_process(worker._process)
        if stops_end_the_process():
            stop_resource_tracker()


STAGE_PROCESSES = Pool(StageProcess)


def call_in_process(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)`` in a pooled stage process (see :class:`StageProcess`)."""
    worker = STAGE_PROCESSES.take()
    try:
        return worker.call(fn, *args, **kwargs)
    finally:
        STAGE_PROCESSES.put(worker)

