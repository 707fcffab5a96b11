"""Which results are already in MLflow, so that a rerun that changes nothing logs nothing.

After the flow logs an experiment whose every pair finished, a small record goes into the
store (``_mlflow-logged/<digest>.json``, written atomically) under a digest of what that
MLflow run shows: the tracking URI (redacted), the MLflow experiment, the config text, the
git commit, and the addresses of every logged artifact. ``rbench run`` looks the record up
when every stage is cached; it trusts it only while the MLflow run it names still exists,
finished and not deleted (asked of the sqlite file directly, or of a tracking server's REST
API), so a deleted or damaged database means a normal run that logs again.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import sqlite3
import time
from pathlib import Path
from typing import Sequence

from rbench.config import ExperimentConfig
from rbench.core.hashing import canonical_json
from rbench.core.secrets import redact
from rbench.core.store import Store, write_atomic
from rbench.results import PairResult
from rbench.tracking.write import git_commit

LOGGED = "_mlflow-logged"
log = logging.getLogger("rbench")


def _addresses(result: PairResult) -> list:
    return [None if a is None else [a.stage, a.key] for a in result.artifacts()]


def logged_digest(cfg: ExperimentConfig, results: Sequence[PairResult], config_text: str) -> str:
    """The digest of what an MLflow run of these results shows."""
    view = {
        "tracking_uri": redact(cfg.tracking_uri()), "experiment": cfg.mlflow.experiment,
        "config_sha256": hashlib.sha256(config_text.encode()).hexdigest(), "git_commit": git_commit(),
        "results": sorted([r.dataset, r.retriever.label, _addresses(r)] for r in results),
    }
    return hashlib.sha256(canonical_json(view).encode()).hexdigest()


def _record(cfg: ExperimentConfig, digest: str) -> Path:
    return Store(cfg.store).root / LOGGED / f"{digest}.json"


def remember_logged(cfg: ExperimentConfig, results: Sequence[PairResult], config_text: str, run_id: str) -> None:
    """Record that ``run_id`` logged these results (call only when every pair finished)."""
    path = _record(cfg, logged_digest(cfg, results, config_text))
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps({"run_id": run_id, "tracking_uri": redact(cfg.tracking_uri()),
                                   "experiment": cfg.mlflow.experiment, "logged": time.strftime("%Y-%m-%dT%H:%M:%S")}))


def already_logged(cfg: ExperimentConfig, results: Sequence[PairResult], config_text: str) -> str | None:
    """The id of the MLflow run that logged exactly these results, while it is still there."""
    path = _record(cfg, logged_digest(cfg, results, config_text))
    try:
        run_id = json.loads(path.read_text())["run_id"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return run_id if run_is_finished(cfg.tracking_uri(), run_id) else None


def run_is_finished(uri: str, run_id: str) -> bool:
    """Whether the tracking store at ``uri`` holds ``run_id``, FINISHED and active. Asked without
    MLflow's client: a sqlite file directly (read-only), a server by its REST API; any other
    store, or any doubt (an error, a server that does not answer), is a no."""
    try:
        if uri.startswith("sqlite:///"):
            path = Path(uri[len("sqlite:///"):])
            if not path.is_file():
                return False
            with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)) as db:
                row = db.execute("SELECT status, lifecycle_stage FROM runs WHERE run_uuid = ?", (run_id,)).fetchone()
            return row == ("FINISHED", "active")
        if uri.startswith(("http://", "https://")):
            import urllib.request

            from rbench.experiment import tracking_request

            request = tracking_request(uri, "/api/2.0/mlflow/runs/get", {"run_id": run_id})
            with urllib.request.urlopen(request, timeout=5) as response:
                info = json.load(response)["run"]["info"]
            return (info.get("status"), info.get("lifecycle_stage")) == ("FINISHED", "active")
    except (OSError, ValueError, KeyError, TypeError, sqlite3.Error) as e:
        log.info("could not confirm MLflow run %s at %s (%s): running the flow", run_id, redact(uri),
                 redact(str(e)))
    return False
