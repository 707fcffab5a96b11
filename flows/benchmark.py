"""The benchmark flow: download -> prepare -> subsample -> (encode) -> index -> (rewrite)
-> retrieve -> evaluate -> MLflow, with independent work submitted concurrently."""

from __future__ import annotations

import pyarrow.parquet as pq
from prefect import flow, task
from prefect.futures import as_completed
from prefect.states import Failed

from rbench.config import ExperimentConfig
from rbench.core.errors import quiet_user_errors
from rbench.core.secrets import redact
from rbench.core.store import Store, canonical_json
from rbench.experiment import config_text, preflight, resolve_experiment, run_name
from rbench.tasks.attempts import bury_earlier_attempts
from rbench.tasks.download import DOWNLOAD, DownloadConfig
from rbench.tasks.evaluate import EVALUATE, read_aggregate
from rbench.tasks.index import ENCODE, INDEX, IndexConfig
from rbench.tasks.orchestration import Submitter, ended_by_termination, stage_task, task_runner
from rbench.tasks.pending import log_pending_for, save_pending
from rbench.tasks.prepare import PREPARE
from rbench.tasks.retrieve import RETRIEVE, RetrieveConfig
from rbench.tasks.rewrite import REWRITE
from rbench.tasks.subsample import SUBSAMPLE
from rbench.tasks.track import log_experiment, publish_run_link

download, prepare, subsample, encode, index, rewrite, retrieve, evaluate = map(
    stage_task, (DOWNLOAD, PREPARE, SUBSAMPLE, ENCODE, INDEX, REWRITE, RETRIEVE, EVALUATE)
)
log_to_mlflow = task(log_experiment, name="mlflow")


def _index_label(dataset: str, leaf) -> str:
    model = getattr(leaf.params, "model", None)
    return f"{dataset}/{leaf.name}" + (f":{model.rsplit('/', 1)[-1]}" if model else "")


def _unique(label: str, key: str, taken: dict[str, str]) -> str:
    """``label``, or ``label#2``, ``#3``... when another configuration (two LLMs serving one model,
    two indexes of one model) already has it, so that a failure is reported under its own name."""
    candidate, n = label, 1
    while taken.setdefault(candidate, key) != key:
        n += 1
        candidate = f"{label}#{n}"
    return candidate


