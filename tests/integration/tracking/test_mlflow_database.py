"""A store's MLflow database is a copy of an empty one MLflow migrated once, and the copy is
what MLflow itself would have created in this working folder; a logging leaves no run behind it
creates. Costs about 45-65 s here (MLflow children that migrate a database, one logging)."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path

from rbench.tracking.backend import empty_database, prepare_tracking


def _contents(db: Path) -> dict:
    """The schema (each statement's lines as a set: MLflow's own migrations order a table's
    constraints differently from one database to the next) and every row, less the Default
    experiment's creation times."""
    with closing(sqlite3.connect(db)) as c:
        objects = c.execute("SELECT type, name, sql FROM sqlite_master").fetchall()
        schema = {(kind, name): sorted(line.strip().rstrip(",") for line in (sql or "").splitlines())
                  for kind, name, sql in objects}
        rows = {name: sorted(c.execute(f'SELECT * FROM "{name}"').fetchall(), key=str)
                for kind, name, _ in objects if kind == "table"}
    rows["experiments"] = [row[:4] + row[6:] for row in rows["experiments"]]
    return {"schema": schema, "rows": rows}


def test_a_new_database_is_a_copy_equal_to_what_mlflow_creates_here(tmp_path, monkeypatch):
    here, elsewhere = tmp_path / "here", tmp_path / "elsewhere"
    here.mkdir(), elsewhere.mkdir()
    monkeypatch.setenv("RBENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.chdir(elsewhere)  # the empty database is made in another working folder
    template = empty_database(tmp_path / "unused.db")
    assert template.parent == tmp_path / "cache" / "mlflow"

    monkeypatch.chdir(here)
    full = tmp_path / "no-python"  # a copy needs no child process
    full.write_text("#!/bin/sh\nexit 1\n")
    full.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(full))
    prepare_tracking(f"sqlite:///{tmp_path / 'store' / 'mlflow.db'}")
    monkeypatch.undo()

    subprocess.run([sys.executable, "-c", "import sys; from mlflow.tracking import MlflowClient; "
                    "MlflowClient(sys.argv[1]).search_experiments()", f"sqlite:///{tmp_path / 'mlflow.db'}"],
                   cwd=here, check=True, capture_output=True)
    copied, created = _contents(tmp_path / "store" / "mlflow.db"), _contents(tmp_path / "mlflow.db")
    assert copied == created
    assert created["rows"]["experiments"][0][2] == str(here / "mlruns" / "0")


def test_a_damaged_empty_database_is_made_again(tmp_path, monkeypatch):
    monkeypatch.setenv("RBENCH_CACHE", str(tmp_path / "cache"))
    template = empty_database(tmp_path / "unused.db")
    template.write_bytes(b"not a database")
    prepare_tracking(f"sqlite:///{tmp_path / 'store' / 'mlflow.db'}")
    with closing(sqlite3.connect(template)) as c:
        assert c.execute("SELECT name FROM experiments").fetchall() == [("Default",)]
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{tmp_path / 'store' / 'mlflow.db'}")
    client.create_experiment("new")
    assert {e.name for e in client.search_experiments()} == {"Default", "new"}
    assert not list((tmp_path / "cache").rglob("*.tmp"))


def test_an_unwritable_cache_keeps_the_empty_database_beside_the_store(tmp_path, monkeypatch):
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the cache folder should be")
    monkeypatch.setenv("RBENCH_CACHE", str(blocked))
    prepare_tracking(f"sqlite:///{tmp_path / 'store' / 'mlflow.db'}")
    assert (tmp_path / "store" / "mlflow.db").is_file()
    assert [p.name for p in (tmp_path / "store").glob("empty-mlflow-*.db")]


def test_an_experiment_keeps_its_artifacts_beside_its_local_database(tmp_path, monkeypatch):
    """Artifacts go beside the database they belong to: ``mlflow-artifacts`` beside the store's own
    ``mlflow.db`` or beside a ``sqlite:///`` file the user named, never in MLflow's default
    ``./mlruns`` of the folder the command ran in (a chunking grid with its own tracking URI left
    them in the checkout); a tracking server chooses for itself. ~2 s."""
    import mlflow

    from rbench.tracking.write import ensure_experiment, writing_to

    monkeypatch.chdir(tmp_path)
    named = tmp_path / "elsewhere" / "runs.db"
    named.parent.mkdir()
    for uri, store, expected in ((None, tmp_path / "store", tmp_path / "store" / "mlflow-artifacts"),
                                 (f"sqlite:///{named}", tmp_path / "store", named.parent / "mlflow-artifacts")):
        store.mkdir(exist_ok=True)
        with writing_to(uri or f"sqlite:///{store / 'mlflow.db'}"):
            experiment = mlflow.get_experiment(ensure_experiment(mlflow, "exp", store, uri))
        assert experiment.artifact_location == expected.as_uri()
    assert not (tmp_path / "mlruns").exists()


def test_a_create_that_mlflow_sent_twice_leaves_one_parent_and_nothing_running(tmp_path, monkeypatch):
    """A parent run's create that reached a server which then died is sent again by MLflow's HTTP
    retries: two runs. On main 5aabe61 the first stayed RUNNING and empty beside the logged parent
    (issue 81, item 4). Here the client sends every create twice, as such a retry does. ~3 s."""
    from mlflow.entities import ViewType
    from mlflow.tracking import MlflowClient

    from rbench.config import parse_config
    from rbench.tracking.write import log_experiment

    real = MlflowClient.create_run
    monkeypatch.setattr(MlflowClient, "create_run", lambda self, *a, **k: (real(self, *a, **k), real(self, *a, **k))[1])
    uri = f"sqlite:///{tmp_path / 'runs.db'}"
    cfg = parse_config({"name": "twice", "store": str(tmp_path / "store"), "mlflow": {"tracking_uri": uri},
                        "datasets": [{"name": "fetaqa"}], "retrievers": [{"name": "bm25"}]})
    parent = log_experiment(cfg, [], [], "name: twice\n")
    client = MlflowClient(uri)
    experiment = client.get_experiment_by_name(cfg.mlflow.experiment).experiment_id
    runs = client.search_runs([experiment])
    assert [(r.info.run_id, r.info.status) for r in runs] == [(parent, "FINISHED")]
    assert len(client.search_runs([experiment], run_view_type=ViewType.DELETED_ONLY)) == 1  # the copy
