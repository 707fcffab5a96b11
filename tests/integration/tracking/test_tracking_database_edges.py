"""A store's MLflow database that holds nothing (0 bytes: a copy that failed, a full disk) or
something unreadable (garbage, a half-zeroed file), met by every command that reads or writes
it: one message and exit code 2, or a new database where it holds nothing and a run writes
(issue 60, item 2). About 20 s: one tiny run."""

from __future__ import annotations

import contextlib
import io

import pytest
import yaml

from rbench.cli import main
from tests.conftest import tiny_dataset

pytestmark = pytest.mark.usefixtures("prefect_server")  # one Prefect test server per session

READERS = [["runs"], ["show", "latest"], ["export", "latest"], ["report", "latest"],
           ["compare", "latest", "--against", "arm-report-table6"]]


@pytest.fixture
def experiment(tmp_path, tiny_files):
    config = tmp_path / "exp.yaml"
    config.write_text(yaml.safe_dump({"name": "edges", "store": str(tmp_path / "store"), "subsample": {"size": 3},
                                      "datasets": [tiny_dataset(*tiny_files)], "retrievers": [{"name": "bm25s"}]}))
    return config


def _command(args: list[str], tmp_path) -> tuple[int, str]:
    """The command's exit code and output. Captured here, not by pytest's fixtures: Prefect's console
    handler keeps the stream it first met, which a fixture closes at the test's end."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        code = main([*args, "--store", str(tmp_path / "store")] if args[0] != "run" else args)
    return code, out.getvalue()


def test_an_empty_database_is_no_run_to_readers_and_made_anew_by_a_run(tmp_path, experiment, monkeypatch):
    """On main, ``runs``, ``show``, ``export`` and ``run`` crashed on ``no such table: experiments``."""
    monkeypatch.chdir(tmp_path)
    db = tmp_path / "store" / "mlflow.db"
    db.parent.mkdir(parents=True)
    db.write_bytes(b"")
    for args in READERS:
        code, out = _command(args, tmp_path)
        assert code == 2 and "(its file is empty: 0 bytes): no run has logged there yet" in out, (args, out)
        assert "Traceback" not in out and "no such table" not in out
    code, out = _command(["run", str(experiment)], tmp_path)
    assert code == 0, out[-3000:]
    assert db.stat().st_size > 0
    code, out = _command(["show", "latest"], tmp_path)
    assert code == 0 and "tiny / bm25s" in out, out[-2000:]


@pytest.mark.parametrize("content", [b"garbage, not sqlite" * 100, b"SQLite format 3\x00" + b"\x00" * 8192],
                         ids=["garbage", "half-zeroed"])
def test_an_unreadable_database_is_named_with_the_way_out_by_every_command(tmp_path, experiment, content):
    """Readers stop with the fix; a run keeps its results and its logging for ``rbench log`` and
    exits 3 (complete results, the logging pending), with no traceback (on main: exit 1 and a
    Prefect task traceback)."""
    db = tmp_path / "store" / "mlflow.db"
    db.parent.mkdir(parents=True)
    db.write_bytes(content)
    for args in [*READERS, ["run", str(experiment)]]:
        code, out = _command(args, tmp_path)
        assert code == (3 if args[0] == "run" else 2), (args, out[-2000:])
        assert f"the MLflow database {db} is damaged" in out and f"mv {db} {db}.damaged" in out, (args, out[-2000:])
        assert "Traceback" not in out
    assert "log --store" in out and list((tmp_path / "store" / "_mlflow-pending").glob("*.json"))
    assert db.read_bytes() == content  # nothing written over it


LOCKER = """
import sqlite3, sys, time
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("BEGIN EXCLUSIVE")
print("locked", flush=True)
time.sleep(float(sys.argv[2]))
db.execute("COMMIT")
"""


def test_a_locked_database_is_busy_not_damaged_and_a_short_lock_is_waited_for(tmp_path, experiment, monkeypatch):
    """Issue 68, B: on the main of 6e8e733 every command waited 30 s, then called the database damaged
    (database is locked) and told the user to move it aside, splitting a healthy store's history."""
    import subprocess
    import sys

    assert _command(["run", str(experiment)], tmp_path)[0] == 0
    db = tmp_path / "store" / "mlflow.db"
    monkeypatch.setenv("RBENCH_DB_BUSY_SECONDS", "2")
    # held until killed below: under load the three commands took over 60 s (a CI rehearsal), and `run` then
    # found the lock gone and passed
    with subprocess.Popen([sys.executable, "-c", LOCKER, str(db), "900"], stdout=subprocess.PIPE, text=True) as holder:
        try:
            assert holder.stdout.readline().strip() == "locked"
            for args in (["runs"], ["show", "latest"], ["run", str(experiment)]):
                code, out = _command(args, tmp_path)
                assert code in (2, 3) and f"the MLflow database {db} is busy" in out, (args, out[-2000:])
                assert f"pid {holder.pid}" in out and "is damaged" not in out and "Traceback" not in out, out[-2000:]
        finally:
            holder.kill()
    monkeypatch.setenv("RBENCH_DB_BUSY_SECONDS", "30")
    with subprocess.Popen([sys.executable, "-c", LOCKER, str(db), "1.5"], stdout=subprocess.PIPE, text=True) as holder:
        assert holder.stdout.readline().strip() == "locked"
        code, out = _command(["show", "latest"], tmp_path)
    assert code == 0 and "tiny / bm25s" in out, out[-2000:]


def test_a_deleted_database_beside_stored_results_is_said_deleted(tmp_path, experiment):
    """Issue 68, notes: on main a deleted ``mlflow.db`` was "no run has logged there yet"."""
    assert _command(["run", str(experiment)], tmp_path)[0] == 0
    (tmp_path / "store" / "mlflow.db").unlink()
    code, out = _command(["runs"], tmp_path)
    assert code == 2 and "the database was deleted or moved" in out and "no run has logged" not in out, out


def test_runs_a_killed_logger_left_running_are_closed_by_the_next_run(tmp_path, experiment):
    """Issue 68, F: on the main of 6e8e733 a kill -9 during MLflow logging left the parent and child
    RUNNING for good, and the rerun logged a new run beside them."""
    import platform
    import subprocess
    import sys

    from mlflow.tracking import MlflowClient

    assert _command(["run", str(experiment)], tmp_path)[0] == 0
    client = MlflowClient(f"sqlite:///{tmp_path / 'store' / 'mlflow.db'}")
    (experiment_id,) = [e.experiment_id for e in client.search_experiments() if e.name == "rbench"]
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    left = {"rbench.host": platform.node(), "rbench.pid": gone.stdout.strip()}
    parent = client.create_run(experiment_id, tags=left, run_name="edges").info.run_id
    child = client.create_run(experiment_id, tags={**left, "mlflow.parentRunId": parent}).info.run_id
    other_host = client.create_run(experiment_id, tags={**left, "rbench.host": "elsewhere"}).info.run_id
    code, out = _command(["run", str(experiment), "--force-flow"], tmp_path)
    assert code == 0, out[-2000:]
    (new,) = [r for r in client.search_runs([experiment_id], order_by=["attributes.start_time DESC"])
              if r.info.run_name.startswith("edges-") and r.info.run_id != parent and r.info.status == "FINISHED"][:1]
    for run_id in (parent, child):
        run = client.get_run(run_id)
        assert run.info.status == "KILLED" and run.data.tags["rbench.replaced_by"] == new.info.run_id
    assert client.get_run(other_host).info.status == "RUNNING"  # another host's process cannot be checked
