"""Log an experiment to MLflow: one parent run per flow run, a child per dataset x retriever."""

from __future__ import annotations

import math
import os
import re
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Sequence

from rbench.config import ExperimentConfig
from rbench.core.locations import default_tracking_uri
from rbench.core.secrets import redact
from rbench.core.store import Artifact
from rbench.tasks.evaluate import read_aggregate


def metric_name(metric: str, k: int) -> str:
    """MLflow-safe metric key, e.g. ``recall_at_5``."""
    return f"{metric}_at_{k}"


def _flatten(prefix: str, value: Any) -> dict[str, Any]:
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for k, v in value.items():
            out.update(_flatten(f"{prefix}.{k}" if prefix else str(k), v))
        return out
    return {prefix: value}


def _experiment_id(mlflow, cfg: ExperimentConfig) -> str:
    existing = mlflow.get_experiment_by_name(cfg.mlflow.experiment)
    if existing is not None:
        return existing.experiment_id
    location = None
    if cfg.mlflow.tracking_uri is None:
        location = (cfg.store.resolve() / "mlflow-artifacts").as_uri()
    try:
        return mlflow.create_experiment(cfg.mlflow.experiment, artifact_location=location)
    except Exception:  # another process created it between our lookup and create
        existing = mlflow.get_experiment_by_name(cfg.mlflow.experiment)
        if existing is None:
            raise
        return existing.experiment_id


@contextmanager
def tracking(uri: str):
    """Point MLflow's fluent API at ``uri`` for the block. ``mlflow.set_tracking_uri`` also
    writes ``MLFLOW_TRACKING_URI`` into this process's environment, which rbench reads as the
    worker's setting: the previous value is restored on the way out."""
    import mlflow

    before = os.environ.get("MLFLOW_TRACKING_URI")
    mlflow.set_tracking_uri(uri)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("MLFLOW_TRACKING_URI", None)
        else:
            os.environ["MLFLOW_TRACKING_URI"] = before


def prepare_tracking(uri: str) -> None:
    """Make a local sqlite tracking database safe to open from many processes at once.

    MLflow creates and migrates a new database on first use; two processes doing that
    together corrupt it, and a kill in the middle leaves it unusable. So a missing
    database is created once, under a lease, in a separate process on a temporary file
    that is renamed into place only when its schema is complete.
    """
    if not uri.startswith("sqlite:///"):
        return
    path = Path(uri[len("sqlite:///"):])
    if path.exists():
        _check_sqlite(path)
        return
    import subprocess
    import sys

    from rbench.core.lease import Lease

    path.parent.mkdir(parents=True, exist_ok=True)
    with Lease(path.with_name(f".{path.name}.lease")):
        if path.exists():
            return
        for stale in path.parent.glob(f".{path.name}.*.tmp"):  # a creation killed midway
            stale.unlink(missing_ok=True)
        tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
        try:
            subprocess.run(
                [sys.executable, "-c", "import sys; from mlflow.tracking import MlflowClient; "
                 "MlflowClient(sys.argv[1]).search_experiments()", f"sqlite:///{tmp}"],
                check=True, capture_output=True, text=True,
            )
            tmp.replace(path)
        except subprocess.CalledProcessError as e:
            raise RuntimeError(f"could not create the MLflow database {path}: {e.stderr.strip().splitlines()[-1:]}")
        finally:
            tmp.unlink(missing_ok=True)


def _check_sqlite(path: Path) -> None:
    """A damaged tracking database is named with the way to recover, before anything is logged."""
    import sqlite3

    from rbench.core.errors import RbenchError

    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30) as db:
            status = db.execute("PRAGMA quick_check").fetchone()[0]
    except sqlite3.DatabaseError as e:
        status = str(e)
    if status != "ok":
        raise RbenchError(
            f"the MLflow database {path} is damaged ({status}). Move it aside (mv {path} {path}.damaged): "
            "the next run creates a new one, and rerunning an experiment (all stages cached) logs it again"
        )


