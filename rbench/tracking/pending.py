"""MLflow logging that failed, kept in the store until it succeeds.

A record holds what :func:`rbench.tracking.write.log_experiment` needs: the experiment, the
config text, the stage report, failed pairs, and the addresses (stage, key) of the
artifacts to log; the artifacts themselves stay in the store. A tracking URI with a
password is never written: the record keeps its redacted form, and logging it needs
the URI again (``--tracking-uri`` or ``MLFLOW_TRACKING_URI``). ``rbench log`` logs the
records, and every run that logs successfully logs the records meant for its URI.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from dataclasses import asdict
from pathlib import Path
from typing import Sequence

from rbench.config import ExperimentConfig, parse_config
from rbench.core.errors import RbenchError
from rbench.core.secrets import redact
from rbench.core.store import Artifact, Store, write_atomic
from rbench.results import Failure, PairResult, StageRow

PENDING = "_mlflow-pending"
log = logging.getLogger("rbench")


def _address(artifact: Artifact | None) -> list[str] | None:
    return None if artifact is None else [artifact.stage, artifact.key]


def save_pending(cfg: ExperimentConfig, results: Sequence[PairResult], report: Sequence[StageRow], config_text: str,
                 failures: Sequence[Failure], error: str) -> Path:
    """Write a record of a failed logging into the store; return its path."""
    uri = cfg.tracking_uri()
    secret = redact(uri) != uri
    experiment = cfg.model_dump(mode="json")
    experiment["mlflow"]["tracking_uri"] = None if secret else cfg.mlflow.tracking_uri
    record = {
        "experiment": experiment, "tracking_uri": redact(uri), "needs_tracking_uri": secret,
        "config_text": redact(config_text), "report": [asdict(r) for r in report],
        "failures": [asdict(f) for f in failures],
        "error": redact(error), "saved": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "results": [{
            "dataset": r.dataset, "retriever": r.retriever.label, "indexes": [_address(a) for a in r.indexes],
            "rewrites": [_address(a) for a in r.rewrites], "run": _address(r.run), "evaluation": _address(r.evaluation),
        } for r in results],
    }
    path = Store(cfg.store).root / PENDING / f"{time.strftime('%Y%m%d-%H%M%S')}-{cfg.name}-{uuid.uuid4().hex[:6]}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps(record, indent=1, ensure_ascii=False))
    return path


def pending_records(store: Store) -> list[Path]:
    """The store's records of logging still to do, oldest first."""
    folder = store.root / PENDING
    return sorted(folder.glob("*.json")) if folder.is_dir() else []


def _load(store: Store, address: list[str] | None, record: Path) -> Artifact | None:
    if address is None:
        return None
    artifact = store.load(*address)
    if artifact is None:
        raise RbenchError(f"{record}: the artifact {address[0]}/{address[1]} is no longer in the store "
                          "(removed or damaged): rerun the experiment instead, which rebuilds and logs it")
    return store.verified(artifact)


def log_pending(record: Path, tracking_uri: str | None = None) -> str:
    """Log one record to MLflow and remove it; return the parent run id.

    ``tracking_uri`` replaces the recorded one (required when that one held a password).
    """
    from rbench.tracking.write import log_experiment

    try:
        data = json.loads(record.read_text())
        cfg = parse_config(data["experiment"], source=str(record))
        report = [StageRow(**row) for row in data["report"]]
        failures = [Failure(**failure) for failure in data["failures"]]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise RbenchError(f"{record} is not a readable pending-log record ({e}): delete it") from None
    if tracking_uri is None and data.get("needs_tracking_uri"):
        raise RbenchError(f"{record} logs to {data['tracking_uri']}, whose password is not stored: give the URI "
                          "with --tracking-uri or MLFLOW_TRACKING_URI")
    if tracking_uri is not None:
        cfg = cfg.model_copy(update={"mlflow": cfg.mlflow.model_copy(update={"tracking_uri": tracking_uri})})
    store = Store(cfg.store)
    retrievers = {r.label: r for r in cfg.retrievers}
    results = [PairResult(
        r["dataset"], retrievers[r["retriever"]], _load(store, r["evaluation"], record), _load(store, r["run"], record),
        tuple(_load(store, a, record) for a in r["indexes"]), tuple(_load(store, a, record) for a in r["rewrites"]),
    ) for r in data["results"]]
    run_id = log_experiment(cfg, results, report, data["config_text"], failures=failures)
    record.unlink(missing_ok=True)
    return run_id


def log_pending_for(cfg: ExperimentConfig) -> list[str]:
    """Log the store's records meant for ``cfg``'s tracking URI (it answers now); a record that
    fails again stays, with a warning. Returns the new parent run ids."""
    uri = cfg.tracking_uri()
    logged = []
    for record in pending_records(Store(cfg.store)):
        try:
            if json.loads(record.read_text()).get("tracking_uri") != redact(uri):
                continue
            logged.append(log_pending(record, uri))
        except Exception as e:  # a record that cannot be logged must not fail the run that found it
            log.warning("pending MLflow logging %s not done: %s", record.name, redact(str(e)))
    return logged
