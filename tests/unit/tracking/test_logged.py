"""The record of results already in MLflow: what it is keyed by, and when it is trusted."""

from __future__ import annotations

import base64
import http.server
import json
import sqlite3
import threading
from pathlib import Path

from rbench.config import parse_config
from rbench.core.store import Artifact
from rbench.results import PairResult
from rbench.tracking.logged import already_logged, logged_digest, remember_logged, run_is_finished


def _runs_db(path: Path, rows: list[tuple[str, str, str]]) -> str:
    """A sqlite file with the columns of MLflow's ``runs`` table that the check reads."""
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE runs (run_uuid TEXT PRIMARY KEY, status TEXT, lifecycle_stage TEXT)")
        db.executemany("INSERT INTO runs VALUES (?, ?, ?)", rows)
    return f"sqlite:///{path}"


def test_a_sqlite_run_counts_only_when_finished_and_active(tmp_path):
    uri = _runs_db(tmp_path / "mlflow.db", [("done", "FINISHED", "active"), ("gone", "FINISHED", "deleted"),
                                            ("failed", "FAILED", "active"), ("busy", "RUNNING", "active")])
    assert [run_is_finished(uri, r) for r in ("done", "gone", "failed", "busy", "unknown")] == [
        True, False, False, False, False]
    missing = tmp_path / "none" / "mlflow.db"
    assert not run_is_finished(f"sqlite:///{missing}", "done") and not missing.exists()  # never created
    (tmp_path / "junk.db").write_bytes(b"not a database at all" * 100)
    assert not run_is_finished(f"sqlite:///{tmp_path / 'junk.db'}", "done")
    assert not run_is_finished(f"file://{tmp_path}/mlruns", "done")  # other stores: not asked, so no


def test_a_server_is_asked_by_its_runs_api_with_the_loggings_credentials():
    seen = []
    answers = {"done": (200, {"run": {"info": {"status": "FINISHED", "lifecycle_stage": "active"}}}),
               "gone": (200, {"run": {"info": {"status": "FINISHED", "lifecycle_stage": "deleted"}}}),
               "bad": (200, {"unexpected": True})}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            seen.append((self.path, self.headers.get("Authorization")))
            status, body = answers.get(self.path.rsplit("=", 1)[-1], (404, {"error_code": "RESOURCE_DOES_NOT_EXIST"}))
            self.send_response(status)
            self.end_headers()
            self.wfile.write(json.dumps(body).encode())

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        uri = f"http://user:pw@127.0.0.1:{server.server_port}"
        assert [run_is_finished(uri, r) for r in ("done", "gone", "bad", "unknown")] == [True, False, False, False]
    finally:
        server.shutdown()
        server.server_close()
    basic = "Basic " + base64.b64encode(b"user:pw").decode()
    assert seen[0] == ("/api/2.0/mlflow/runs/get?run_id=done", basic)
    assert not run_is_finished(uri, "done")  # the server is gone: no


def _experiment(tmp_path: Path, **mlflow) -> object:
    return parse_config({"name": "e", "store": str(tmp_path / "store"), "mlflow": mlflow,
                         "datasets": [{"name": "fetaqa"}], "retrievers": [{"name": "bm25"}]})


def _results(cfg, evaluate_key: str = "e1") -> list[PairResult]:
    folder = Path("/nowhere")
    return [PairResult("fetaqa", cfg.retrievers[0], Artifact("evaluate", evaluate_key, folder),
                       Artifact("retrieve", "r1", folder), (Artifact("index", "i1", folder),))]


def test_the_record_names_what_mlflow_shows_and_is_trusted_while_the_run_is_there(tmp_path):
    cfg = _experiment(tmp_path)
    results = _results(cfg)
    digest = logged_digest(cfg, results, "name: e\n")
    assert digest == logged_digest(cfg, _results(cfg), "name: e\n")
    changed = [logged_digest(cfg, _results(cfg, "e2"), "name: e\n"), logged_digest(cfg, results, "name: e  # x\n"),
               logged_digest(_experiment(tmp_path, experiment="other"), results, "name: e\n"),
               logged_digest(_experiment(tmp_path, tracking_uri="http://mlflow:5000"), results, "name: e\n")]
    assert digest not in changed and len(set(changed)) == len(changed)

    assert already_logged(cfg, results, "name: e\n") is None  # nothing recorded yet
    (tmp_path / "store").mkdir()
    _runs_db(tmp_path / "store" / "mlflow.db", [("run-1", "FINISHED", "active")])
    remember_logged(cfg, results, "name: e\n", "run-1")
    assert already_logged(cfg, results, "name: e\n") == "run-1"
    assert already_logged(cfg, _results(cfg, "e2"), "name: e\n") is None
    with sqlite3.connect(tmp_path / "store" / "mlflow.db") as db:
        db.execute("UPDATE runs SET lifecycle_stage = 'deleted'")
    assert already_logged(cfg, results, "name: e\n") is None
