"""A Prefect process worker whose shutdown stops its flow runs the way a signal stops ``rbench run``.

SIGTERM or SIGINT to ``prefect worker start`` (a pod's deletion, an operator's Ctrl-C) makes the
worker cancel its flow-run processes through anyio, which kills them (SIGKILL): a run's leases
stay in the store until their TTL runs out, and nothing says what happened. :class:`Supervisor`
runs the worker in a session of its own, so that a terminal's Ctrl-C reaches only the
supervisor, and on the first SIGTERM or SIGINT it sends SIGTERM to each flow-run process (rbench
releases its leases, stops its children and ends within 5 s), and to any the worker starts
meanwhile, waits up to ``grace`` seconds for them, and only then stops the worker (SIGTERM;
SIGKILL to its process group when it has not ended ``grace`` seconds later). A second signal, a
second or more after the first, kills the worker's process group at once (one sooner is the same
stop reaching it twice: a Ctrl-C to a group and a parent script forwarding it).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from rbench.core.pids import alive

POLL_SECONDS = 0.2
REPEAT_SECONDS = 1.0


def children(pid: int) -> list[int]:
    """The ids of ``pid``'s child processes (from ``/proc``, else ``ps``); empty when it has none."""
    proc = Path("/proc")
    if proc.is_dir():
        found = []
        for entry in proc.iterdir():
            if entry.name.isdigit():
                try:
                    stat = (entry / "stat").read_text()
                except OSError:
                    continue
                if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                    found.append(int(entry.name))
        return found
    out = subprocess.run(["ps", "-A", "-o", "pid=,ppid="], capture_output=True, text=True).stdout
    return [int(p) for p, parent in (line.split() for line in out.splitlines() if line.strip()) if int(parent) == pid]


def _die_with_parent() -> None:
    """In the worker, before ``exec``: on Linux, get SIGTERM when the supervisor dies."""
    if sys.platform.startswith("linux"):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


class Supervisor:
    """``prefect worker start ARGS`` (or ``command``) in a session of its own; :meth:`run` waits
    for it and, on SIGTERM or SIGINT, stops its flow runs before it (see the module docstring).
    ``worker`` is the worker's process once started."""

    def __init__(self, worker_args: list[str], grace: float = 10.0, command: list[str] | None = None):
        if grace <= 0:
            raise ValueError(f"grace must be positive seconds, got {grace}")
        self.command = command or [sys.executable, "-m", "prefect", "worker", "start", *worker_args]
        self.grace = grace
        self.signal: int | None = None
        self.first = 0.0
        self.repeated = False
        self.worker: subprocess.Popen | None = None

    def _note(self, signum: int, frame) -> None:
        now = time.monotonic()
        if self.signal is None:
            self.signal, self.first = signum, now
        elif now - self.first >= REPEAT_SECONDS:  # a Ctrl-C to the group and a parent's forwarding are one
            self.repeated = True

    def _say(self, message: str) -> None:
        print(f"rbench worker: {message}", file=sys.stderr, flush=True)

    def run(self) -> int:
        """Start the worker and wait for it; the worker's exit code, or 128 + the signal that
        stopped it."""
        previous = {s: signal.signal(s, self._note) for s in (signal.SIGTERM, signal.SIGINT)}
        try:
            self.worker = worker = subprocess.Popen(self.command, start_new_session=True,
                                                    preexec_fn=_die_with_parent)
            while self.signal is None:
                try:
                    code = worker.wait(timeout=POLL_SECONDS)
                except subprocess.TimeoutExpired:
                    continue
                return code if code >= 0 else 128 - code
            self.stop(worker)
            return 128 + self.signal
        finally:
            for s, handler in previous.items():
                signal.signal(s, handler)

    def stop(self, worker: subprocess.Popen) -> None:
        """Stop ``worker``'s flow runs (SIGTERM, up to ``grace`` s), then ``worker`` itself."""
        name = signal.Signals(self.signal).name
        runs: list[int] = []
        self._terminate_new(worker, runs)
        self._say(f"{name}: stopping {len(runs)} flow run process(es) with SIGTERM, then the worker "
                  f"(up to {self.grace:g}s each; a second signal kills them)")
        first = len(runs)
        left = self._wait(lambda: [p for p in self._terminate_new(worker, runs) if alive(p)])
        if len(runs) > first:
            self._say(f"SIGTERM to {len(runs) - first} flow run process(es) the worker started after the stop")
        if left:
            self._say(f"flow run process(es) {left} still running after {self.grace:g}s: the worker ends them")
        if worker.poll() is None:
            worker.send_signal(signal.SIGTERM)
        if self._wait(lambda: worker.poll() is None):
            self._say(f"the worker did not stop within {self.grace:g}s of SIGTERM: SIGKILL")
        self._kill_group(worker)
        self._say(f"{name}: stopped")

    @staticmethod
    def _terminate_new(worker: subprocess.Popen, runs: list[int]) -> list[int]:
        """SIGTERM to each of ``worker``'s child processes not yet in ``runs``, added to it: the
        Prefect worker polls for flow runs until it is stopped, so one may start while the others
        tidy up. Returns ``runs``."""
        for pid in children(worker.pid):
            if pid not in runs:
                runs.append(pid)
                try:
                    os.kill(pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        return runs

    def _wait(self, pending):
        """Wait until ``pending()`` is falsy, ``grace`` seconds have passed, or a second signal came;
        return its last value."""
        deadline = time.monotonic() + self.grace
        while (value := pending()) and time.monotonic() < deadline and not self.repeated:
            time.sleep(POLL_SECONDS)
        return value

    @staticmethod
    def _kill_group(worker: subprocess.Popen) -> None:
        """SIGKILL to what is left of the worker's process group; reap the worker."""
        try:
            os.killpg(worker.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        worker.wait()
