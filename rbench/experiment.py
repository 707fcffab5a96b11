"""Resolving an experiment at run time: a file or a structured config, with the worker's
environment filling what the caller left out."""

from __future__ import annotations

import contextlib
import contextvars
import os
import time
from pathlib import Path
from typing import Any, Iterator

import yaml

from rbench.config import ExperimentConfig, load_config, parse_config
from rbench.core import settings
from rbench.core.errors import ConfigError
from rbench.core.locations import door_settings, given_mirror, given_store, given_tracking_uri


def resolve_experiment(config_path: str | None, experiment: ExperimentConfig | dict | None, *,
                       mirror: str | None = None, store: str | None = None, tracking_uri: str | None = None,
                       runner: str | None = None, address: str | None = None) -> ExperimentConfig:
    """The validated experiment. Each of mirror, store, tracking URI, runner and address is taken
    from the argument, else from the door the run came in by (:func:`rbench.core.locations.door`),
    else (mirror, store and tracking URI) from ``RBENCH_MIRROR`` / ``RBENCH_STORE`` /
    ``MLFLOW_TRACKING_URI`` in this process's environment (read here, on the worker, at run
    time), else from the experiment."""
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
    door = door_settings()
    return cfg.overridden(tracking_uri, runner or door.runner, address or door.address)


def defaulted_store(cfg: ExperimentConfig) -> bool:
    """Whether nothing named ``cfg``'s store (no ``--store``, ``RBENCH_STORE`` nor ``store:`` in the
    file): the working folder's ``.rbench``."""
    from rbench.core.locations import DEFAULT_STORE

    return given_store() is None and Path(cfg.store) == DEFAULT_STORE.resolve()


def followed_store(config_path: str, cfg: ExperimentConfig) -> tuple[ExperimentConfig, bool]:
    """``cfg`` with the store of the last run of the file ``config_path``, where nothing chose a
    store (no ``--store``, ``RBENCH_STORE`` nor ``store:`` in the file: the working folder's
    ``.rbench``) and that run's store was another and still holds results: so a run started in
    another folder finds the cache of the first. Whether the store was followed is returned."""
    from rbench.core.locations import remembered_store

    if not defaulted_store(cfg):
        return cfg, False
    last = remembered_store(config_path)
    if last is None or last == Path(cfg.store):
        return cfg, False
    return cfg.model_copy(update={"store": last}), True


def preflight(cfg: ExperimentConfig) -> dict[str, Any]:
    """Checks that need the machine, run before any work: every model can be loaded here, the
    store is writable with room to spare, the tracking server answers. Raises ConfigError naming
    the fix. Returns each retriever it built to ask, by label: a door's plan asks them again
    (:func:`~rbench.orchestration.plan.plan_experiment`'s ``described``) instead of building them."""
    from rbench.dataset_adapters.base import get_adapter
    from rbench.llm.config import check_llm
    from rbench.retrievers.models import check_available

    described = {}
    for r in cfg.retrievers:
        retriever = described[str(r.label)] = r.build()
        for part in retriever.parts():
            check_defined_here("retriever", type(part), cfg.execution, retriever.loads_native())
        for leaf in retriever.leaves():
            model = leaf.model()
            if model is not None:
                check_available(model)
        for spec in retriever.rewrites():
            check_llm(spec.llm)
    for ds in cfg.datasets:
        check_defined_here("dataset adapter", type(get_adapter(ds.adapter)), cfg.execution)
    check_store(Path(cfg.store))
    check_tracking(cfg.tracking_uri(), cfg.mlflow.experiment)
    check_cluster(cfg.execution)
    return described


def check_defined_here(kind: str, cls: type, execution, native: bool = False) -> None:
    """A component class defined in a notebook or a script's ``__main__`` (``kind``: retriever,
    dataset adapter) is known to this process only: its stages must run here, not on a cluster's
    workers nor, when they load a native runtime (``native``), in stage processes. Raises
    ConfigError naming the setting, or packaging."""
    from rbench.core.identity import importable

    if importable(cls.__module__):
        return
    where = f"{kind} {cls.name!r} is defined in {cls.__module__} (a notebook or script), which only this process knows"
    if not execution.in_process():
        raise ConfigError(f"{where}, but execution.runner {execution.runner!r} runs stages on workers: use runner "
                          "threads or sequential here, or package the class (docs/extending.md) for a cluster")
    if native and execution.native_builds_apart():
        raise ConfigError(f"{where}, but its stages load a native runtime (native = True, itself or a component), so "
                          "they would run in stage processes: set execution.stage_processes: false, or package the "
                          "class (docs/extending.md)")


