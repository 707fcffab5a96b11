"""The MLflow bootstrap: the tracking URI for one block of code, and a local sqlite database
created once, safely, by many processes."""

from __future__ import annotations

import logging
import os
import uuid
from contextlib import contextmanager
from pathlib import Path

from rbench.core import settings

log = logging.getLogger("rbench")


@contextmanager
def tracking(uri: str):
    """Point MLflow's fluent API at ``uri`` for the block. Credentials in the URI go to
    ``MLFLOW_TRACKING_USERNAME`` / ``MLFLOW_TRACKING_PASSWORD`` instead (MLflow prints and
    stores the URI it is given: "View run ... at"). ``mlflow.set_tracking_uri`` also writes
    ``MLFLOW_TRACKING_URI`` into this process's environment, which rbench reads as the
    worker's setting: every variable is restored on the way out."""
    import mlflow

    from rbench.core.secrets import split_credentials

    bare, credentials = split_credentials(uri)
    names = ("MLFLOW_TRACKING_URI", "MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD")
    before = {name: os.environ.get(name) for name in names}
    if credentials is not None:
        os.environ["MLFLOW_TRACKING_USERNAME"], os.environ["MLFLOW_TRACKING_PASSWORD"] = credentials
    mlflow.set_tracking_uri(bare)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def opened_afresh(uri: str) -> None:
    """Where ``uri`` is a local sqlite database, MLflow's SQL databases are opened afresh for each
    of MLflow's sessions in this process from now on (``MLFLOW_SQLALCHEMYSTORE_POOLCLASS=NullPool``,
    unless set): MLflow keeps one store per URI for the process, and its pooled connection to a
    database deleted since (a notebook that removed its store between two runs) failed every
    write with "attempt to write a readonly database", though :func:`prepare_tracking` had made
    the database again. About 0.75 ms per MLflow call (``tests/benchmarks/mlflow_pool.py``); a
    process that only talks to a server database keeps MLflow's pool. MLflow's INFO line naming the
    pool ("Create SQLAlchemy engine with pool options") is not printed: it opened every ``show``."""
    if uri.startswith("sqlite:"):
        os.environ.setdefault("MLFLOW_SQLALCHEMYSTORE_POOLCLASS", "NullPool")
        logging.getLogger("mlflow.store.db.utils").setLevel(logging.WARNING)


def mlflow_client(uri: str):
    """An ``MlflowClient`` for ``uri`` (a local database opened afresh: :func:`opened_afresh`)."""
    from mlflow.tracking import MlflowClient

    opened_afresh(uri)
    return MlflowClient(tracking_uri=uri)


def prepare_tracking(uri: str) -> None:
    """Make a local sqlite tracking database safe to open from many processes at once.

    MLflow creates and migrates a new database on first use; two processes doing that
    together corrupt it, and a kill in the middle leaves it unusable. So a missing
    database is created once, under a lease, as a copy of an empty migrated database (see
    :func:`empty_database`) on a temporary file that is renamed into place when complete. A
    database of 0 bytes (a copy that failed, a full disk) holds nothing: it is created anew.

    The database is opened afresh for each of MLflow's sessions (:func:`opened_afresh`).
    """
    if not uri.startswith("sqlite:///"):
        return
    opened_afresh(uri)
    path = Path(uri[len("sqlite:///"):])
    if path.exists() and not _holds_nothing(path):
        _check_sqlite(path)
        follow_moved_store(path)
        return
    import shutil
    import sqlite3

    from rbench.core.errors import RbenchError
    from rbench.core.lease import Lease

    path.parent.mkdir(parents=True, exist_ok=True)
    with Lease(path.with_name(f".{path.name}.lease")):
        if path.exists() and not _holds_nothing(path):
            return
        if path.exists():
            log.warning("rbench: the MLflow database %s was empty (0 bytes): it is created anew", path)
            path.unlink()
        for stale in path.parent.glob(f".{path.name}.*.tmp"):  # a creation killed midway
            stale.unlink(missing_ok=True)
        tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
        try:
            shutil.copyfile(empty_database(path), tmp)
            _as_if_created_here(tmp)
            tmp.replace(path)
        except (OSError, sqlite3.Error) as e:
            raise RbenchError(f"could not create the MLflow database {path}: "
                              f"{getattr(e, 'strerror', None) or e}") from None
        finally:
            tmp.unlink(missing_ok=True)


