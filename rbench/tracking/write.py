"""Writing to MLflow: one parent run per flow run and a child per dataset x retriever (experiments),
one run per chunking grid, a parent and child runs per search; every path goes through
:func:`writing_to` and gets the same provenance tags. Reading is in ``read.py``, the sqlite
bootstrap in ``backend.py``."""

from __future__ import annotations

import logging
import math
import os
import re
import time
import uuid
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any, Sequence

from rbench.config import DatasetConfig, ExperimentConfig, RetrieverConfig
from rbench.core import settings
from rbench.core.configfile import flatten
from rbench.core.errors import TrackingError
from rbench.core.hashing import canonical_json
from rbench.core.secrets import redact, split_credentials
from rbench.core.session import current
from rbench.results import Failure, PairResult, StageRow
from rbench.tasks.evaluate import read_aggregate
from rbench.tracking.names import key_part
from rbench.tracking.backend import experiment_of_run, prepare_tracking, tracking
from rbench.tracking.digests import ARTIFACT_DIGESTS, digests_tag

log = logging.getLogger("rbench")


def metric_name(metric: str, k: int) -> str:
    """MLflow-safe metric key, e.g. ``recall_at_5``; a measure over the whole ranking (k 0,
    ``map`` and ``rprec``) is its name alone."""
    return f"{metric}_at_{k}" if k else metric


def parent_params(cfg: ExperimentConfig) -> dict[str, Any]:
    """The params an experiment's parent run logs: its names, depth, protocol and the settings of
    its sample, metrics and execution (what ``rbench compare`` checks a protocol against)."""
    return {"experiment": cfg.name, "datasets": ",".join(d.name for d in cfg.datasets),
            "retrievers": ",".join(r.label for r in cfg.retrievers), "depth": cfg.depth,
            "protocol": cfg.protocol, **flatten("subsample", cfg.subsample.model_dump(mode="json")),
            **flatten("metrics", cfg.metrics.model_dump(mode="json")),
            **flatten("execution", cfg.execution.model_dump(mode="json"))}


def child_params(cfg: ExperimentConfig, dataset: DatasetConfig, retriever: RetrieverConfig) -> dict[str, Any]:
    """The params a pair's child run logs: every resolved setting of its dataset and retriever, and the depth."""
    return {**flatten("dataset", dataset.model_dump(mode="json")),
            **flatten("retriever", retriever.model_dump(mode="json")), "depth": cfg.depth}


EXPERIMENT_KIND = {"mlflow.experimentKind": "custom_model_development"}
"""The experiment tag that makes MLflow 3's UI open an experiment on its runs table (a
model-development experiment), not on the GenAI overview of traces rbench never writes."""
CREATED_BY = "rbench.created_by"
"""The tag with one logging's token on every run it creates (duplicates of a retried create found by it)."""
EXPERIMENT_NAME = "rbench.experiment"
"""The tag with the experiment's ``name`` on its parent run, whose own name has the time it started
(:func:`parent_run_name`); reports label a run's systems by it (:func:`rbench.tracking.read.run_prefixes`)."""


def parent_run_name(name: str) -> str:
    """A parent run's name: its Prefect flow run's, ``<name>-YYYYMMDD-HHMMSS`` with the first attempt's
    start (:func:`rbench.experiment.run_name`), so that the runs of one file are told apart in MLflow's
    run list and charts (issue 81: every parent was named ``name``); outside such a flow run
    (``rbench log``), ``name`` with the time now."""
    from prefect.runtime import flow_run

    current_name = str(flow_run.name or "")
    if re.fullmatch(rf"{re.escape(name)}-\d{{8}}-\d{{6}}", current_name):
        return current_name
    return f"{name}-{time.strftime('%Y%m%d-%H%M%S')}"