def run_tags(cfg: ExperimentConfig, config_text: str) -> dict[str, str]:
    """Provenance tags: Prefect flow run, git commit, config digest, device, library versions."""
    import hashlib
    import platform
    import subprocess
    from importlib.metadata import PackageNotFoundError, version

    tags = {"rbench.config_sha256": hashlib.sha256(config_text.encode()).hexdigest(),
            "rbench.host": platform.node(), "rbench.python": platform.python_version()}
    try:
        from prefect.runtime import flow_run

        if flow_run.id:
            tags["prefect.flow_run_id"] = str(flow_run.id)
            tags["prefect.flow_run_name"] = str(flow_run.name)
            if flow_run.ui_url:
                tags["prefect.flow_run_url"] = str(flow_run.ui_url)
    except Exception:  # outside a flow run
        pass
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=Path(__file__).resolve().parents[1],
                                capture_output=True, text=True, timeout=10)
        if commit.returncode == 0:
            tags["git.commit"] = commit.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        pass
    for package in ("prefect", "mlflow", "torch", "faiss-cpu", "faiss-gpu-cu12", "sentence-transformers",
                    "pyserini", "bm25s", "transformers"):
        try:
            tags[f"version.{package}"] = version(package)
        except PackageNotFoundError:
            continue
    tags["rbench.device"] = _device_name()
    return tags


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


def stage_metrics(result: dict) -> dict[str, float]:
    """Every numeric stat the pair's stages reported, under the stage's name, with no allow-list:
    ``retrieve.<stat>``, ``rewrite.<stat>`` (``rewrite1.`` ... for further rewrites), ``index.<stat>``
    (``index1.`` ... for further indexes) and ``evaluate.<stat>``; nested stats join with dots, and
    characters MLflow refuses in a name become ``_``."""
    metrics: dict[str, float] = {}

    def add(prefix: str, info: Any) -> None:
        if isinstance(info, dict):
            for key, value in info.items():
                add(f"{prefix}.{_REFUSED.sub('_', str(key))}", value)
        elif isinstance(info, (int, float)) and not isinstance(info, bool) and math.isfinite(info):
            metrics[prefix] = float(info)

    if result.get("run") is not None:
        add("retrieve", result["run"].info)
    for i, rewrite in enumerate(result.get("rewrites") or []):
        add("rewrite" if i == 0 else f"rewrite{i}", rewrite.info)
    for i, index in enumerate(result.get("indexes") or []):
        add("index" if i == 0 else f"index{i}", index.info)
    if result.get("evaluation") is not None:
        add("evaluate", result["evaluation"].info)
    return metrics


def log_experiment(
    cfg: ExperimentConfig, results: Sequence[dict], report: Sequence[dict], config_text: str,
    extra_artifacts: Path | None = None, failures: Sequence[dict] = (),
) -> str:
    """Log params, metrics and artifacts; return the parent run id.

    ``results`` items hold ``dataset``, ``retriever`` (a RetrieverConfig) and
    ``evaluation`` (the evaluate stage's Artifact), and optionally ``run`` and ``indexes``;
    ``extra_artifacts`` is a folder logged to the parent run (reports, plots); ``failures``
    (pairs that did not finish) are logged to the parent run, which is then marked FAILED.
    """
    try:
        with tracking(cfg.tracking_uri()):
            return _log_experiment(cfg, results, report, config_text, extra_artifacts, failures)
    except Exception as e:  # MLflow errors quote the tracking URI: never let its password reach a log
        raise RuntimeError(f"MLflow logging to {redact(cfg.tracking_uri())} failed: {redact(str(e))}") from None


