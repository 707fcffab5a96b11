"""The stage graph of an experiment, whoever executes it.

:func:`submit_experiment` submits every stage of every dataset x retriever to a submitter:
the Prefect one (:class:`rbench.orchestration.runner.Submitter`, tasks on a task runner) or
:class:`CachedOnly`, which only looks stages up in the store, without Prefect, and stops
at the first stage that is not there. A submitter has ``submit(stage, inputs, config, label,
gpu=False, **options)`` returning a handle, ``as_completed(handles)``, ``artifact(handle)``
(None when the stage failed) and ``report()`` (one row per submitted stage).
"""

from __future__ import annotations

import errno
from typing import Any, Iterable, Sequence

import pyarrow.parquet as pq

from rbench.config import ExperimentConfig
from rbench.core.errors import DataError, RbenchError
from rbench.core.processes import build_call
from rbench.core.secrets import redact
from rbench.core.store import Artifact, Stage, Store, canonical_json
from rbench.tasks.download import DOWNLOAD, DownloadConfig, source_of, unreachable
from rbench.tasks.evaluate import EVALUATE, read_aggregate
from rbench.tasks.index import ENCODE, INDEX, IndexConfig
from rbench.tasks.prepare import PREPARE
from rbench.tasks.retrieve import RETRIEVE, RetrieveConfig
from rbench.tasks.rewrite import REWRITE
from rbench.tasks.subsample import SUBSAMPLE


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


def submit_experiment(cfg: ExperimentConfig, sub) -> tuple[list[dict], list[dict], list[dict]]:
    """Submit every stage of every dataset x retriever; return (results, failures, stage report).

    Datasets run in parallel; each index that some retriever needs is built once per
    dataset (shared by fusion and rerank components); retrieval and evaluation start as
    soon as their inputs exist. A failing stage fails only the pairs that depend on it.
    Each result holds ``dataset``, ``retriever`` (its config) and the ``indexes``, ``run``
    and ``evaluation`` artifacts; each failure names the pair and the first error.
    """
    prepared, queries = {}, {}
    for ds in cfg.datasets:
        raw = sub.submit(DOWNLOAD, [], DownloadConfig.of(ds, cfg.mirror), ds.name, mirror=cfg.mirror)
        prepared[ds.name] = sub.submit(PREPARE, [raw], ds, ds.name)
        queries[ds.name] = sub.submit(SUBSAMPLE, [prepared[ds.name]], cfg.subsample, ds.name)
    dataset_of = {id(handle): name for name, handle in prepared.items()}
    pairs = []
    for handle in sub.as_completed(list(prepared.values())):
        name = dataset_of[id(handle)]
        corpus = sub.artifact(handle)
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
                    encoded = [sub.submit(ENCODE, [corpus], shard, shard_label, gpu=leaf.needs_gpu(), device=device)
                               for shard, shard_label in zip(shards, shard_labels)]
                    indexes[key] = (sub.submit(INDEX, [corpus, *encoded], leaf_cfg, index_label,
                                               gpu=leaf.needs_gpu() and not shards), {index_label, *shard_labels})
                built.append(indexes[key][0])
                needs |= indexes[key][1]
            rewrites = []
            for spec in retriever.rewrites():
                key = canonical_json(spec.key_view())
                if key not in rewritten:
                    rewrite_label = _unique(f"{name}/{spec.kind}:{spec.llm.model.rsplit('/', 1)[-1]}", key, taken)
                    rewritten[key] = (sub.submit(REWRITE, [queries[name]], spec, rewrite_label,
                                                 gpu=spec.llm.backend != "openai" and spec.llm.device != "cpu"),
                                      rewrite_label)
                rewrites.append(rewritten[key][0])
                needs.add(rewritten[key][1])
            run = sub.submit(RETRIEVE, [corpus, queries[name], *built, *rewrites], RetrieveConfig.of(r, cfg.depth),
                             label, gpu=retriever.needs_gpu())
            scored = sub.submit(EVALUATE, [queries[name], run], cfg.metrics, label)
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


class NotCached(Exception):
    """A stage :class:`CachedOnly` did not find in the store (its label says which)."""