def check_cluster(execution, timeout: float = 5.0) -> None:
    """An existing Dask scheduler or Ray cluster (``execution.address``) answers on its port, so
    that a wrong address stops the run with the fix, not with a scheduler's traceback minutes in.
    Ray's ``auto`` and ``local`` are left to Ray."""
    import socket
    from urllib.parse import urlsplit

    address = execution.address
    if not address or address in ("auto", "local"):
        return
    parts = urlsplit(address if "://" in address else f"tcp://{address}")
    try:
        host, port = parts.hostname, parts.port
    except ValueError:
        host, port = None, None
    if not host or not port:
        raise ConfigError(f"execution.address {address!r} is not host:port (or tcp://host:port, ray://host:port): "
                          "give the scheduler's or cluster's address")
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError as e:
        raise ConfigError(f"the {execution.runner} cluster at {address} does not answer ({e.strerror or e}): start "
                          "it, or fix --address (execution.address), or leave the address out to start a local one") \
            from None


def check_store(store: Path) -> None:
    """The store can be written, with ``RBENCH_MIN_FREE_MB`` free."""
    import shutil
    import uuid

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


def experiment_for_flow(kind: str, config_path: str | None, experiment: ExperimentConfig | dict | None = None,
                        **overrides: str | None) -> tuple[ExperimentConfig, dict[str, Any]]:
    """The experiment a ``benchmark`` or ``embeddings`` flow runs, with the retrievers its checks
    built, by label (for the flow's plan to ask, as a door's plan asks them): the one its door opened
    (resolved and checked there; its plan is handed to the flow, so none here), else, given its own
    parameters (a deployed run, a direct call), resolved here from them and the worker's
    environment, and checked."""
    given = any(v is not None for v in overrides.values())
    cfg = None if given else reopened(kind, config_path, experiment)
    if cfg is not None:
        return cfg, {}
    cfg = resolve_experiment(config_path, experiment, **overrides)
    return cfg, preflight(cfg)


def check_grid(cfg) -> None:
    """A chunking grid's checks before any work: its model loads here, its store, its tracking server."""
    from rbench.retrievers.models import check_available

    check_available(cfg.model)
    check_store(Path(cfg.store))
    check_tracking(cfg.tracking_uri(), cfg.mlflow.experiment)


_OPENED: contextvars.ContextVar[tuple[str, str, Any] | None] = contextvars.ContextVar("rbench_opened", default=None)


@contextlib.contextmanager
def opened_config(kind: str, config_path: str | None, config: Any) -> Iterator[None]:
    """While the block runs, :func:`reopened` gives ``config`` (resolved and checked by a door)
    to the flow of ``kind`` that the block starts for ``config_path`` (None: a structured config,
    handed to the flow as its ``experiment``)."""
    token = _OPENED.set((kind, str(Path(config_path).resolve()) if config_path else None, config))
    try:
        yield
    finally:
        _OPENED.reset(token)


def reopened(kind: str, config_path: str | None, experiment: Any = None) -> Any | None:
    """The config the door opened for this flow (same kind, and the same file or an equal structured
    ``experiment``): the flow resolves and checks nothing again. None in a run no door opened (a
    deployed run: it resolves on the worker)."""
    opened = _OPENED.get()
    if opened is None or opened[0] != kind:
        return None
    if experiment is not None:
        return opened[2] if opened[1] is None and experiment == opened[2] else None
    if config_path is None or opened[1] != str(Path(config_path).resolve()):
        return None
    return opened[2]


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
        if e.code == 401 and "Authorization" in request.headers:
            user = split_credentials(uri)[1] or (os.environ.get("MLFLOW_TRACKING_USERNAME"), "")
            given = f"the user {user[0]!r}" if user[0] else "the token given (MLFLOW_TRACKING_TOKEN)"
            raise ConfigError(
                f"the MLflow server {bare} refuses {given} (401): the user name or password (or token) is wrong; "
                "fix MLFLOW_TRACKING_USERNAME / MLFLOW_TRACKING_PASSWORD (or the URI's, or MLFLOW_TRACKING_TOKEN) "
                "in the environment that runs rbench") from None
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
    """The experiment as the user wrote it (the file, as it was read when the run opened it), or
    the resolved config as YAML."""
    if config_path is not None and cfg.file_text is not None:
        return cfg.file_text
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
        opened = reopened("benchmark", params["config_path"])
        name = opened.name if opened is not None else _name_in(params["config_path"])
    current = flow_run.name or ""
    if re.fullmatch(rf"{re.escape(name)}-\d{{8}}-\d{{6}}", current):
        return current
    return f"{name}-{time.strftime('%Y%m%d-%H%M%S')}"


def _name_in(config_path: str) -> str:
    """The ``name`` of an experiment file (a deployed run's, read on its worker), else the file's stem."""
    try:
        raw = yaml.safe_load(Path(config_path).read_text(encoding="utf-8"))
        return raw.get("name", Path(config_path).stem) if isinstance(raw, dict) else "experiment"
    except (OSError, yaml.YAMLError):
        return Path(config_path).stem