def empty_database(path: Path) -> Path:
    """An empty tracking database migrated by this MLflow version, created once per cache:
    ``$RBENCH_CACHE/mlflow`` (default ``~/.cache/rbench/mlflow``), or beside ``path`` when that
    folder cannot be written. Creating one runs MLflow's migrations in a child process, about
    5 s; a copy takes milliseconds. A damaged one is made again."""
    import subprocess
    import sys
    from importlib.metadata import version

    from rbench.core.errors import RbenchError
    from rbench.core.lease import Lease
    from rbench.core.stopping import reaped_on_stop

    root = settings.cache_dir() / "mlflow"
    try:
        root.mkdir(parents=True, exist_ok=True)
        writable = os.access(root, os.W_OK)
    except OSError:
        writable = False
    if not writable:
        root = path.parent
    template = root / f"empty-mlflow-{version('mlflow')}.db"
    if _empty_and_sound(template):
        return template
    with Lease(root / f".{template.name}.lease"):
        if _empty_and_sound(template):
            return template
        for stale in root.glob(f".{template.name}.*.tmp"):
            stale.unlink(missing_ok=True)
        tmp = root / f".{template.name}.{uuid.uuid4().hex[:8]}.tmp"
        try:
            args = [sys.executable, "-c", "import sys; from mlflow.tracking import MlflowClient; "
                    "MlflowClient(sys.argv[1]).search_experiments()", f"sqlite:///{tmp}"]
            with subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as child, \
                    reaped_on_stop(child):
                out, err = child.communicate()
            if child.returncode:
                raise subprocess.CalledProcessError(child.returncode, args, out, err)
            tmp.replace(template)
        except subprocess.CalledProcessError as e:
            lines = e.stderr.strip().splitlines()
            cause = next((line for line in reversed(lines) if "No space left" in line or "disk" in line.lower()),
                         lines[-1] if lines else f"exit status {e.returncode}")
            raise RbenchError(f"could not create the MLflow database {path}: {cause}") from None
        except OSError as e:
            raise RbenchError(f"could not create the MLflow database {path}: {e.strerror or e}") from None
        finally:
            tmp.unlink(missing_ok=True)
    return template


def _empty_and_sound(template: Path) -> bool:
    """Whether ``template`` is a sound, migrated tracking database holding only the Default experiment."""
    import sqlite3
    from contextlib import closing

    if not template.is_file():
        return False
    try:
        with closing(sqlite3.connect(f"file:{template}?mode=ro", uri=True, timeout=30)) as db:
            sound = db.execute("PRAGMA quick_check").fetchone()[0] == "ok"
            migrated = db.execute("SELECT count(*) FROM alembic_version").fetchone()[0] == 1
            experiments = db.execute("SELECT experiment_id FROM experiments").fetchall()
    except sqlite3.DatabaseError:
        return False
    return sound and migrated and experiments == [(0,)]


def _as_if_created_here(db: Path) -> None:
    """Write what MLflow writes from its creating process into a copied database: the Default
    experiment's artifact folder (``./mlruns`` of the working folder) and its creation time."""
    import sqlite3
    import time
    from contextlib import closing

    now = int(time.time() * 1000)
    with closing(sqlite3.connect(db, timeout=30)) as connection, connection:
        connection.execute("UPDATE experiments SET artifact_location = ?, creation_time = ?, last_update_time = ? "
                           "WHERE experiment_id = 0", (str(Path.cwd() / "mlruns" / "0"), now, now))


ARTIFACTS = "mlflow-artifacts"