def _log_experiment(cfg, results, report, config_text, extra_artifacts, failures) -> str:
    import tempfile

    import mlflow

    from rbench.evaluation.plots import recall_curves

    prepare_tracking(cfg.tracking_uri())
    experiment_id = _experiment_id(mlflow, cfg)
    with mlflow.start_run(experiment_id=experiment_id, run_name=cfg.name) as parent:
        parent_id = parent.info.run_id
        mlflow.set_tags(run_tags(cfg, config_text))
        mlflow.log_params(
            {"experiment": cfg.name, "datasets": ",".join(d.name for d in cfg.datasets),
             "retrievers": ",".join(r.label for r in cfg.retrievers), "depth": cfg.depth,
             **_flatten("subsample", cfg.subsample.model_dump(mode="json")),
             **_flatten("metrics", cfg.metrics.model_dump(mode="json")),
             **_flatten("execution", cfg.execution.model_dump(mode="json"))}
        )
        mlflow.log_text(config_text, "experiment.yaml")
        mlflow.log_dict({"stages": list(report), "failures": list(failures)}, "stages.json")
        if extra_artifacts is not None:
            mlflow.log_artifacts(str(extra_artifacts), extra_artifacts.name)
        mlflow.log_metrics({
            "stages_ran": sum(1 for r in report if r["status"] == "ran"),
            "stages_cached": sum(1 for r in report if r["status"] == "cached"),
            "pairs_failed": len(failures),
        })
        rows = []
        for result in results:
            evaluation: Artifact = result["evaluation"]
            retriever = result["retriever"]
            dataset = next(d for d in cfg.datasets if d.name == result["dataset"])
            aggregate = read_aggregate(evaluation)
            rows.extend({"dataset": dataset.name, "retriever": retriever.label, **a} for a in aggregate)
            with mlflow.start_run(
                experiment_id=experiment_id, run_name=f"{dataset.name}/{retriever.label}",
                nested=True, parent_run_id=parent_id,
            ):
                mlflow.set_tags({"rbench.dataset": dataset.name, "rbench.retriever": retriever.label,
                                 "rbench.evaluate_key": evaluation.key})
                mlflow.log_params({
                    **_flatten("dataset", dataset.model_dump(mode="json")),
                    **_flatten("retriever", retriever.model_dump(mode="json")),
                    "depth": cfg.depth,
                })
                mlflow.log_metrics({metric_name(a["metric"], a["k"]): a["value"] for a in aggregate})
                mlflow.log_metrics(stage_metrics(result))
                for name in ("per_query.parquet", "aggregate.parquet", "run.trec"):
                    mlflow.log_artifact(str(evaluation.file(name)))
                run = result.get("run")
                if run is not None and run.file("traces.parquet").is_file():
                    mlflow.log_artifact(str(run.file("traces.parquet")))
        if rows:
            mlflow.log_table({k: [r[k] for r in rows] for k in rows[0]}, "aggregate.json")
            with tempfile.TemporaryDirectory() as tmp:
                for i, dataset in enumerate(sorted({r["dataset"] for r in rows})):
                    mlflow.log_artifact(str(recall_curves(rows, dataset, Path(tmp) / f"recall_at_k_{i}.png")), "plots")
        if failures:
            mlflow.set_tag("rbench.failed_pairs", "; ".join(f"{f['dataset']}/{f['retriever']}" for f in failures))
    if failures:
        mlflow.MlflowClient().set_terminated(parent_id, status="FAILED")
    return parent_id


def publish_run_link(cfg: ExperimentConfig, run_id: str | None) -> None:
    """A Prefect link artifact pointing at the MLflow run (shown on the flow run's page)."""
    if run_id is None:
        return
    from prefect.artifacts import create_link_artifact, create_markdown_artifact

    uri = cfg.tracking_uri()
    if uri.startswith(("http://", "https://")):
        from mlflow.tracking import MlflowClient

        experiment_id = MlflowClient(uri).get_run(run_id).info.experiment_id
        create_link_artifact(link=f"{uri.rstrip('/')}/#/experiments/{experiment_id}/runs/{run_id}",
                             link_text=f"MLflow run {run_id}", key="mlflow-run")
    else:
        create_markdown_artifact(markdown=f"MLflow run `{run_id}` at `{uri}`: `rbench show {run_id}`",
                                 key="mlflow-run")


def find_parent_run(client, experiment: str, run: str):
    """The parent run ``run`` (an id), or the newest finished parent run when ``run`` is 'latest'."""
    from rbench.core.errors import RbenchError

    if run != "latest":
        return client.get_run(run)
    exp = client.get_experiment_by_name(experiment)
    if exp is None:
        raise RbenchError(f"MLflow experiment {experiment!r} does not exist at {redact(client.tracking_uri)}: pass "
                          "--experiment, --store or --tracking-uri (or set RBENCH_STORE / MLFLOW_TRACKING_URI)")
    runs = client.search_runs(
        [exp.experiment_id], filter_string="attributes.status = 'FINISHED'", order_by=["attributes.start_time DESC"]
    )
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    if not parents:
        raise RbenchError(f"no finished run in MLflow experiment {experiment!r}")
    return parents[0]


