"""Where the store and the MLflow tracking server are, resolved the same way by every
command and flow: a flag (or flow parameter), else what the door the run came in by was given
(:func:`door`), else the environment (``RBENCH_STORE``, ``MLFLOW_TRACKING_URI``, read at run
time on the worker), else the settings file, else the default (``./.rbench``;
``sqlite:///<store>/mlflow.db``)."""

from __future__ import annotations

import contextlib
import contextvars
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from rbench.core import settings

DEFAULT_STORE = Path(".rbench")


def resolve_store(flag: str | Path | None = None) -> Path:
    """The store of a command without a settings file: ``flag``, else ``$RBENCH_STORE``, else ``./.rbench``."""
    chosen = given_store(flag) or DEFAULT_STORE
    return Path(chosen).expanduser().resolve()


def default_tracking_uri(store: str | Path) -> str:
    """The MLflow tracking URI when none is configured: a sqlite file inside the store."""
    return f"sqlite:///{Path(store).expanduser().resolve() / 'mlflow.db'}"


def resolve_tracking_uri(flag: str | None = None, store: str | Path | None = None) -> str:
    """The tracking URI of a command without a settings file: ``flag``, else ``$MLFLOW_TRACKING_URI``,
    else the sqlite file of the store resolved by :func:`resolve_store` from ``store``."""
    return given_tracking_uri(flag) or default_tracking_uri(resolve_store(store))


@dataclass(frozen=True)
class DoorSettings:
    """What a way into rbench was given: a command's flags, :func:`rbench.run`'s arguments. None
    leaves a setting to the environment, else to the file."""

    mirror: str | None = None
    store: str | None = None
    tracking_uri: str | None = None
    runner: str | None = None
    address: str | None = None


_DOOR: contextvars.ContextVar[DoorSettings] = contextvars.ContextVar("rbench_door", default=DoorSettings())


@contextlib.contextmanager
def door(given: DoorSettings) -> Iterator[DoorSettings]:
    """While the block runs (its flows, subflows and task threads too: they copy the context),
    the ``given_*`` functions answer with ``given`` before the environment: so a flow started by
    a door resolves the door's settings without taking them as parameters, which Prefect stores
    (a tracking URI may hold a password)."""
    token = _DOOR.set(given)
    try:
        yield given
    finally:
        _DOOR.reset(token)


def door_settings() -> DoorSettings:
    """The settings of the door this code runs under (all None outside one: a deployed run)."""
    return _DOOR.get()


def given_mirror(flag: str | Path | None = None) -> str | None:
    """The mirror a command or flow was given: ``flag``, else the door's, else ``$RBENCH_MIRROR`` (read
    now: on a worker, at run time), else None, which leaves the settings file's value in place."""
    chosen = flag or door_settings().mirror
    return str(chosen) if chosen else settings.read(settings.MIRROR)


def given_store(flag: str | Path | None = None) -> str | None:
    """The store a command or flow was given: ``flag``, else the door's, else ``$RBENCH_STORE``, else
    None (the file's)."""
    chosen = flag or door_settings().store
    return str(chosen) if chosen else settings.read(settings.STORE)


def given_tracking_uri(flag: str | None = None) -> str | None:
    """The tracking URI a command or flow was given: ``flag``, else the door's, else
    ``$MLFLOW_TRACKING_URI``, else None."""
    chosen = flag or door_settings().tracking_uri
    return str(chosen) if chosen else settings.read(settings.TRACKING)


MIRROR_NOTE = "mirror"


def remember_mirror(store: str | Path, mirror: str | Path) -> None:
    """Record in the store the mirror a run read, for ``rbench list datasets`` without ``--mirror``."""
    from rbench.core.store import write_atomic

    write_atomic(Path(store) / MIRROR_NOTE, f"{Path(mirror).expanduser().resolve()}\n")


def remembered_mirror(store: str | Path) -> Path | None:
    """The mirror the store's last run read (see :func:`remember_mirror`), if it still exists."""
    note = Path(store) / MIRROR_NOTE
    if not note.is_file():
        return None
    folder = Path(note.read_text(encoding="utf-8").strip())
    return folder if folder.is_dir() else None


STORES_FILE = "stores.tsv"
"""In the user's cache folder (``RBENCH_CACHE``): one line per experiment file and store a run used."""


def remember_store(config: str | Path, store: str | Path, defaulted: bool) -> None:
    """Record that a run of the experiment file ``config`` used ``store``, ``defaulted`` when nothing
    named it (no flag, variable nor ``store:``), as a line appended to ``<cache>/stores.tsv`` unless
    it repeats that file's last: a later run of the file started in another folder finds a
    defaulted store there, and the reading commands find a run id in any. A cache folder that
    cannot be written only loses the note."""
    config, store = Path(config).resolve(), Path(store).expanduser().resolve()
    last = next(((s, d) for named, s, d in reversed(_store_lines()) if named == str(config)), None)
    if last == (store, defaulted):
        return
    index = settings.cache_dir() / STORES_FILE
    try:
        index.parent.mkdir(parents=True, exist_ok=True)
        with open(index, "a", encoding="utf-8") as f:  # one short write per line: appends do not interleave
            f.write(f"{config}\t{store}\t{'default' if defaulted else 'named'}\n")
    except OSError:
        pass


def _store_lines() -> list[tuple[str, Path, bool]]:
    index = settings.cache_dir() / STORES_FILE
    try:
        text = index.read_text(encoding="utf-8")
    except OSError:
        return []
    rows = [line.split("\t") for line in text.splitlines()]
    return [(row[0], Path(row[1]), row[2:] == ["default"]) for row in rows if len(row) >= 2 and row[1]]


def remembered_store(config: str | Path) -> Path | None:
    """The store of the last run of the experiment file ``config`` that nothing named a store for,
    if it still holds an MLflow database or stage artifacts (a store named by a flag, a variable or
    the file is never followed: a test's temporary store, a one-off), else None."""
    config = str(Path(config).resolve())
    for named, store, defaulted in reversed(_store_lines()):
        if named == config and defaulted:
            return store if _holds_runs(store) else None
    return None


def known_stores() -> list[Path]:
    """Every store a run recorded (:func:`remember_store`) that still holds an MLflow database,
    the most recently recorded first."""
    found = dict.fromkeys(store for _, store, _ in reversed(_store_lines()))
    return [store for store in found if (store / "mlflow.db").is_file()]


def _holds_runs(store: Path) -> bool:
    return (store / "mlflow.db").is_file() or any(store.glob("*/*/_manifest.json"))


def rbench_command() -> str:
    """How to call rbench again from here, for printed hints: ``rbench`` where that is this
    environment's command on PATH, else the command's path (``.venv/bin/rbench`` after ``make run``)."""
    return command_of("rbench")


def command_of(name: str) -> str:
    """How to call this environment's command ``name`` (``rbench``, ``mlflow``) from here: its
    name where that is the one on PATH, else its path (relative to here when it can be)."""
    script = Path(sys.executable).with_name(name)
    found = shutil.which(name)
    if not script.is_file() or (found and Path(found).resolve() == script.resolve()):
        return name
    try:
        return str(script.relative_to(Path.cwd()))
    except ValueError:
        return str(script)