def ensure_experiment(mlflow, name: str, store: Path, tracking_uri: str | None) -> str:
    """The id of MLflow experiment ``name``, created (with :data:`EXPERIMENT_KIND`) if it does
    not exist; an existing experiment without the kind tag gets it. A new experiment keeps its
    artifacts beside a local database (``mlflow-artifacts`` beside the store's own ``mlflow.db``,
    or beside a ``sqlite:///`` file named by ``tracking_uri``), never in MLflow's default
    ``./mlruns`` of whatever folder the command ran in; a tracking server keeps them where it
    is set up to."""
    existing = mlflow.get_experiment_by_name(name)
    if existing is None:
        database = store / "mlflow.db" if tracking_uri is None else \
            Path(tracking_uri[len("sqlite:///"):]) if tracking_uri.startswith("sqlite:///") else None
        location = None if database is None else (database.resolve().parent / "mlflow-artifacts").as_uri()
        try:
            return mlflow.create_experiment(name, artifact_location=location, tags=EXPERIMENT_KIND)
        except Exception:  # another process created it between our lookup and create
            existing = mlflow.get_experiment_by_name(name)
            if existing is None:
                raise
    if not existing.tags.get("mlflow.experimentKind"):
        mlflow.MlflowClient().set_experiment_tag(existing.experiment_id, *next(iter(EXPERIMENT_KIND.items())))
    return existing.experiment_id


@contextmanager
def writing_to(uri: str):
    """The one way rbench writes to MLflow, for every logging path: the sqlite bootstrap, the
    tracking URI for this block only, and a failure whose message never quotes a password
    (MLflow's own errors quote the URI)."""
    try:
        prepare_tracking(uri)
        with tracking(uri):
            yield
    except Exception as e:
        raise TrackingError(f"MLflow logging to {redact(uri)} failed: {redact(str(e))}") from None


def run_tags(config_text: str) -> dict[str, str]:
    """Provenance tags: Prefect flow run (its UI link built from ``PREFECT_UI_URL``), attempt, git
    commit (of the checkout, else ``RBENCH_GIT_COMMIT`` baked into an image) and whether the checkout
    had uncommitted changes (``git.dirty``), config digest,
    device, ``CUDA_VISIBLE_DEVICES``, library versions."""
    import hashlib
    import platform
    from importlib.metadata import PackageNotFoundError, version

    tags = {"rbench.config_sha256": hashlib.sha256(config_text.encode()).hexdigest(),
            "rbench.host": platform.node(), "rbench.python": platform.python_version()}
    from prefect.runtime import flow_run
    from prefect.settings import get_current_settings

    if flow_run.id:  # None outside a flow run
        tags["prefect.flow_run_id"] = str(flow_run.id)
        tags["rbench.attempt"] = str(flow_run.run_count)
        tags["prefect.flow_run_name"] = str(flow_run.name)
        if get_current_settings().ui_url:  # a temporary server has no UI: its link read "None/flow-runs/..."
            tags["prefect.flow_run_url"] = str(flow_run.ui_url)
    commit = git_commit()
    if commit:
        tags["git.commit"] = commit
        dirty = git_dirty()
        if dirty is not None:
            tags["git.dirty"] = str(dirty).lower()
    for package in ("prefect", "mlflow", "torch", "faiss-cpu", "faiss-gpu-cu12", "sentence-transformers",
                    "pyserini", "bm25s", "transformers"):
        try:
            tags[f"version.{package}"] = version(package)
        except PackageNotFoundError:
            continue
    tags["rbench.device"] = _device_name()
    tags["rbench.cuda_visible_devices"] = os.environ.get("CUDA_VISIBLE_DEVICES", "(all)")
    return tags


CHECKOUT = Path(__file__).resolve().parents[2]


