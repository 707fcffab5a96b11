"""Resolving an experiment at run time: a file or a structured config, with the worker's
environment filling what the caller left out."""

from __future__ import annotations

import os
import time
from pathlib import Path

import yaml

from rbench.config import ExecutionConfig, ExperimentConfig, load_config, parse_config
from rbench.core import settings
from rbench.core.errors import ConfigError
from rbench.core.locations import given_mirror, given_store, given_tracking_uri


def resolve_experiment(config_path: str | None, experiment: ExperimentConfig | dict | None, *,
                       mirror: str | None = None, store: str | None = None, tracking_uri: str | None = None,
                       runner: str | None = None, address: str | None = None) -> ExperimentConfig:
    """The validated experiment. Each of mirror, store and tracking URI is taken from the
    argument, else from ``RBENCH_MIRROR`` / ``RBENCH_STORE`` / ``MLFLOW_TRACKING_URI`` in this
    process's environment (read here, on the worker, at run time), else from the experiment."""
    if config_path is None and experiment is None:
        raise ConfigError("give an experiment: config_path (a YAML file) or experiment (a structured config)")
    mirror = given_mirror(mirror)
    store = given_store(store)
    tracking_uri = given_tracking_uri(tracking_uri)
    if experiment is not None:  # the structured form wins over a (default) file path
        raw = experiment.model_dump(mode="json") if isinstance(experiment, ExperimentConfig) else dict(experiment)
        cfg = parse_config(raw, source="(experiment parameter)", mirror=mirror, store=store)
    else:
        clone = settings.read(settings.CLONE)
        if clone and not Path(config_path).exists():
            raise ConfigError(f"config {config_path} is not in the clone of {clone} (relative to the clone's root, "
                              f"{Path.cwd()}): commit and push it and deploy that commit, or pass the experiment "
                              "itself as the deployment's experiment parameter")
        cfg = load_config(config_path, mirror=mirror, store=store)
    update = {}
    if tracking_uri:
        update["mlflow"] = cfg.mlflow.model_copy(update={"tracking_uri": tracking_uri})
    if runner or address:
        execution = {**cfg.execution.model_dump(), **({"runner": runner} if runner else {}),
                     **({"address": address} if address else {})}
        try:
            update["execution"] = ExecutionConfig.model_validate(execution)
        except ValueError as e:
            raise ConfigError(f"execution settings: {e}") from None
    return cfg.model_copy(update=update) if update else cfg


def preflight(cfg: ExperimentConfig) -> None:
    """Checks that need the machine, run before any work: every model can be loaded here, and
    the store is writable with room to spare. Raises ConfigError naming the fix."""
    import shutil
    import uuid

    from rbench.llm.config import check_llm
    from rbench.retrievers.models import check_available

    for r in cfg.retrievers:
        retriever = r.build()
        for leaf in retriever.leaves():
            model = getattr(leaf.params, "model", None)
            if model is not None:
                check_available(model)
        for spec in retriever.rewrites():
            check_llm(spec.llm)
    store = Path(cfg.store)
    try:
        store.mkdir(parents=True, exist_ok=True)
        probe = store / f".write-test-{uuid.uuid4().hex[:8]}"
        probe.write_bytes(b"rbench")
        probe.unlink()
    except OSError as e:
        raise ConfigError(f"store {store} is not writable ({e.strerror}): pass --store DIR (or set RBENCH_STORE) "
                          "to a folder you can write") from None
    free = shutil.disk_usage(store).free
    needed = settings.min_free_bytes()
    if free < needed:
        raise ConfigError(f"store {store} has {free / 1e6:.0f} MB free, less than {needed / 1e6:.0f} MB: "
                          "free some space or pass --store DIR on another disk")
    check_tracking(cfg.tracking_uri(), cfg.mlflow.experiment)


def check_tracking(uri: str, experiment: str = "rbench") -> None:
    """The tracking server is asked, before any work, what the logging will ask first: the
    experiment by name, through MLflow's REST API with the same credentials (``user:password@``
    in the URI, ``MLFLOW_TRACKING_USERNAME``/``PASSWORD`` or ``MLFLOW_TRACKING_TOKEN``), so that
    a host name outside the server's ``--allowed-hosts``, missing credentials or a missing
    permission stop the run with the fix. A server that does not answer is only named: the run
    goes on and its logging is kept in the store for ``rbench log``. A sqlite database's folder
    must be creatable."""
    if uri.startswith("sqlite:///"):
        folder = Path(uri[len("sqlite:///"):]).parent
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise ConfigError(f"the MLflow database folder {folder} cannot be created ({e.strerror}): "
                              "fix mlflow.tracking_uri (or MLFLOW_TRACKING_URI)") from None
        return
    if uri.startswith(("http://", "https://")):
        _probe_tracking_server(uri, experiment)


