"""Exclusive leases on store keys, safe for many processes on many nodes sharing one folder.

A lease is a file created with ``O_EXCL`` (atomic on local disks and on NFSv3+). Its
holder touches it every ``ttl / 4`` seconds from a heartbeat thread. A waiter breaks a
lease whose modification time has not changed for ``ttl`` seconds of the waiter's own
clock (so clocks need not agree between nodes): the holder died. On the holder's own
host a lease whose process is gone is broken at once. A holder whose lease
was broken notices (:meth:`Lease.check`) before it publishes anything. A lease taken in a run
belongs to its :class:`~rbench.core.session.RunSession`, which releases it at a stop.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
import uuid
from pathlib import Path

from rbench.core import settings
from rbench.core.pids import alive
from rbench.core.session import RunSession, current

log = logging.getLogger("rbench")


class Stopping(RuntimeError):
    """This run is stopping on a signal: it takes no new lease."""


class LeaseLost(RuntimeError):
    """Another process broke this lease (its heartbeat stalled for longer than the TTL)."""


class LeaseCheck:
    """Who holds the lease on ``path``, and whether it is still ``token``: what a build's
    copy of its lease in another process (a stage process's checkpoint) can do."""

    def __init__(self, path: Path, token: str):
        self.path, self.token = Path(path), token

    def holder(self) -> str:
        """The current holder's token (host:pid:id), or '?' when unreadable."""
        try:
            return json.loads(self.path.read_text())["owner"]
        except (OSError, ValueError, KeyError, TypeError):
            return "?"

    def check(self) -> None:
        """Raise :class:`LeaseLost` unless the holder is still ``token``."""
        if self.holder() != self.token:
            raise LeaseLost(f"lease {self.path} was taken over by {self.holder()}: this build is abandoned")


class Lease(LeaseCheck):
    """An exclusive, heart-beaten lease on ``path``; use as a context manager. Pickled (sent to
    a stage process), it becomes a :class:`LeaseCheck` of the same token."""

    def __init__(self, path: Path, ttl: float | None = None, poll: float = 0.2):
        self.path = Path(path)
        self.ttl = settings.lease_ttl() if ttl is None else ttl
        self.poll = poll
        self.token = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex}"
        self._stop = threading.Event()
        self._beat: threading.Thread | None = None
        self._session: RunSession | None = None

    def try_acquire(self) -> bool:
        """Take the lease if it is free; never waits."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            return False
        try:
            with os.fdopen(fd, "w") as f:
                json.dump({"owner": self.token, "since": time.time()}, f)
        except OSError:  # a full disk: a lease file without its owner would hold others off for the ttl
            self.path.unlink(missing_ok=True)
            raise
        self._stop.clear()
        self._beat = beat = threading.Thread(target=self._heartbeat, name=f"lease-{self.path.name}", daemon=True)
        session = self._session = current()
        if session is None:
            beat.start()
            return True
        with session.lease_lock:
            if session.refuses_leases.is_set():
                self.path.unlink(missing_ok=True)
                raise Stopping(f"not taking the lease {self.path}: this run is stopping")
            session.leases.add(self)
            beat.start()
            if self not in session.leases:  # a stop came as it was taken, and released it
                raise Stopping(f"not taking the lease {self.path}: this run is stopping")
        return True

    def acquire(self, timeout: float | None = None) -> None:
        """Wait for the lease, breaking it if its holder's heartbeat stopped for ``ttl`` seconds."""
        started = time.monotonic()
        seen: tuple[float, float] | None = None  # (lease mtime, our clock when first seen)
        waited_logged = False
        while not self.try_acquire():
            try:
                mtime = self.path.stat().st_mtime
            except FileNotFoundError:
                continue
            now = time.monotonic()
            if self._holder_is_dead():
                self._break(mtime, "its process is gone")
                seen = None
                continue
            if seen is None or seen[0] != mtime:
                seen = (mtime, now)
            elif now - seen[1] > self.ttl:
                self._break(mtime, f"no heartbeat for {self.ttl:.0f}s")
                seen = None
                continue
            if not waited_logged:
                log.info("waiting for %s (held by %s)", self.path, self.holder())
                waited_logged = True
            if timeout is not None and now - started > timeout:
                raise TimeoutError(f"lease {self.path} still held by {self.holder()} after {timeout:.0f}s")
            time.sleep(self.poll)

    def __reduce__(self):
        return LeaseCheck, (self.path, self.token)

    def abandoned(self) -> str | None:
        """Why the lease file is one its holder left behind (its process is gone on this host, or
        no heartbeat for twice the TTL by this host's clock), or None when it is absent or alive."""
        try:
            age = time.time() - self.path.stat().st_mtime
        except FileNotFoundError:
            return None
        if self._holder_is_dead():
            return "its process is gone"
        if age > 2 * self.ttl:
            return f"no heartbeat for {age:.0f}s"
        return None

    def break_if_abandoned(self) -> str | None:
        """Break the lease when :meth:`abandoned` says its holder left it; return why, else None."""
        try:
            mtime = self.path.stat().st_mtime
        except FileNotFoundError:
            return None
        why = self.abandoned()
        if why is not None:
            self._break(mtime, why)
        return why

    def _holder_is_dead(self) -> bool:
        host, _, rest = self.holder().partition(":")
        pid = rest.partition(":")[0]
        return host == socket.gethostname() and pid.isdigit() and not alive(int(pid))

    def _break(self, mtime: float, why: str) -> None:
        stale = self.path.with_name(f"{self.path.name}.stale-{uuid.uuid4().hex[:8]}")
        try:
            if self.path.stat().st_mtime != mtime:
                return
            holder = self.holder()
            self.path.rename(stale)
        except FileNotFoundError:
            return
        log.warning("broke the lease %s of %s: %s", self.path, holder, why)
        stale.unlink(missing_ok=True)

    def _heartbeat(self) -> None:
        while not self._stop.wait(self.ttl / 4):
            try:
                os.utime(self.path)
            except FileNotFoundError:
                return

    def release(self) -> None:
        """Stop the heartbeat and remove the lease file if it is still ours."""
        session, self._session = self._session, None
        if session is not None:
            with session.lease_lock:
                session.leases.discard(self)
        self._stop.set()
        beat, self._beat = self._beat, None
        if beat is not None and beat.ident is not None:  # a stop can come before the heartbeat started
            beat.join()
        if self.holder() == self.token:
            self.path.unlink(missing_ok=True)

    def __enter__(self) -> "Lease":
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()