def _git(folder: Path, *args: str) -> str | None:
    """The output of a git command in ``folder``; None when git or a checkout is missing."""
    import subprocess

    try:
        done = subprocess.run(["git", *args], cwd=folder, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def git_commit(folder: Path = CHECKOUT) -> str | None:
    """The commit of rbench's checkout, else ``RBENCH_GIT_COMMIT`` (baked into an image), else None."""
    head = _git(folder, "rev-parse", "HEAD")
    return head.strip() if head else settings.image_commit()


def git_dirty(folder: Path = CHECKOUT) -> bool | None:
    """Whether the checkout has changes its commit lacks (modified, staged or new files git does not
    ignore); None outside a checkout."""
    status = _git(folder, "status", "--porcelain")
    return None if status is None else bool(status.strip())


def _device_name() -> str:
    """The first GPU's name, else ``cpu``: from torch when a stage already loaded it, else from
    nvidia-smi (importing torch only for this tag costs seconds on a fully cached run)."""
    import shutil
    import subprocess
    import sys

    torch = sys.modules.get("torch")
    if torch is not None:
        return torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"
    if shutil.which("nvidia-smi") is None:
        return "cpu"
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return "cpu"
    names = out.stdout.strip().splitlines() if out.returncode == 0 else []
    return names[0].strip() if names else "cpu"


_REFUSED = re.compile(r"[^\w\-. /]")  # characters MLflow refuses in a metric name


def stage_metrics(result: PairResult) -> dict[str, float]:
    """Every numeric stat each of the pair's artifacts (:meth:`PairResult.artifacts`) reported, under
    its stage's name, with no allow-list of stages or stats: ``index.<stat>`` (``index1.`` ... for
    further indexes), ``rewrite.<stat>`` (``rewrite1.`` ...), ``retrieve.<stat>`` and ``evaluate.<stat>``
    (but its ``<metric>@<k>`` summary, logged once as ``<metric>_at_<k>``); nested stats join with dots,
    and characters MLflow refuses in a name become ``_``."""
    metrics: dict[str, float] = {}
    seen: dict[str, int] = {}

    def add(prefix: str, info: Any) -> None:
        if isinstance(info, dict):
            for key, value in info.items():
                add(f"{prefix}.{_REFUSED.sub('_', str(key))}", value)
        elif isinstance(info, (int, float)) and not isinstance(info, bool) and math.isfinite(info):
            metrics[prefix] = float(info)

    for artifact in result.artifacts():
        if artifact is None:
            continue
        n = seen[artifact.stage] = seen.get(artifact.stage, -1) + 1
        info = artifact.info
        if artifact is result.evaluation:  # its metric@k summary is logged once, as <metric>_at_<k>
            info = {k: v for k, v in info.items() if "@" not in str(k)}
        add(artifact.stage if n == 0 else f"{artifact.stage}{n}", info)
    return metrics


def headline_metrics(rows: Sequence[dict], headline: Sequence[str] = ("recall", "ndcg")) -> dict[str, float]:
    """The parent run's quality metrics, so that runs compare at parent level in MLflow's runs
    table: each system's ``headline`` measures (a name at every k, or ``name@k``, ``name@all``)
    as ``<dataset>.<system>.<metric>_at_<k>`` (the child runs hold every measure), names escaped
    reversibly (:func:`rbench.tracking.names.key_part`), so that two datasets never share a key."""
    return {".".join([key_part(r["dataset"]), key_part(r["retriever"]), metric_name(r["metric"], r["k"])]): r["value"]
            for r in rows
            if r["metric"] in headline or f"{r['metric']}@{r['k'] or 'all'}" in headline}


def warm_up() -> None:
    """Import what logging an experiment imports (MLflow's SQL store, matplotlib for its plots) in a
    background thread of the run's session (:mod:`rbench.core.session`), while the stages run: a
    cold run spent about 2 s on it after its last stage. :func:`log_experiment` waits for the
    session's warm-ups, so that no module is imported from two threads at once. Outside a run,
    logging imports them itself."""
    session = current()
    if session is not None:
        session.warm_up("rbench-warm-up", _import_for_logging)


def _import_for_logging() -> None:
    import mlflow.store.tracking.sqlalchemy_store  # noqa: F401

    from rbench.evaluation.report_plots import pyplot

    pyplot()


def log_experiment(
    cfg: ExperimentConfig, results: Sequence[PairResult], report: Sequence[StageRow], config_text: str,
    extra_artifacts: Path | None = None, failures: Sequence[Failure] = (), reuse_parent: bool = False,
) -> str:
    """Log params, metrics and artifacts of the finished pairs ``results``; return the parent run id.

    ``extra_artifacts`` is a folder logged to the parent run (reports, plots); ``failures``
    (pairs that did not finish) are logged to the parent run, which is then marked FAILED.
    With ``reuse_parent`` (the flow's own logging), a retried flow run logs into the parent run
    its earlier attempt logged; logging kept from another run (``rbench log``) never does.
    """
    session = current()
    if session is not None:
        session.wait_for_warm_ups()
    with writing_to(cfg.tracking_uri()):
        return _log_experiment(cfg, results, report, config_text, extra_artifacts, failures, reuse_parent)


def _log_experiment(cfg, results, report, config_text, extra_artifacts, failures, reuse_parent=False) -> str:
    import tempfile

    import mlflow

    from rbench.evaluation.report_plots import recall_curves
    from rbench.evaluation.runs import retag_trec

    experiment_id = ensure_experiment(mlflow, cfg.mlflow.experiment, cfg.store, cfg.mlflow.tracking_uri)
    tags = run_tags(config_text)
    earlier = _earlier_attempt(mlflow, experiment_id, tags) if reuse_parent else None
    children = _children(mlflow, experiment_id, earlier) if earlier else {}
    earlier_children = set(children.values())
    from mlflow.tracking.context.registry import resolve_tags

    client = mlflow.MlflowClient()  # runs are created here, to start when their stages did
    created = {CREATED_BY: uuid.uuid4().hex, **_process_tags()}
    parent_run = earlier or client.create_run(experiment_id, start_time=stage_span(report)[0],
                                              tags=resolve_tags(created),
                                              run_name=parent_run_name(cfg.name)).info.run_id
    close_abandoned_runs(client, experiment_id, parent_run, keep=earlier_children)
    with mlflow.start_run(run_id=parent_run) as parent:
        parent_id = parent.info.run_id
        mlflow.set_tags({**tags, GROUP: parent_id, EXPERIMENT_NAME: cfg.name})
        mlflow.log_params(parent_params(cfg))
        mlflow.log_text(config_text, "experiment.yaml")
        mlflow.log_dict({"stages": [asdict(r) for r in report], "failures": [asdict(f) for f in failures]},
                        "stages.json")
        if extra_artifacts is not None:
            mlflow.log_artifacts(str(extra_artifacts), extra_artifacts.name)
        mlflow.log_metrics({
            "stages_ran": sum(1 for r in report if r.status == "ran"),
            "stages_cached": sum(1 for r in report if r.status == "cached"),
            "pairs_failed": len(failures),
        })
        rows, used = [], set()
        for result in results:
            evaluation, retriever = result.evaluation, result.retriever
            dataset = next(d for d in cfg.datasets if d.name == result.dataset)
            aggregate = read_aggregate(evaluation)
            rows.extend({"dataset": dataset.name, "retriever": retriever.label, **a} for a in aggregate)
            child = f"{dataset.name}/{retriever.label}"  # the run's name, for display: the pair is its tags
            pair = {"rbench.dataset": dataset.name, "rbench.retriever": str(retriever.label)}
            span = stage_span(report, pair_keys(result))
            reused = children.pop((dataset.name, str(retriever.label)), None) or children.pop(child, None)
            child_id = reused or client.create_run(
                experiment_id, start_time=span[0],
                tags=resolve_tags({"mlflow.parentRunId": parent_id, **pair, **created}), run_name=child).info.run_id
            used.add(child_id)
            with mlflow.start_run(run_id=child_id, nested=True):
                mlflow.set_tags({GROUP: parent_id, **pair, "rbench.evaluate_key": evaluation.key})
                mlflow.log_params(child_params(cfg, dataset, retriever))
                mlflow.log_metrics({metric_name(a["metric"], a["k"]): a["value"] for a in aggregate})
                mlflow.log_metrics(stage_metrics(result))
                approximate = result.run.info.get("approximate") if result.run is not None else None
                if approximate:  # its measured recall is the metric retrieve.approximate.recall_of_exhaustive
                    mlflow.set_tag("rbench.approximate_index", f"{approximate['index']} ({approximate['setting']})")
                with tempfile.TemporaryDirectory() as tmp:
                    files = {name: evaluation.file(name) for name in ("per_query.parquet", "aggregate.parquet",
                                                                       "qrels.trec")}
                    text = evaluation.file("run.trec").read_text(encoding="utf-8")
                    files["run.trec"] = Path(tmp) / "run.trec"  # the system's own tag in the run file
                    files["run.trec"].write_text(retag_trec(text, retriever.label, f"{child} run.trec"),
                                                 encoding="utf-8")
                    run = result.run
                    if run is not None and run.file("traces.parquet").is_file():
                        files["traces.parquet"] = run.file("traces.parquet")
                    for path in files.values():
                        mlflow.log_artifact(str(path))
                    mlflow.set_tag(ARTIFACT_DIGESTS, digests_tag(files))  # each copy read back is checked
            if reused is None:  # its duration is its stages' time, not the logging's
                client.set_terminated(child_id, "FINISHED", end_time=span[1])
        if rows:
            mlflow.log_metrics(headline_metrics(rows, cfg.mlflow.headline))
            mlflow.log_table({k: [r[k] for r in rows] for k in rows[0]}, "aggregate.json")
            with tempfile.TemporaryDirectory() as tmp:
                for i, dataset in enumerate(sorted({r["dataset"] for r in rows})):
                    mlflow.log_artifact(str(recall_curves(rows, dataset, Path(tmp) / f"recall_at_k_{i}.png")), "plots")
        if failures:
            mlflow.set_tag("rbench.failed_pairs", "; ".join(f"{f.dataset}/{f.retriever}" for f in failures))
        elif earlier and "rbench.failed_pairs" in parent.data.tags:
            mlflow.MlflowClient().delete_tag(parent_id, "rbench.failed_pairs")
    if failures:
        mlflow.MlflowClient().set_terminated(parent_id, status="FAILED")
    _delete_duplicates(client, experiment_id, created[CREATED_BY], {parent_id, *earlier_children, *used})
    return parent_id


def _delete_duplicates(client, experiment_id: str, token: str, used: set[str]) -> list[str]:
    """Delete the runs this logging created (tagged ``CREATED_BY`` ``token``) that it did not log
    into: a create that reached the server and whose answer was lost (the server died) is sent again
    by MLflow's HTTP retries, and the first copy stayed RUNNING and empty beside the real parent
    (issue 81). Returns the runs deleted."""
    runs = client.search_runs([experiment_id], filter_string=f"tags.`{CREATED_BY}` = '{token}'", max_results=1000)
    deleted = [run.info.run_id for run in runs if run.info.run_id not in used]
    for run_id in deleted:
        client.delete_run(run_id)
        log.info("rbench: MLflow run %s was a second copy of a create that MLflow retried (the server's answer was "
                 "lost): deleted", run_id)
    return deleted


def _process_tags() -> dict[str, str]:
    """The host and process that create a run: the run is abandoned once that process is gone."""
    import platform

    return {"rbench.host": platform.node(), "rbench.pid": str(os.getpid())}


def close_abandoned_runs(client, experiment_id: str, replaced_by: str, keep: set[str] = frozenset()) -> list[str]:
    """Mark KILLED the RUNNING runs of ``experiment_id`` that a process of this host created and
    that is gone (killed while it logged), each tagged ``rbench.replaced_by``; ``replaced_by`` and
    ``keep`` (a retry's own runs) are left alone. Runs of other hosts cannot be told apart from live
    ones and stay. Returns the runs closed."""
    import platform

    from rbench.core.pids import alive

    closed = []
    runs = client.search_runs([experiment_id], filter_string=(
        f"attributes.status = 'RUNNING' and tags.`rbench.host` = '{platform.node()}'"), max_results=1000)
    for run in runs:
        pid = run.data.tags.get("rbench.pid", "")
        if run.info.run_id == replaced_by or run.info.run_id in keep or not pid.isdigit() or alive(int(pid)):
            continue
        client.set_tag(run.info.run_id, "rbench.replaced_by", replaced_by)
        client.set_terminated(run.info.run_id, status="KILLED")
        closed.append(run.info.run_id)
        log.info("rbench: MLflow run %s was left RUNNING by process %s, which is gone: marked KILLED, replaced by %s",
                 run.info.run_id, pid, replaced_by)
    return closed


def pair_keys(result: PairResult) -> set[str]:
    """The store keys of a dataset x retriever pair's artifacts (its indexes, rewrites, run, evaluation)."""
    return {a.key for a in result.artifacts() if a is not None}


def stage_span(report: Sequence[StageRow], keys: set[str] | None = None) -> tuple[int, int]:
    """``(start, end)`` in epoch milliseconds of the stages of ``report`` that ran (those with
    ``keys`` only, when given): from the earliest start (its end less its build seconds) to the
    latest end; ``(now, now)`` when none ran, so that MLflow's durations are the stages' times."""
    now = int(time.time() * 1000)
    ran = [(r.finished, r.seconds) for r in report if r.finished is not None and r.seconds is not None
           and (keys is None or r.key in keys)]
    if not ran:
        return now, now
    return int(min(end - seconds for end, seconds in ran) * 1000), int(max(end for end, _ in ran) * 1000)


def _earlier_attempt(mlflow, experiment_id: str, tags: dict[str, str]) -> str | None:
    """The parent run an earlier attempt of this Prefect flow run logged, with the same config: a
    retry logs into it (one parent per flow run), its attempt counted in ``rbench.attempt``."""
    flow_run_id = tags.get("prefect.flow_run_id")
    if flow_run_id is None:
        return None
    runs = mlflow.search_runs([experiment_id], output_format="list", filter_string=(
        f"tags.`prefect.flow_run_id` = '{flow_run_id}' and "
        f"tags.`rbench.config_sha256` = '{tags['rbench.config_sha256']}'"))
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    return parents[0].info.run_id if parents else None


def _children(mlflow, experiment_id: str, parent_id: str) -> dict[tuple[str, str] | str, str]:
    """An earlier attempt's child runs by pair, ``(dataset, retriever)`` from their tags (by run name,
    ``dataset/retriever``, for one whose tags were never set)."""
    runs = mlflow.search_runs([experiment_id], output_format="list",
                              filter_string=f"tags.`mlflow.parentRunId` = '{parent_id}'")
    children: dict[tuple[str, str] | str, str] = {}
    for r in runs:
        tags = r.data.tags
        pair = (tags["rbench.dataset"], tags["rbench.retriever"]) if "rbench.retriever" in tags else None
        children[pair or r.info.run_name] = r.info.run_id
    return children


GROUP = "rbench.group"
"""The tag an experiment's parent run and each of its child runs carry, holding the parent's id: MLflow's
search has no OR, so a filter on the parent's id alone hid its children."""


def group_filter(run_id: str) -> str:
    """The MLflow search filter that finds the parent run ``run_id`` and its child runs."""
    return f"tags.`{GROUP}` = '{run_id}'"


def run_link(tracking_uri: str, experiment_id: str, run_id: str | None = None) -> str:
    """The MLflow UI's runs table of an experiment, filtered to the run ``run_id`` and its children when given, at
    ``RBENCH_MLFLOW_PUBLIC_URL`` when set (the address a browser uses; the worker's tracking URI,
    e.g. ``http://mlflow:5000``, may resolve only inside the cluster). The link names MLflow 3's
    "Model training" view: 3.17's UI takes its view from the link's ``workflowType``, else from
    the browser's localStorage (``mlflow.workflowType``, default ``genai``), and never from the
    experiment's ``mlflow.experimentKind`` tag, so a bare experiment link opens on the GenAI
    overview (MLflow issue #24498; the selector's code is in ``mlflow/server/js``'s main bundle)."""
    from urllib.parse import urlencode

    public = settings.mlflow_public_url() or split_credentials(tracking_uri)[0]
    query = {"workflowType": "machine_learning"}
    if run_id is not None:
        query["searchFilter"] = group_filter(run_id)
    return f"{public.rstrip('/')}/#/experiments/{experiment_id}/runs?{urlencode(query)}"


def ui_hint(tracking_uri: str, run_id: str) -> str:
    """One line on where the MLflow UI shows the run: :func:`run_link` on the tracking server (or
    ``RBENCH_MLFLOW_PUBLIC_URL``), or, for a sqlite database, the ``mlflow ui`` command serving it
    and the link it then answers on. Empty when the run cannot be read."""
    from rbench.core.locations import command_of

    bare, _ = split_credentials(tracking_uri)
    if bare.startswith("sqlite:///"):
        experiment_id = experiment_of_run(Path(bare.removeprefix("sqlite:///")), run_id)
        if experiment_id is None:
            return ""
        if settings.mlflow_public_url():
            return f"MLflow UI: {run_link(bare, experiment_id, run_id)}"
        return (f"MLflow UI: {run_link('http://127.0.0.1:5000', experiment_id, run_id)} once "
                f"'{command_of('mlflow')} ui --backend-store-uri {bare}' serves it")
    if not bare.startswith(("http://", "https://")):
        return ""
    with tracking(tracking_uri):
        import mlflow
        from mlflow.exceptions import MlflowException

        try:
            experiment_id = mlflow.MlflowClient().get_run(run_id).info.experiment_id
        except (MlflowException, OSError):  # the run's results are printed already: the link is a courtesy
            return ""
    return f"MLflow UI: {run_link(bare, experiment_id, run_id)}"


def publish_run_link(cfg: ExperimentConfig, run_id: str | None) -> None:
    """A Prefect link artifact pointing at the MLflow run (shown on the flow run's page): :func:`run_link`."""
    if run_id is None:
        return
    from prefect.artifacts import create_link_artifact, create_markdown_artifact

    uri = cfg.tracking_uri()
    bare, _ = split_credentials(uri)
    if uri.startswith(("http://", "https://")):
        with tracking(uri):
            import mlflow

            experiment_id = mlflow.MlflowClient().get_run(run_id).info.experiment_id
        create_link_artifact(link=run_link(bare, experiment_id, run_id),
                             link_text=f"MLflow run {run_id}", key="mlflow-run")
    else:
        create_markdown_artifact(markdown=f"MLflow run `{run_id}` at `{bare}`: `rbench show {run_id}`",
                                 key="mlflow-run")


def log_chunking_grid(cfg, results: Sequence[dict], best: dict, out: Path, report: Sequence[StageRow]) -> str:
    """One MLflow run for a chunking grid: its settings, the best combination's means, the report folder."""
    import mlflow

    with writing_to(cfg.tracking_uri()):
        return _log_chunking_grid(mlflow, cfg, results, best, out, report)


def _log_chunking_grid(mlflow, cfg, results, best, out, report) -> str:
    with mlflow.start_run(experiment_id=ensure_experiment(mlflow, cfg.mlflow.experiment, cfg.store,
                                                      cfg.mlflow.tracking_uri),
                          run_name=parent_run_name(cfg.name)) as run:
        mlflow.set_tags({**run_tags(canonical_json(cfg.model_dump(mode="json"))), "rbench.kind": "chunking-grid",
                         EXPERIMENT_NAME: cfg.name,
                         "rbench.grid_table": f"{out.name}/grid.md"})
        mlflow.log_params({k: v for k, v in cfg.model_dump(mode="json").items()
                           if k not in ("mlflow", "store", "mirror")})
        for metric, row in best.items():
            mlflow.log_metric(f"best_{metric}_mean", row["summary"][metric]["mean"])
            mlflow.set_tag(f"best_{metric}", f"size={row['chunk_size']} overlap={row['overlap']} n={row['n']}")
        mlflow.log_metric("stages_ran", sum(1 for r in report if r.status == "ran"))
        mlflow.log_artifacts(str(out), out.name)
        files = {f"{out.name}/{path.relative_to(out).as_posix()}": path for path in sorted(out.rglob("*"))
                 if path.is_file()}
        mlflow.set_tag(ARTIFACT_DIGESTS, digests_tag(files))  # grid.md and grid.csv are read back
    return run.info.run_id


def log_search(cfg, search, trials: Sequence[dict], best: dict, *, subject: str, target: str,
               params: dict[str, Any], kind: str = "search") -> str:
    """A parent run for a search (``rbench search``'s over a retriever, or a chunking grid's over the
    chunker: ``kind``), a child run per trial, the history and its plot. ``subject`` names what is
    tuned, ``target`` the MLflow name of the measure maximised, ``params`` the parent's own params."""
    import mlflow

    with writing_to(cfg.tracking_uri()):
        return _log_search(mlflow, cfg, search, trials, best, subject, target, params, kind)


def _log_search(mlflow, cfg, search, trials, best, subject, metric, params, kind) -> str:
    import csv
    import tempfile

    from rbench.evaluation.report_plots import pyplot

    experiment_id = ensure_experiment(mlflow, cfg.mlflow.experiment, cfg.store, cfg.mlflow.tracking_uri)
    with mlflow.start_run(experiment_id=experiment_id, run_name=f"{cfg.name}-search") as parent:
        mlflow.set_tags({**run_tags(canonical_json({"experiment": cfg.model_dump(mode="json"),
                                                    "search": search.model_dump(mode="json")})),
                         "rbench.kind": kind})
        mlflow.log_params({**params, "strategy": search.strategy, "budget": search.budget, "seed": search.seed,
                           "metric": metric, "space": search.model_dump_json(include={"space"})})
        mlflow.log_metric(f"best_{metric}", best["value"])
        mlflow.log_dict({"best": best}, "best.json")
        for t in trials:
            with mlflow.start_run(experiment_id=experiment_id, run_name=f"trial-{t['trial']}", nested=True,
                                  parent_run_id=parent.info.run_id):
                mlflow.log_params(t["params"])
                mlflow.log_metrics({metric: t["value"], "stages_ran": t["stages_ran"]})
        with tempfile.TemporaryDirectory() as tmp:
            with open(Path(tmp) / "history.csv", "w", newline="") as f:
                writer = csv.writer(f)
                writer.writerow(["trial", *search.space, metric, "stages_ran"])
                writer.writerows([t["trial"], *(t["params"].get(n) for n in search.space), t["value"], t["stages_ran"]]
                                 for t in trials)
            plt = pyplot()
            fig, ax = plt.subplots(figsize=(5, 3.5))
            values = [t["value"] for t in trials]
            ax.plot(range(len(values)), values, "o", label="trial")
            ax.plot(range(len(values)), [max(values[: i + 1]) for i in range(len(values))], "-", label="best so far")
            ax.set(xlabel="trial", ylabel=metric, title=f"{search.strategy} search: {subject}")
            ax.legend()
            fig.tight_layout()
            fig.savefig(Path(tmp) / "search_history.png", dpi=120)
            plt.close(fig)
            mlflow.log_artifacts(tmp, "search")
    return parent.info.run_id