def tracking_request(uri: str, path: str, query: dict[str, str]):
    """A GET request to an MLflow tracking server's REST API at ``path`` (``/api/2.0/mlflow/...``),
    with the credentials MLflow's client would send: the URI's user:password,
    ``MLFLOW_TRACKING_USERNAME``/``PASSWORD``, or a ``MLFLOW_TRACKING_TOKEN`` bearer."""
    import base64
    import urllib.parse
    import urllib.request

    from rbench.core.secrets import split_credentials

    bare, credentials = split_credentials(uri)
    if credentials is None and os.environ.get("MLFLOW_TRACKING_USERNAME"):
        credentials = (os.environ["MLFLOW_TRACKING_USERNAME"], os.environ.get("MLFLOW_TRACKING_PASSWORD", ""))
    headers = {}
    if credentials is not None:
        headers["Authorization"] = "Basic " + base64.b64encode(":".join(credentials).encode()).decode()
    elif os.environ.get("MLFLOW_TRACKING_TOKEN"):
        headers["Authorization"] = f"Bearer {os.environ['MLFLOW_TRACKING_TOKEN']}"
    return urllib.request.Request(f"{bare.rstrip('/')}{path}?{urllib.parse.urlencode(query)}", headers=headers)


def _probe_tracking_server(uri: str, experiment: str) -> None:
    import logging
    import urllib.error
    import urllib.parse
    import urllib.request

    from rbench.core.secrets import redact, split_credentials

    bare, _ = split_credentials(uri)
    request = tracking_request(uri, "/api/2.0/mlflow/experiments/get-by-name", {"experiment_name": experiment})
    host = urllib.parse.urlsplit(bare).netloc
    try:
        with urllib.request.urlopen(request, timeout=10):
            return
    except urllib.error.HTTPError as e:
        body = e.read(2000).decode("utf-8", "replace")
        if e.code == 404 and "RESOURCE_DOES_NOT_EXIST" in body:
            return  # no such experiment yet: the logging creates it
        if e.code == 403 and "host" in body.lower():
            raise ConfigError(
                f"the MLflow server {bare} refuses the host name {host!r} (403: {body.strip()[:200]}): start it "
                f"with --allowed-hosts listing {host} (mlflow server --allowed-hosts ...,{host}), or reach it by a "
                "name it allows (MLFLOW_TRACKING_URI)") from None
        if e.code == 401:
            raise ConfigError(
                f"the MLflow server {bare} wants credentials (401): set MLFLOW_TRACKING_USERNAME and "
                "MLFLOW_TRACKING_PASSWORD (or MLFLOW_TRACKING_TOKEN) in the environment that runs rbench") from None
        if e.code == 403:
            raise ConfigError(
                f"the MLflow server {bare} refuses access to experiment {experiment!r} (403: "
                f"{redact(body.strip()[:200])}): ask for permission on it, or log to another experiment "
                "(mlflow.experiment in the config)") from None
        logging.getLogger("rbench").warning(
            "the MLflow tracking server %s answered HTTP %s to %s: the run goes on; if its logging fails, it is "
            "kept in the store for `rbench log`", bare, e.code, request.full_url.split("?")[0])
    except (OSError, ValueError) as e:
        logging.getLogger("rbench").warning(
            "the MLflow tracking server %s does not answer (%s): the run goes on, and its logging is kept in "
            "the store for `rbench log` (tried once, not retried for minutes)", redact(uri),
            redact(str(getattr(e, "reason", e))))
        os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
        os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "10")


def config_text(cfg: ExperimentConfig, config_path: str | None) -> str:
    """The experiment as the user wrote it (the file), or the resolved config as YAML."""
    if config_path is not None and Path(config_path).is_file():
        return Path(config_path).read_text(encoding="utf-8")
    return yaml.safe_dump(cfg.model_dump(mode="json"), sort_keys=False)


def run_name() -> str:
    """Prefect flow run name: the experiment's name and the start time of its first attempt (a
    retried run keeps the name it got)."""
    import re

    from prefect.runtime import flow_run

    params = flow_run.parameters or {}
    name = "experiment"
    experiment = params.get("experiment")
    if experiment is not None:
        name = getattr(experiment, "name", None) or (experiment.get("name") if isinstance(experiment, dict) else None) or name
    elif params.get("config_path"):
        try:
            raw = yaml.safe_load(Path(params["config_path"]).read_text(encoding="utf-8"))
            name = raw.get("name", Path(params["config_path"]).stem) if isinstance(raw, dict) else name
        except (OSError, yaml.YAMLError):
            name = Path(params["config_path"]).stem
    current = flow_run.name or ""
    if re.fullmatch(rf"{re.escape(name)}-\d{{8}}-\d{{6}}", current):
        return current
    return f"{name}-{time.strftime('%Y%m%d-%H%M%S')}"