def run_stages(cfg: ExperimentConfig) -> tuple[list[dict], list[dict], list[dict]]:
    """Submit every stage of every dataset x retriever; return (results, failures, stage report).

    Datasets run in parallel; each index that some retriever needs is built once per
    dataset (shared by fusion and rerank components); retrieval and evaluation start as
    soon as their inputs exist. A failing stage fails only the pairs that depend on it.
    Each result holds ``dataset``, ``retriever`` (its config) and the ``indexes``, ``run``
    and ``evaluation`` artifacts; each failure names the pair and the first error.
    """
    sub = Submitter(str(cfg.store), cfg.execution)
    prepared, queries = {}, {}
    for ds in cfg.datasets:
        raw = sub.submit(download, [], DownloadConfig.of(ds, cfg.mirror), ds.name, mirror=cfg.mirror)
        prepared[ds.name] = sub.submit(prepare, [raw], ds, ds.name)
        queries[ds.name] = sub.submit(subsample, [prepared[ds.name]], cfg.subsample, ds.name)
    dataset_of = {future: name for name, future in prepared.items()}
    pairs = []
    for future in as_completed(list(prepared.values())):
        name = dataset_of[future]
        corpus = sub.artifact(future)
        if corpus is None:
            pairs.extend((name, r, None, [], [], None, {name}) for r in cfg.retrievers)
            continue
        rows = pq.ParquetFile(corpus.file("corpus.parquet")).metadata.num_rows
        indexes: dict[str, tuple[object, set[str]]] = {}
        rewritten: dict[str, tuple[object, str]] = {}
        taken: dict[str, str] = {}
        for r in cfg.retrievers:
            retriever = r.build()
            label = f"{name}/{r.label}"
            built, needs = [], {name, label}
            for leaf, leaf_cfg in zip(retriever.leaves(), IndexConfig.all_of(r)):
                key = canonical_json(leaf_cfg)
                if key not in indexes:
                    index_label = _unique(_index_label(name, leaf), key, taken)
                    device = getattr(leaf.params, "device", None)
                    shards = leaf_cfg.shards(rows, cfg.execution.shard_size)
                    shard_labels = [f"{index_label}[{shard.start}:{shard.stop}]" for shard in shards]
                    encoded = [sub.submit(encode, [corpus], shard, shard_label, gpu=leaf.needs_gpu(), device=device)
                               for shard, shard_label in zip(shards, shard_labels)]
                    indexes[key] = (sub.submit(index, [corpus, *encoded], leaf_cfg, index_label,
                                               gpu=leaf.needs_gpu() and not shards), {index_label, *shard_labels})
                built.append(indexes[key][0])
                needs |= indexes[key][1]
            rewrites = []
            for spec in retriever.rewrites():
                key = canonical_json(spec.key_view())
                if key not in rewritten:
                    rewrite_label = _unique(f"{name}/{spec.kind}:{spec.llm.model.rsplit('/', 1)[-1]}", key, taken)
                    rewritten[key] = (sub.submit(rewrite, [queries[name]], spec, rewrite_label,
                                                 gpu=spec.llm.backend != "openai" and spec.llm.device != "cpu"),
                                          rewrite_label)
                rewrites.append(rewritten[key][0])
                needs.add(rewritten[key][1])
            run = sub.submit(retrieve, [corpus, queries[name], *built, *rewrites], RetrieveConfig.of(r, cfg.depth),
                             label, gpu=retriever.needs_gpu())
            scored = sub.submit(evaluate, [queries[name], run], cfg.metrics, label)
            pairs.append((name, r, run, built, rewrites, scored, needs))
    report = sub.report()
    results, failures = [], []
    for name, r, run, built, rewrites, scored, needs in pairs:
        evaluation = sub.artifact(scored) if scored is not None else None
        if evaluation is None:
            first = next((row for row in report if row["status"] == "failed" and row["label"] in needs), None)
            failures.append({"dataset": name, "retriever": r.label,
                             "error": f"{first['stage']}[{first['label']}]: {first['error']}" if first else "not run"})
            continue
        results.append({"dataset": name, "retriever": r, "indexes": [sub.artifact(b) for b in built],
                        "rewrites": [sub.artifact(w) for w in rewrites], "run": sub.artifact(run),
                        "evaluation": evaluation})
    return results, failures, report


def check_data(cfg: ExperimentConfig) -> set[tuple[str, str]]:
    """Download and prepare, as plain functions before any flow starts, every dataset whose files
    are at hand (the user's files, or the mirror): a bad line or field is one error before the
    Prefect server and the other stages, and the flow then finds these stages cached. Datasets
    that need the network are left to the flow and its retries. Returns ``(stage, key)`` of
    what was built here (the flow reports them as cached)."""
    store = Store(cfg.store)
    built = set()
    for ds in cfg.datasets:
        files = DownloadConfig.of(ds, cfg.mirror)
        if all(f.local is not None or (cfg.mirror is not None and (cfg.mirror / f.name).exists()) for f in files.files):
            raw = DOWNLOAD.run(store, [], files, mirror=cfg.mirror)
            prepared = PREPARE.run(store, [raw], ds)
            built |= {(a.stage, a.key) for a in (raw, prepared) if a.built}
    return built


@flow(name="rbench-stages")
def run_experiment(cfg: ExperimentConfig) -> dict:
    """The stages of one experiment under the task runner its ``execution`` section names."""
    results, failures, report = run_stages(cfg)
    return {"results": results, "failures": failures, "stages": report}


def run_with_runner(cfg: ExperimentConfig) -> tuple[list[dict], list[dict], list[dict]]:
    """Run :func:`run_experiment` as a subflow on the configured task runner."""
    Store(cfg.store).clean_temporaries()
    stages_only = cfg.model_copy(update={"mlflow": cfg.mlflow.model_copy(update={"tracking_uri": None})})
    out = run_experiment.with_options(task_runner=task_runner(cfg.execution), flow_run_name=f"{cfg.name}-stages")(
        stages_only)  # a flow run's parameters are stored by Prefect: no tracking credentials in them
    return out["results"], out["failures"], out["stages"]