class CachedOnly:
    """A submitter that runs nothing: each stage's artifact is looked up in the store by its
    content key (sizes and fingerprints checked, and the stage's ``check`` run, as a cache hit
    in the flow is), and :class:`NotCached` is raised at the first one that is missing."""

    def __init__(self, store: Store):
        self.store = store
        self.rows: list[dict] = []

    def submit(self, stage: Stage, inputs: Sequence[Artifact], config: Any, label: str, gpu: bool = False,
               **options: Any) -> Artifact:
        """The stored artifact of ``stage`` on these inputs; raises :class:`NotCached`."""
        key = stage.key(inputs, config)
        artifact = self.store.load(stage.name, key)
        if artifact is None:
            raise NotCached(f"{stage.name}[{label}]")
        if stage.check is not None:
            stage.check(artifact, config)
        self.rows.append({"stage": stage.name, "label": label, "key": key, "status": "cached", "seconds": 0.0})
        return artifact

    def as_completed(self, handles: Iterable[Artifact]) -> Iterable[Artifact]:
        """The handles, in order (each is finished already)."""
        return iter(handles)

    def artifact(self, handle: Artifact) -> Artifact:
        """The artifact itself."""
        return handle

    def report(self) -> list[dict]:
        """One row per stage looked up, all ``cached``."""
        return list(self.rows)


def cached_experiment(cfg: ExperimentConfig) -> tuple[list[dict], list[dict]] | None:
    """``(results, report)`` when every stage of the experiment is in the store, else None."""
    try:
        results, failures, report = submit_experiment(cfg, CachedOnly(Store(cfg.store)))
    except (NotCached, RbenchError):  # missing, or refused by a check: the flow builds it or reports it
        return None
    return (results, report) if not failures else None


def check_data(cfg: ExperimentConfig) -> set[tuple[str, str]]:
    """Check every file the experiment needs before any flow starts, then download and prepare,
    as plain functions, every dataset whose files are at hand (the user's files, or the mirror):
    a bad line or field is one error before the Prefect server and the other stages, and the
    flow then finds these stages cached. A file that must be fetched (its dataset's download
    not in the store yet) is asked for at its source: one that is not there, or a source that
    does not answer, stops the run here with every such file named and where to put it in a
    mirror. Returns ``(stage, key)`` of what was built here (for
    :func:`rbench.orchestration.runner.built_for_the_flow`)."""
    store = Store(cfg.store)
    at_hand, problems = [], []
    for ds in cfg.datasets:
        files = DownloadConfig.of(ds, cfg.mirror)
        if all(f.local is not None or f.in_mirror(cfg.mirror) is not None for f in files.all_files(cfg.mirror)):
            at_hand.append((ds, files))
        elif store.load(DOWNLOAD.name, DOWNLOAD.key([], files)) is None:
            problems += [f"  dataset {ds.name!r}: {spec.name} from {source_of(spec)}: {why}"
                         for spec, why in unreachable(files, cfg.mirror)]
    if problems:
        raise DataError(f"{len(problems)} file(s) the run needs cannot be fetched now:\n" + "\n".join(problems) +
                        "\nWith the network, check the addresses above; without it, put each file under its name in "
                        "a mirror folder and pass --mirror DIR (or set RBENCH_MIRROR)")
    built = set()
    for ds, files in at_hand:
        try:
            raw = DOWNLOAD.run(store, [], files, mirror=cfg.mirror)
            prepared = PREPARE.run(store, [raw], ds, call=build_call(PREPARE, ds, cfg.execution.native_builds_apart()))
        except OSError as e:
            raise DataError(f"dataset {ds.name!r}: {os_problem(e, store)}") from None
        built |= {(a.stage, a.key) for a in (raw, prepared) if a.built}
    return built


def os_problem(error: OSError, store: Store) -> str:
    """What an operating-system error while reading a user's files or writing the store means,
    and how to fix it."""
    where = f" ({error.filename})" if error.filename else ""
    if error.errno == errno.ELOOP:
        return (f"a symbolic link loop{where}: the path leads back to itself; point the config at the real file "
                "(ls -l shows where each link points)")
    if error.errno in (errno.ENOSPC, errno.EDQUOT):
        return (f"the disk holding the store {store.root} is full{where}; nothing half-written is kept: free some "
                "space, or pass --store DIR on another disk, and run again")
    if error.errno in (errno.EACCES, errno.EPERM):
        return f"permission denied{where}: make the file readable and the store writable for this user"
    return f"{error.strerror or error}{where}"