def load_chunking_table(tracking_uri: str, run: str, experiment: str):
    """``(run, grid table text)`` of a chunking-grid run, or None when ``run`` is another kind."""
    import tempfile

    from mlflow.exceptions import MlflowException
    from mlflow.tracking import MlflowClient

    from rbench.core.errors import RbenchError

    client = MlflowClient(tracking_uri=tracking_uri)
    try:
        parent = find_parent_run(client, experiment, run)
    except MlflowException as e:
        raise RbenchError(f"cannot read run {run!r} from {tracking_uri}: {e.message}") from None
    if parent.data.tags.get("rbench.kind") != "chunking-grid":
        return None
    with tempfile.TemporaryDirectory() as tmp:
        path = client.download_artifacts(parent.info.run_id, parent.data.tags["rbench.grid_table"], tmp)
        return parent, Path(path).read_text(encoding="utf-8")


def _parents_and_children(client, tracking_uri: str, runs: Sequence[str], experiment: str):
    """Per run: the parent Run and its child runs as ``(child, dataset, retriever label)``;
    labels get the run name as prefix when several runs are read."""
    from mlflow.exceptions import MlflowException

    from rbench.core.errors import RbenchError

    for run in runs:
        try:
            parent = find_parent_run(client, experiment, run)
        except MlflowException as e:
            raise RbenchError(f"cannot read run {run!r} from {tracking_uri}: {e.message}") from None
        children = client.search_runs(
            [parent.info.experiment_id], filter_string=f"tags.mlflow.parentRunId = '{parent.info.run_id}'"
        )
        if not children:
            raise RbenchError(f"run {parent.info.run_id} has no child runs: is it an rbench parent run?")
        labelled = []
        for child in children:
            label = child.data.tags.get("rbench.retriever", child.info.run_name)
            labelled.append((child, child.data.tags.get("rbench.dataset", "?"),
                             f"{parent.info.run_name}:{label}" if len(runs) > 1 else label))
        yield parent, labelled


def load_results(tracking_uri: str, runs: Sequence[str], experiment: str = "rbench", per_query: bool = False):
    """Metrics rows (and per-query scores) of parent runs' child runs, read back from MLflow.

    Returns ``(parents, metrics, scores)``: the parent Run objects, rows of ``dataset``,
    ``retriever``, ``metric``, ``k``, ``value``, and ``scores[(dataset, retriever)][(metric,
    k, query_id)]`` when ``per_query`` (retriever labels get the run name as prefix when
    several runs are read).
    """
    import tempfile

    import pyarrow.parquet as pq
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=tracking_uri)
    parents, metrics, scores = [], [], {}
    for parent, children in _parents_and_children(client, tracking_uri, runs, experiment):
        parents.append(parent)
        for child, dataset, label in children:
            for key, value in child.data.metrics.items():
                metric, _, k = key.rpartition("_at_")
                if "." in key or not metric or not k.isdigit():
                    continue  # a stage's stat (retrieve.*, index.*, ...), not a metric@k
                metrics.append({"dataset": dataset, "retriever": label, "metric": metric, "k": int(k), "value": value})
            if per_query:
                with tempfile.TemporaryDirectory() as tmp:
                    path = client.download_artifacts(child.info.run_id, "per_query.parquet", tmp)
                    scores[(dataset, label)] = {
                        (r["metric"], r["k"], r["query_id"]): r["value"] for r in pq.read_table(path).to_pylist()
                    }
    return parents, metrics, scores


COST_KEYS = ("queries_per_second", "search_seconds", "llm_calls", "llm_calls_cached", "llm_completion_tokens",
             "pairs_scored")


