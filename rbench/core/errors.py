"""Errors rbench raises for bad input: each message names the value, what was expected and the fix."""

import collections
import contextlib
import errno
import logging
import os
from typing import Iterator


class RbenchError(Exception):
    """Base class for errors caused by the user's input or environment."""


class ConfigError(RbenchError, ValueError):
    """The experiment configuration is invalid."""


class DataError(RbenchError):
    """An input data file is missing, malformed or inconsistent."""


class Unreachable(DataError):
    """A source did not answer now (a timeout, a refused or dropped connection, HTTP 408, 429 or 5xx):
    the same request may succeed later, so a stage that fails with it is retried."""


class ChecksumError(DataError):
    """A downloaded or mirrored file does not match its registered sha256."""


class MissingExtraError(RbenchError):
    """An optional dependency is not installed."""

    def __init__(self, package: str, extra: str, purpose: str):
        super().__init__(
            f"{purpose} needs the package '{package}', which is not installed. "
            f"Install it with: pip install 'rbench[{extra}]'"
        )
        self.parts = (package, extra, purpose)

    def __reduce__(self):
        return type(self), self.parts


class DiskFull(RbenchError):
    """The disk holding the store filled up; nothing half-written is kept."""

    @classmethod
    def of(cls, store: "str | os.PathLike", error: OSError, doing: str, written: int | None = None) -> "DiskFull":
        """The error for ``error`` (ENOSPC or EDQUOT) met while ``doing``, with how much was written
        before it and how much is free now."""
        import shutil

        try:
            free = f"{shutil.disk_usage(store).free / 1e6:.0f} MB free now"
        except OSError:
            free = "its free space unknown"
        wrote = f"; it had written {_size(written)} of it" if written else ""
        where = f" ({error.filename})" if error.filename else ""
        return cls(f"the disk holding the store {store} is full ({error.strerror or error}{where}) while {doing}"
                   f"{wrote}; {free}. Nothing half-written is kept and every lease is released: free some space "
                   "(or pass --store DIR on a disk with room, or set RBENCH_STORE) and run again; finished stages "
                   "and items are kept, and the run resumes from them")


def _size(n: int) -> str:
    return f"{n / 1e6:.1f} MB" if n >= 100_000 else f"{n / 1e3:.1f} KB" if n >= 1000 else f"{n} bytes"


class DamagedArtifact(RbenchError):
    """A stored artifact a stage was about to read does not match its manifest: its numbers would
    be wrong, so the stage stops, naming the artifact and how to repair the store."""


class TrackingError(RbenchError):
    """Logging to MLflow failed (a server down, a damaged database); the results are in the store
    and the logging is kept for ``rbench log``."""


PENDING_EXIT = 3
"""The exit code of a run whose every pair finished and whose results are saved, but whose
MLflow logging failed and waits for ``rbench log`` (1: some pair failed; 2: bad input)."""


def is_disk_full(error: BaseException) -> bool:
    """Whether ``error`` is a full disk or an exceeded quota."""
    return isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT)


_SHOWN: "collections.deque[str]" = collections.deque(maxlen=64)  # user errors the engine logged lately
_ENGINE_LOGGERS = ("prefect.task_runs", "prefect.flow_runs")


class _UserErrorFilter(logging.Filter):
    """Drops the traceback of a logged RbenchError: its message already names the value and the fix."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and isinstance(record.exc_info[1], RbenchError):
            _SHOWN.append(str(record.exc_info[1]))
            record.exc_info, record.exc_text = None, None
            record.rbench_user_error = True
        return True


class _OnceOnConsole(logging.Filter):
    """Keeps the records of a flow or task run from repeating a user error on the console: the
    engine's "Task run failed with exception" and the "Finished in state Failed(...)" that quote
    it, the stage's row, and the "NotReady" of the stages after it (the run's closing line says it
    once); and the "Finished in state Completed()" of every task and flow and the "Beginning flow
    run" of each, which the header and the stage lines already say, unless ``successes``.
    Prefect's own log of the run (its API handler) keeps every record."""

    def __init__(self, successes: bool = False):
        super().__init__()
        self.successes = successes

    def filter(self, record: logging.LogRecord) -> bool:
        if not record.name.startswith(_ENGINE_LOGGERS):
            return True
        if getattr(record, "rbench_user_error", False):
            return False
        message = record.getMessage()
        if message.startswith(("Finished in state NotReady(", "Finished in state Completed(", "Beginning flow run",
                               "Beginning subflow run")):
            return self.successes  # said by the header, the stage lines and the table
        return not any(shown in message or repr(shown)[1:-1] in message for shown in list(_SHOWN))


def quiet_user_errors() -> None:
    """Log a user error raised inside a Prefect task or flow as its message alone, without the
    engine's traceback (the benchmark flow calls it unless ``RBENCH_DEBUG`` is set, as ``rbench --debug``
    sets it)."""
    for name in _ENGINE_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, _UserErrorFilter) for f in logger.filters):
            logger.addFilter(_UserErrorFilter())


@contextlib.contextmanager
def said_once_on_console(successes: bool = False) -> Iterator[None]:
    """While the block runs, a user error a stage raised is not repeated on the console (the
    process's stream handlers): the caller says it once, in the run's closing line. The engine's
    "Finished in state Completed()" lines are shown only with ``successes``."""
    handlers = [h for h in logging.getLogger().handlers if isinstance(h, logging.StreamHandler)]
    once = _OnceOnConsole(successes)
    for handler in handlers:
        handler.addFilter(once)
    try:
        yield
    finally:
        for handler in handlers:
            handler.removeFilter(once)
