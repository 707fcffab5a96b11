"""Stopping when told: SIGINT (Ctrl-C), SIGTERM (``kill``, a pod deletion) and SIGHUP (a closed
terminal, unless started under ``nohup``) end a run within seconds, wherever its threads are.

Stage work runs in worker threads that Python cannot interrupt, and the interpreter waits
for them before it exits: a plain ``KeyboardInterrupt`` left a run going for minutes. So the
handler releases the run's leases, runs the registered cleanups (the temporary Prefect
server), and ends the process. What it stops is the run's :class:`~rbench.core.session.RunSession`:
the handler is bound to it, and stage threads reach it through their context. Nothing is lost:
artifacts and checkpoint items are published atomically, a half-written temporary is never
trusted, and the next run resumes from the last finished item.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
import threading
from typing import Any, Callable, Iterator

from rbench.core.session import RunSession, current, run_session, session_here

log = logging.getLogger("rbench")


def on_stop(callback: Callable[[], None]) -> None:
    """Run ``callback`` when this run (:mod:`rbench.core.session`) is stopped by a signal or
    :func:`exit_soon`, before the cleanups given to :func:`stop_on_signals`: for components that
    start child processes, which must be ended and reaped (a child left to the init process
    stays a zombie of the group). Outside a run nothing stops it, and nothing is registered."""
    session = current()
    if session is not None:
        session.add_on_stop(callback)


def before_exit(callback: Callable[[], None]) -> None:
    """Run ``callback`` when a stopped run's process is about to end (``os._exit`` skips ``atexit``),
    before the cleanups given to :func:`stop_on_signals` (the temporary Prefect server):
    for buffers that must reach their destination, such as records batched for a Prefect server.
    :func:`exit_soon` runs it at the stop as well, since Prefect re-raises a raw SIGTERM with the
    default action once it has recorded the run's state. A callback registered twice runs once."""
    session = current()
    if session is not None:
        session.add_before_exit(callback)


def stopping() -> bool:
    """Whether this run is being stopped (a signal, or :func:`exit_soon`): it ends within seconds."""
    session = current()
    return session is not None and session.stopping.is_set()


def stops_end_the_process() -> bool:
    """Whether a stop of this run ends its process (not under :func:`interrupts_handled`: a Jupyter kernel)."""
    session = current()
    return session is None or not session.outlives_stops


def wait_for_the_end() -> None:
    """Block the calling thread until the process ends (a stage whose work a stop took away
    reports nothing: its error would only be a traceback under the stop's one line); in a process
    that outlives its stops (:func:`interrupts_handled`), until the interrupted block has ended."""
    session = current()
    if session is None or not session.outlives_stops:
        threading.Event().wait()
    else:
        session.resumed.wait()


@contextlib.contextmanager
def reaped_on_stop(process: subprocess.Popen) -> Iterator[subprocess.Popen]:
    """While the block runs, a stop of this run kills ``process`` (a child this process waits for)
    and reaps it before the process ends."""
    session = current()
    if session is None:
        yield process
        return
    session.children.add(process)
    try:
        yield process
    finally:
        session.children.discard(process)


def _reap_children(session: RunSession) -> None:
    for process in list(session.children):
        try:
            process.kill()
            process.wait(timeout=2)
        except (OSError, subprocess.TimeoutExpired):
            pass


def _run_cleanups(session: RunSession, name: str, children: bool = True, cleanups: bool = True) -> None:
    for cleanup in [*([lambda: _reap_children(session), *session.on_stop] if children else []),
                    *([*session.before_exit, *session.cleanups] if cleanups else [])]:
        try:
            cleanup()
        except Exception as e:  # stopping goes on whatever a cleanup does
            log.debug("cleanup on %s failed: %s", name, e)