def load_costs_and_traces(tracking_uri: str, runs: Sequence[str], experiment: str = "rbench",
                          traces_per_run: int = 3) -> tuple[list[dict], list[dict]]:
    """The cost side of runs' child runs: rows of ``dataset``, ``retriever``, ``name``,
    ``value`` (queries/s, LLM calls, per-step seconds of ``arm_*`` and ``react_*``), and up to
    ``traces_per_run`` agent traces per child run that kept them (``traces.parquet``)."""
    import json
    import tempfile

    import pyarrow.parquet as pq
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=tracking_uri)
    costs, traces = [], []
    for _, children in _parents_and_children(client, tracking_uri, runs, experiment):
        for child, dataset, label in children:
            stats = {key.removeprefix("retrieve."): value for key, value in child.data.metrics.items()
                     if key.startswith("retrieve.")}
            costs += [{"dataset": dataset, "retriever": label, "name": key, "value": value}
                      for key, value in sorted(stats.items())
                      if key in COST_KEYS or key.startswith(("arm_", "react_"))]
            if any(a.path == "traces.parquet" for a in client.list_artifacts(child.info.run_id)):
                with tempfile.TemporaryDirectory() as tmp:
                    rows = pq.read_table(client.download_artifacts(child.info.run_id, "traces.parquet", tmp)).to_pylist()
                traces += [{"dataset": dataset, "retriever": label, **json.loads(r["trace"])}
                           for r in rows[:traces_per_run]]
    return costs, traces


def log_chunking_grid(cfg, results: Sequence[dict], best: dict, out: Path, report: Sequence[dict]) -> str:
    """One MLflow run for a chunking grid: its settings, the best combination's means, the report folder."""
    import mlflow

    uri = cfg.mlflow.tracking_uri or default_tracking_uri(cfg.store)
    prepare_tracking(uri)
    with tracking(uri):
        return _log_chunking_grid(mlflow, cfg, results, best, out, report)


def _log_chunking_grid(mlflow, cfg, results, best, out, report) -> str:
    experiment = mlflow.get_experiment_by_name(cfg.mlflow.experiment)
    experiment_id = experiment.experiment_id if experiment else mlflow.create_experiment(
        cfg.mlflow.experiment,
        artifact_location=None if cfg.mlflow.tracking_uri else (cfg.store.resolve() / "mlflow-artifacts").as_uri())
    with mlflow.start_run(experiment_id=experiment_id, run_name=cfg.name) as run:
        mlflow.set_tags({"rbench.kind": "chunking-grid", "rbench.grid_table": f"{out.name}/grid.md"})
        mlflow.log_params({k: v for k, v in cfg.model_dump(mode="json").items() if k not in ("mlflow", "store", "mirror")})
        for metric, row in best.items():
            mlflow.log_metric(f"best_{metric}_mean", row["summary"][metric]["mean"])
            mlflow.set_tag(f"best_{metric}", f"size={row['chunk_size']} overlap={row['overlap']} n={row['n']}")
        mlflow.log_metric("stages_ran", sum(1 for r in report if r["status"] == "ran"))
        mlflow.log_artifacts(str(out), out.name)
    return run.info.run_id


def log_search(cfg: ExperimentConfig, search, trials: Sequence[dict], best: dict) -> str:
    """A parent run for a configuration search, a child run per trial, the history and its plot."""
    import mlflow

    prepare_tracking(cfg.tracking_uri())
    with tracking(cfg.tracking_uri()):
        return _log_search(mlflow, cfg, search, trials, best)


def _log_search(mlflow, cfg, search, trials, best) -> str:
    import csv
    import tempfile

    from rbench.evaluation.plots import _pyplot

    experiment_id = _experiment_id(mlflow, cfg)
    metric = f"{search.metric}_at_{search.k}"
    with mlflow.start_run(experiment_id=experiment_id, run_name=f"{cfg.name}-search") as parent:
        mlflow.log_params({"retriever": search.retriever, "strategy": search.strategy, "budget": search.budget,
                           "seed": search.seed, "metric": metric, "space": search.model_dump_json(include={"space"})})
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
            plt = _pyplot()
            fig, ax = plt.subplots(figsize=(5, 3.5))
            values = [t["value"] for t in trials]
            ax.plot(range(len(values)), values, "o", label="trial")
            ax.plot(range(len(values)), [max(values[: i + 1]) for i in range(len(values))], "-", label="best so far")
            ax.set(xlabel="trial", ylabel=metric, title=f"{search.strategy} search: {search.retriever}")
            ax.legend()
            fig.tight_layout()
            fig.savefig(Path(tmp) / "search_history.png", dpi=120)
            plt.close(fig)
            mlflow.log_artifacts(tmp, "search")
    return parent.info.run_id
