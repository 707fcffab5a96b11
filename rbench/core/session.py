"""One run session: what a run owns, from its door to its end, in one object.

The door (:func:`rbench.door.open_experiment`) opens one for each run, a working ``rbench``
command one for the command (:func:`rbench.core.stopping.stop_on_signals`), and a flow no door
started (a deployed run) its own (:func:`rbench.orchestration.runner.ended_by_termination`).
It is the run's context (a :class:`contextvars.ContextVar`): Prefect's thread runner copies the
context into every stage thread, so the stage code, the stop path and the signal handler all
read the same object, and two runs in one process (a notebook's, a script's) share no leases,
children or stop state: the leftover threads of an interrupted run take no lease in the next.

A session holds the leases its builds hold (released at a stop), the child processes a stop
kills and reaps, the callbacks a stop runs (the pools of stage processes and Lucene workers),
those run before a stopped process ends (Prefect's batched log records), the cleanups given
with the signal handlers (the temporary Prefect server), the signals it handles, whether it is
stopping, and its warm-up threads. Code outside any run (a test's own ``Store.build``) registers
nothing: its ``with`` blocks release what it holds, and no handler of rbench's would stop it.

What outlives a run stays with the process, listed with its reason in
``tests/unit/test_module_state.py``: the temporary Prefect server a notebook's runs share, loaded
models, the pools of stage processes and Lucene workers.
"""

from __future__ import annotations

import contextlib
import contextvars
import subprocess
import threading
from typing import Any, Callable, Iterator

__all__ = ["RunSession", "bound", "current", "run_session", "session_here"]


class RunSession:
    """The state one run owns (see the module docstring). ``outlives_stops``: a stop ends the run
    but not the process (a Jupyter kernel's interrupt, :func:`rbench.core.stopping.interrupts_handled`)."""

    def __init__(self, outlives_stops: bool = False):
        self.outlives_stops = outlives_stops
        self.leases: set[Any] = set()
        self.lease_lock = threading.RLock()  # re-entered by a signal handler that runs on the thread holding it
        self.refuses_leases = threading.Event()
        self.children: set[subprocess.Popen] = set()
        self.on_stop: list[Callable[[], None]] = []
        self.before_exit: list[Callable[[], None]] = []
        self.cleanups: list[Callable[[], None]] = []
        self.handled: list[int] = []
        self.stopping = threading.Event()
        self.resumed = threading.Event()  # cleared while an interrupt the process outlives unwinds the run
        self.resumed.set()
        self.ending = threading.Lock()  # one stop line, one end
        self.warm_ups: dict[str, threading.Thread] = {}

    def add_on_stop(self, callback: Callable[[], None]) -> None:
        """Run ``callback`` at a stop (once, however often it is added)."""
        if callback not in self.on_stop:
            self.on_stop.append(callback)

    def add_before_exit(self, callback: Callable[[], None]) -> None:
        """Run ``callback`` before a stopped process ends (once, however often it is added)."""
        if callback not in self.before_exit:
            self.before_exit.append(callback)

    def release_leases(self) -> int:
        """Release every lease this run holds and refuse new ones from then on (its other threads
        still run); return how many were released."""
        with self.lease_lock:
            self.refuses_leases.set()
            held = list(self.leases)
        for lease in held:
            lease.release()
        return len(held)

    def warm_up(self, name: str, target: Callable[[], None]) -> None:
        """Run ``target`` in a background thread named ``name``, once per run."""
        if name not in self.warm_ups:
            thread = self.warm_ups[name] = threading.Thread(target=target, name=name, daemon=True)
            thread.start()

    def wait_for_warm_ups(self) -> None:
        """Wait for the warm-up threads (so that no module is imported from two threads at once)."""
        for thread in list(self.warm_ups.values()):
            thread.join()


_CURRENT: contextvars.ContextVar[RunSession | None] = contextvars.ContextVar("rbench_session", default=None)


def current() -> RunSession | None:
    """The run session of this context, or None outside any run."""
    return _CURRENT.get()


@contextlib.contextmanager
def bound(session: RunSession) -> Iterator[RunSession]:
    """``session`` is the current run session while the block runs (in this context)."""
    token = _CURRENT.set(session)
    try:
        yield session
    finally:
        _CURRENT.reset(token)


@contextlib.contextmanager
def run_session() -> Iterator[RunSession]:
    """The block's run session: the current one (a command's, a door's), else a new one for the block."""
    found = _CURRENT.get()
    if found is not None:
        yield found
        return
    with bound(RunSession()) as session:
        yield session


def session_here() -> RunSession:
    """The current run session, else a new one made current for the rest of this context: a
    process that is one run (a working ``rbench`` command)."""
    found = _CURRENT.get()
    if found is None:
        found = RunSession()
        _CURRENT.set(found)
    return found