def follow_moved_store(db: Path) -> int:
    """Point a store's MLflow artifact locations into the store its database is in, when the
    store was copied or moved: rbench creates its experiments with their artifacts in
    ``<store>/mlflow-artifacts``, and MLflow records that folder as an absolute address, so a
    copy read and wrote the original's artifacts. Locations under another folder named
    ``mlflow-artifacts`` whose store holds this very database's copy (the same
    ``mlflow-artifacts`` folder is present here) are rewritten, in the experiments and their
    runs; locations elsewhere (a server's, a user's) are left alone. Returns how many
    experiments were moved, each logged."""
    import sqlite3
    from contextlib import closing

    here = (db.parent / ARTIFACTS).resolve().as_uri()
    if not (db.parent / ARTIFACTS).is_dir():
        return 0
    with closing(sqlite3.connect(db, timeout=30)) as connection:
        rows = connection.execute("SELECT experiment_id, artifact_location FROM experiments").fetchall()
        moved = {loc for _, loc in rows if loc and loc.startswith("file://") and loc.endswith(f"/{ARTIFACTS}")
                 and loc != here}
        with connection:
            for old in moved:
                connection.execute("UPDATE experiments SET artifact_location = ? WHERE artifact_location = ?",
                                   (here, old))
                connection.execute("UPDATE runs SET artifact_uri = ? || substr(artifact_uri, ?) "
                                   "WHERE substr(artifact_uri, 1, ?) = ?", (here, len(old) + 1, len(old) + 1,
                                                                             old + "/"))
                connection.execute("UPDATE runs SET artifact_uri = ? || substr(artifact_uri, ?) "
                                   "WHERE artifact_uri = ?", (here, len(old) + 1, old))
    for old in sorted(moved):
        log.info("rbench: the store was moved or copied from %s: its MLflow artifact locations now point into %s",
                 old, here)
    return len(moved)


def _holds_nothing(path: Path) -> bool:
    """Whether a database file is empty: 0 bytes, no table."""
    try:
        return path.stat().st_size == 0
    except FileNotFoundError:
        return False


def _check_sqlite(path: Path) -> None:
    """A damaged tracking database is named with the way to recover, before anything is logged. One
    that another process holds locked is busy, not damaged: it is waited for (``RBENCH_DB_BUSY_SECONDS``,
    saying so and who may hold it), then named busy with its possible holders."""
    import sqlite3

    from rbench.core.errors import RbenchError

    status, waited = None, 0.0
    for timeout in (0.5, max(settings.db_busy_seconds() - 0.5, 0.0)):
        try:
            with sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=timeout) as db:
                status = db.execute("PRAGMA quick_check").fetchone()[0]
            break
        except sqlite3.OperationalError as e:
            if not _is_busy(e):
                status = str(e)
                break
            if not waited:
                log.info("rbench: the MLflow database %s is locked by another process%s: waiting up to %.0fs",
                         path, _holders(path), settings.db_busy_seconds())
            waited += timeout
        except sqlite3.DatabaseError as e:
            status = str(e)
            break
    if status is None:
        raise RbenchError(
            f"the MLflow database {path} is busy: another process has held it locked for {waited:.0f}s"
            f"{_holders(path)}. Nothing is wrong with it: let that process finish (or stop it) and run again; "
            "RBENCH_DB_BUSY_SECONDS sets how long rbench waits")
    if status != "ok":
        raise RbenchError(
            f"the MLflow database {path} is damaged ({status}). Move it aside (mv {path} {path}.damaged): "
            "the next run creates a new one, and rerunning an experiment (all stages cached) logs it again"
        )


def _is_busy(error: Exception) -> bool:
    """Whether an sqlite error is another connection's lock (the database is fine)."""
    text = str(error).lower()
    return "locked" in text or "busy" in text


def _holders(path: Path) -> str:
    """`` (held open by pid N: command, ...)`` for the other processes of this host that have
    ``path`` open (read from /proc, where there is one), else ''."""
    found = []
    target = os.path.realpath(path)
    for proc in Path("/proc").glob("[0-9]*") if Path("/proc").is_dir() else ():
        if int(proc.name) == os.getpid():
            continue
        try:
            if any(os.path.realpath(fd) == target for fd in (proc / "fd").iterdir()):
                command = " ".join((proc / "cmdline").read_bytes().decode(errors="replace").replace("\0", " ").split())
                found.append(f"pid {proc.name}: {command[:80]}")
        except OSError:
            continue
    return f" (held open by {'; '.join(found)})" if found else ""


def experiment_of_run(db: Path, run_id: str) -> str | None:
    """The experiment id of the run ``run_id`` in the MLflow sqlite database ``db``, read-only
    without MLflow; None when the file lacks the run or cannot be read."""
    import contextlib
    import sqlite3

    if not db.is_file():
        return None
    try:
        with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)) as conn:
            row = conn.execute("SELECT experiment_id FROM runs WHERE run_uuid = ?", (run_id,)).fetchone()
    except sqlite3.Error:
        return None
    return None if row is None else str(row[0])