def in_a_notebook() -> bool:
    """Whether this is a Jupyter kernel, whose interrupt must not end the process (it sends
    SIGINT to the kernel's whole process group)."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None and hasattr(ipython, "get_ipython") else None
    return shell is not None and "ipykernel" in sys.modules


def stop_now(signum: int, session: RunSession | None = None) -> None:
    """End this process now, as a signal ``signum`` to it does once :func:`stop_on_signals` is
    installed: the run's (``session``'s, else the current one's) leases released, one line (none
    when :func:`exit_soon` already said it), the cleanups, exit code 128 + ``signum``."""
    session = session or current() or RunSession()
    session.stopping.set()
    with contextlib.suppress(ValueError):  # outside the main thread the handlers stay
        for number in session.handled:
            signal.signal(number, signal.SIG_IGN)
    name = signal.Signals(signum).name
    released = session.release_leases()
    if session.ending.acquire(blocking=False):
        message = (f"rbench: {name}: stopped ({released} lease(s) released); finished stages and items are kept, "
                   "and the next run resumes from them\n")
        with contextlib.suppress(OSError):  # after a hang-up the terminal may be gone
            os.write(2, message.encode())  # not print: a flow with log_prints turns it into a log record
    _run_cleanups(session, name)
    with contextlib.suppress(OSError, ValueError):
        sys.stdout.flush()
    os._exit(128 + signum)


def handles_signals() -> bool:
    """Whether :func:`stop_on_signals` is installed for this run (``rbench run``)."""
    session = current()
    return session is not None and bool(session.handled)


def _handler(session: RunSession) -> Callable[[int, Any], None]:
    return lambda signum, frame: stop_now(signum, session)


def take_back_sigterm() -> bool:
    """Install :func:`stop_on_signals`'s handler for SIGTERM again, over one a library installed
    since (Prefect's flow engine turns SIGTERM into an exception that unwinds the flow and logs a
    crash per flow level); only where it was installed, in the main thread. Returns whether it was."""
    session = current()
    if session is None or signal.SIGTERM not in session.handled \
            or threading.current_thread() is not threading.main_thread():
        return False
    signal.signal(signal.SIGTERM, _handler(session))
    return True


def stop_on_signals(*cleanups: Callable[[], None]) -> bool:
    """Install the handler for SIGINT, SIGTERM and SIGHUP (a closed terminal, a dropped ssh
    session), in the main thread only, for the current run session (a new one, current from here
    on, where there is none: a process that is one run); return whether it was installed. A SIGHUP
    that is ignored (a run started under ``nohup``) stays ignored. ``cleanups`` also run when a run
    ends through :func:`exit_soon`."""
    if threading.current_thread() is not threading.main_thread():
        return False
    session = session_here()
    session.cleanups[:] = cleanups
    session.handled[:] = [signal.SIGINT, signal.SIGTERM]
    if signal.getsignal(signal.SIGHUP) != signal.SIG_IGN:
        session.handled.append(signal.SIGHUP)
    for number in session.handled:
        signal.signal(number, _handler(session))
    return True


@contextlib.contextmanager
def signals_handled(*cleanups: Callable[[], None]) -> Iterator[bool]:
    """:func:`stop_on_signals` for the block's run session only, where nothing installed it yet (a
    script calling :func:`rbench.run`); the handlers found before come back after it. Yields
    whether this block installed them (not in another thread, nor where they are installed already)."""
    if handles_signals() or threading.current_thread() is not threading.main_thread():
        yield False
        return
    before = {number: signal.getsignal(number) for number in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    with run_session() as session:
        stop_on_signals(*cleanups)
        try:
            yield True
        finally:
            for number, handler in before.items():
                if handler is not None:
                    signal.signal(number, handler)
            session.handled.clear()
            session.cleanups.clear()


class RunInterrupted(KeyboardInterrupt):
    """The interrupt that stopped a run in a notebook: IPython shows its one line
    (``_render_traceback_``), not a traceback through the flow engine."""

    def _render_traceback_(self) -> list[str]:
        return [str(self)]


@contextlib.contextmanager
def interrupts_handled(on_interrupt: Callable[[], None] = lambda: None) -> Iterator[bool]:
    """In a process that must outlive the run (a Jupyter kernel), an interrupt (SIGINT: the
    kernel's "interrupt" button) during the block stops the run as a signal stops a command (its
    leases released, its stage processes and Lucene workers ended, the stage threads not waited
    for), calls ``on_interrupt`` and raises one ``KeyboardInterrupt`` that names what was kept;
    the process, and the Prefect server it started, go on, and the next run resumes. Yields
    whether this block installed the handler (not in another thread, nor under
    :func:`stop_on_signals`). What reaches the caller is one :class:`RunInterrupted`."""
    if handles_signals() or threading.current_thread() is not threading.main_thread():
        yield False
        return
    before = signal.getsignal(signal.SIGINT)

    def interrupted(signum: int, frame) -> None:
        signal.signal(signal.SIGINT, before)  # a second interrupt is the process's own
        session.resumed.clear()
        session.stopping.set()
        released = session.release_leases()
        _run_cleanups(session, "SIGINT", cleanups=False)
        on_interrupt()
        said.append(f"rbench: stopped ({released} lease(s) released); finished stages and items are kept, and the "
                    "next run resumes from them")
        raise RunInterrupted(said[-1])

    said: list[str] = []
    with run_session() as session:
        session.outlives_stops = True
        signal.signal(signal.SIGINT, interrupted)
        try:
            yield True
        except KeyboardInterrupt:
            if not said:
                raise
            raise RunInterrupted(said[-1]) from None  # the engine may have wrapped or re-raised it
        finally:
            signal.signal(signal.SIGINT, before)
            session.resumed.set()  # the interrupted run's stage threads end now; the next run has a session of its own


def exit_soon(code: int, grace_seconds: float = 5.0, reason: str = "told to stop") -> None:
    """Release this run's leases now and end the process with ``code`` after ``grace_seconds``,
    whatever its worker threads are doing: for a deployed run that Prefect told to stop (a
    cancellation, a pod deletion), where Prefect owns the signal handler and needs a moment to
    report the run's state, but the interpreter would then wait minutes for running stages.
    Child processes (stage processes, Lucene workers) are stopped at once and the
    :func:`before_exit` callbacks run (and again at the end); the cleanups given to
    :func:`stop_on_signals` (the temporary Prefect server) run at the end.
    A second call while the first is pending does nothing."""
    session = session_here()  # outside a run: one made here, so that a second call sees the first
    if not session.ending.acquire(blocking=False):
        return
    session.stopping.set()
    released = session.release_leases()
    os.write(2, (f"rbench: {reason}: stopped ({released} lease(s) released); the process ends within "
                 f"{grace_seconds:.0f}s; finished stages and items are kept, and the next run resumes from them\n"
                 ).encode())
    _run_cleanups(session, reason, cleanups=False)  # the children stop now: no progress after the line
    for callback in session.before_exit:  # now too: Prefect may end the process by the signal's default action
        try:
            callback()
        except Exception as e:
            log.debug("%s on %s failed: %s", callback.__name__, reason, e)

    def end() -> None:
        _run_cleanups(session, reason, children=False)
        sys.stdout.flush()
        os._exit(code)

    timer = threading.Timer(grace_seconds, end)
    timer.daemon = True
    timer.start()