def summarize_results(cfg: ExperimentConfig, results: list[dict], report: list[dict], run_id: str | None,
                      failures: list[dict] | None = None) -> dict:
    """The flow's return value: MLflow run, metrics rows, the stage report and the failed pairs."""
    metrics = [
        {"dataset": r["dataset"], "retriever": r["retriever"].label, **row}
        for r in results
        for row in read_aggregate(r["evaluation"])
    ]
    return {"mlflow_run_id": run_id, "tracking_uri": redact(cfg.tracking_uri()), "metrics": metrics, "stages": report,
            "failures": failures or []}


class PartialFailure(Exception):
    """The result of a flow run where some pairs (or the MLflow logging) failed: the message says
    which, ``summary`` holds what the flow returns otherwise (the metrics of the pairs that
    finished). An exception, so that Prefect can resolve the Failed state it is the data of."""

    def __init__(self, message: str, summary: dict | None = None):
        super().__init__(message)
        self.summary = summary or {}


def summary_of(state) -> dict:
    """The summary of a finished benchmark flow run, whether it completed or partly failed."""
    result = state.result(raise_on_failure=False)
    return result.summary if isinstance(result, PartialFailure) else result


def finish(cfg: ExperimentConfig, summary: dict):
    """The flow's final state: Completed with the summary, or Failed naming the failed pairs
    (and an MLflow logging failure: the metrics are in the store, the logging is kept for later)."""
    problems = []
    if summary["failures"]:
        names = "; ".join(f"{f['dataset']}/{f['retriever']} ({f['error']})" for f in summary["failures"])
        total = len(cfg.datasets) * len(cfg.retrievers)
        problems.append(f"{len(summary['failures'])} of {total} dataset x retriever pairs failed: {names}")
    if summary.get("mlflow_error"):
        problems.append(f"MLflow logging failed ({summary['mlflow_error']}); the metrics are in the store and "
                        f"the logging is kept in {summary['mlflow_pending']}: `rbench log` logs it, and so does the "
                        "next run that logs to this tracking URI")
    if not problems:
        return summary
    message = redact("; ".join(problems))
    return Failed(message=message, data=PartialFailure(message, summary))


@flow(name="rbench-benchmark", flow_run_name=run_name, log_prints=True)
def benchmark(config_path: str | None = None, experiment: ExperimentConfig | None = None,
              mirror: str | None = None, store: str | None = None, tracking_uri: str | None = None,
              runner: str | None = None, address: str | None = None):
    """Run every configured retriever on every configured dataset; return metrics and stage report.

    The experiment is a YAML path (``config_path``) or the structured ``experiment``. Mirror,
    store and tracking URI come from the parameters, else from the worker's environment
    (``RBENCH_MIRROR``, ``RBENCH_STORE``, ``MLFLOW_TRACKING_URI``) at run time, else the file.
    A retried run keeps its name and MLflow parent run; what its earlier attempt left unfinished
    is marked Crashed first.
    """
    quiet_user_errors()
    bury_earlier_attempts()
    cfg = resolve_experiment(config_path, experiment, mirror=mirror, store=store, tracking_uri=tracking_uri,
                             runner=runner, address=address)
    preflight(cfg)
    with ended_by_termination():
        results, failures, report = run_with_runner(cfg)
    if not results:  # no pair finished: nothing to log, the failures say it all
        return finish(cfg, summarize_results(cfg, results, report, None, failures))
    text = redact(config_text(cfg, config_path if experiment is None else None))
    logged = log_to_mlflow(cfg, results, report, text, failures=failures, reuse_parent=True, return_state=True)
    run_id = logged.result() if logged.is_completed() else None
    if run_id is not None:
        publish_run_link(cfg, run_id)
        log_pending_for(cfg)
    summary = summarize_results(cfg, results, report, run_id, failures)
    if run_id is None:
        summary["mlflow_error"] = redact(logged.message or "MLflow logging failed")
        summary["mlflow_pending"] = str(save_pending(cfg, results, report, text, failures, summary["mlflow_error"]))
    return finish(cfg, summary)
