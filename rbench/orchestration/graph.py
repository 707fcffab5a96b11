"""The stage graph of an experiment, whoever executes it.

:class:`ExperimentGraph` submits every stage of every dataset x retriever to a submitter:
the Prefect one (:class:`rbench.orchestration.runner.Submitter`, tasks on a task runner) or
:class:`CachedOnly`, which only looks stages up in the store, without Prefect, and stops
at the first stage that is not there. A submitter has ``submit(stage, inputs, config, label,
gpu=False, **options)`` returning a handle, ``as_completed(handles)``, ``artifact(handle)``
(None when the stage failed) and ``report()`` (one row per submitted stage).
"""

from __future__ import annotations

import errno
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import pyarrow.parquet as pq

from rbench.config import ExperimentConfig
from rbench.core.errors import DataError
from rbench.core.hashing import canonical_json
from rbench.core.processes import build_call
from rbench.core.secrets import redact
from rbench.core.store import Artifact, Stage, Store
from rbench.dataset_adapters.base import get_adapter
from rbench.results import FlowSummary, PairResult
from rbench.tasks.download import DOWNLOAD, DownloadConfig, source_of, unreachable
from rbench.tasks.evaluate import EVALUATE, read_aggregate
from rbench.tasks.index import ENCODE, INDEX, IndexConfig
from rbench.tasks.prepare import PREPARE
from rbench.tasks.retrieve import RETRIEVE, RetrieveConfig
from rbench.tasks.rewrite import REWRITE
from rbench.tasks.subsample import SUBSAMPLE


def _index_label(dataset: str, leaf) -> str:
    model = leaf.model()
    return f"{dataset}/{leaf.name}" + (f":{model.rsplit('/', 1)[-1]}" if model else "")


def _pair_label(ds, r) -> str:
    return f"{ds.name}/{r.label}"


class ExperimentGraph:
    """The stages of one experiment, each submitted by a named step (:meth:`download`,
    :meth:`prepare`, :meth:`subsample`, :meth:`index`, :meth:`rewrite`, :meth:`retrieve`,
    :meth:`evaluate`) to a submitter, so that the caller's body reads as the pipeline: the
    benchmark flow (:func:`rbench.flows.benchmark_stages.experiment_stages`) and cached lookups alike.

    Each index some retriever needs is submitted once per dataset (shared by fusion and rerank
    components), as is each query rewrite; every step returns a handle, and :meth:`outcome`
    reports each dataset x retriever pair as a result (its ``indexes``, ``rewrites``, ``run`` and
    ``evaluation`` artifacts) or a failure naming the first failed stage it depends on.
    """

    def __init__(self, cfg: ExperimentConfig, sub):
        self.cfg, self.sub = cfg, sub
        self._prepared: dict[str, Any] = {}
        self._queries: dict[str, Any] = {}
        self._indexes: dict[tuple[str, str], tuple[Any, set[str]]] = {}
        self._rewritten: dict[tuple[str, str], tuple[Any, str]] = {}
        self._taken: dict[str, dict[str, str]] = {}
        self._needs: dict[tuple[str, str], set[str]] = {}
        self._pairs: list[tuple[str, Any, Any, list, list, Any]] = []
        self._built: dict[str, Any] = {}

    def download(self, ds) -> Any:
        """The dataset's files, from the mirror or the network."""
        return self.sub.submit(DOWNLOAD, [], DownloadConfig.of(ds, self.cfg.mirror), ds.name, mirror=self.cfg.mirror)

    def prepare(self, ds, raw) -> Any:
        """The corpus and queries in rbench's Parquet contract."""
        self._prepared[ds.name] = self.sub.submit(PREPARE, [raw], ds, ds.name)
        return self._prepared[ds.name]

    def subsample(self, ds, prepared) -> Any:
        """The queries the experiment asks."""
        sample = self.cfg.subsample.for_dataset(get_adapter(ds.adapter).every_query)
        self._queries[ds.name] = self.sub.submit(SUBSAMPLE, [prepared], sample, ds.name)
        return self._queries[ds.name]

    def prepared(self) -> Iterable[tuple[Any, Artifact]]:
        """``(dataset, corpus)`` as each dataset's prepare stage finishes; a dataset whose prepare
        failed fails its pairs and is not yielded."""
        dataset_of = {id(h): ds for ds in self.cfg.datasets for h in [self._prepared[ds.name]]}
        for handle in self.sub.as_completed(list(self._prepared.values())):
            ds = dataset_of[id(handle)]
            corpus = self.sub.artifact(handle)
            if corpus is None:
                self._pairs += [(ds.name, r, None, [], [], None) for r in self.cfg.retrievers]
                for r in self.cfg.retrievers:
                    self._needs[(ds.name, r.label)] = {ds.name}
                continue
            yield ds, corpus

    def index(self, ds, r, corpus: Artifact) -> list:
        """The indexes the retriever searches, each built once per dataset (encoded in shards first where
        its leaf encodes)."""
        rows = pq.ParquetFile(corpus.file("corpus.parquet")).metadata.num_rows
        needs = self._pair_needs(ds, r)
        built = []
        for leaf, leaf_cfg in zip(self._retriever(r).leaves(), IndexConfig.all_of(r)):
            key = (ds.name, canonical_json(leaf_cfg))
            if key not in self._indexes:
                label = self._unique(ds.name, _index_label(ds.name, leaf), key[1])
                device = getattr(leaf.params, "device", None)
                shards = leaf_cfg.shards(rows, self.cfg.execution.shard_size)
                shard_labels = [f"{label}[{shard.start}:{shard.stop}]" for shard in shards]
                encoded = [self.sub.submit(ENCODE, [corpus], shard, shard_label, gpu=leaf.needs_gpu(), device=device)
                           for shard, shard_label in zip(shards, shard_labels)]
                self._indexes[key] = (self.sub.submit(INDEX, [corpus, *encoded], leaf_cfg, label,
                                                      gpu=leaf.needs_gpu() and not shards), {label, *shard_labels})
            built.append(self._indexes[key][0])
            needs |= self._indexes[key][1]
        return built

    def rewrite(self, ds, r) -> list:
        """The LLM rewrites of the queries the retriever reads, each asked once per dataset."""
        needs = self._pair_needs(ds, r)
        rewrites = []
        for spec in self._retriever(r).rewrites():
            key = (ds.name, canonical_json(spec.key_view()))
            if key not in self._rewritten:
                label = self._unique(ds.name, f"{ds.name}/{spec.kind}:{spec.llm.model.rsplit('/', 1)[-1]}", key[1])
                self._rewritten[key] = (self.sub.submit(REWRITE, [self._queries[ds.name]], spec, label,
                                                        gpu=spec.llm.backend != "openai" and spec.llm.device != "cpu"),
                                        label)
            rewrites.append(self._rewritten[key][0])
            needs.add(self._rewritten[key][1])
        return rewrites

    def retrieve(self, ds, r, corpus: Artifact, indexes: list, rewrites: list) -> Any:
        """The retriever's run over the dataset's queries."""
        return self.sub.submit(RETRIEVE, [corpus, self._queries[ds.name], *indexes, *rewrites],
                               RetrieveConfig.of(r, self.cfg.depth), _pair_label(ds, r),
                               gpu=self._retriever(r).needs_gpu())

    def evaluate(self, ds, r, indexes: list, rewrites: list, run) -> Any:
        """The run's metrics, per query and aggregated; the pair is then complete."""
        scored = self.sub.submit(EVALUATE, [self._queries[ds.name], run], self.cfg.metrics, _pair_label(ds, r))
        self._pairs.append((ds.name, r, run, indexes, rewrites, scored))
        return scored

    def outcome(self, while_waiting: Callable[[], None] | None = None,
                ) -> tuple[list[PairResult], list[dict], list[dict]]:
        """(results, failures, stage report) once every submitted stage has ended; ``while_waiting``
        is called first, as the wait begins."""
        if while_waiting is not None:
            while_waiting()
        report = self.sub.report()
        results, failures = [], []
        for name, r, run, built, rewrites, scored in self._pairs:
            evaluation = self.sub.artifact(scored) if scored is not None else None
            if evaluation is None:
                needs = self._needs[(name, r.label)]
                first = next((row for row in report if row["status"] == "failed" and row["label"] in needs), None)
                error = f"{first['stage']}[{first['label']}]: {first['error']}" if first else "not run"
                failures.append({"dataset": name, "retriever": r.label, "error": error})
                continue
            results.append(PairResult(name, r, evaluation, self.sub.artifact(run),
                                      tuple(self.sub.artifact(b) for b in built),
                                      tuple(self.sub.artifact(w) for w in rewrites)))
        return results, failures, report

    def _pair_needs(self, ds, r) -> set[str]:
        """The labels of the stages a dataset x retriever pair depends on (its failure names the first)."""
        return self._needs.setdefault((ds.name, r.label), {ds.name, _pair_label(ds, r)})

    def _retriever(self, r):
        if r.label not in self._built:
            self._built[r.label] = r.build()
        return self._built[r.label]

    def _unique(self, dataset: str, label: str, key: str) -> str:
        """``label``, or ``label#2``, ``#3``... when another configuration of this dataset (two LLMs
        serving one model, two indexes of one model) already has it, so a failure is reported under its
        own name."""
        taken = self._taken.setdefault(dataset, {})
        candidate, n = label, 1
        while taken.setdefault(candidate, key) != key:
            n += 1
            candidate = f"{label}#{n}"
        return candidate


def summarize_results(cfg: ExperimentConfig, results: list[PairResult], report: list[dict], run_id: str | None,
                      failures: list[dict] | None = None) -> FlowSummary:
    """The flow's return value: MLflow run, metrics rows, the stage report and the failed pairs."""
    metrics = tuple(
        {"dataset": r.dataset, "retriever": r.retriever.label, **row}
        for r in results
        for row in read_aggregate(r.evaluation)
    )
    return FlowSummary(tracking_uri=redact(cfg.tracking_uri()), metrics=metrics, stages=tuple(report),
                       failures=tuple(failures or ()), mlflow_run_id=run_id)


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


@dataclass(frozen=True)
class CheckedData:
    """What :func:`check_data` did: ``built``, ``(stage, key)`` of what it built (for
    :func:`rbench.orchestration.runner.built_for_the_flow`), and ``corpora``, the prepared corpus
    of each dataset whose files were at hand, by dataset name."""

    built: frozenset[tuple[str, str]]
    corpora: dict[str, Artifact]


def check_data(cfg: ExperimentConfig) -> CheckedData:
    """Check every file the experiment needs before any flow starts, then download and prepare,
    as plain functions, every dataset whose files are at hand (the user's files, or the mirror):
    a bad line or field is one error before the Prefect server and the other stages, and the
    flow then finds these stages cached. A file that must be fetched (its dataset's download
    not in the store yet) is asked for at its source: one that is not there, or a source that
    does not answer, stops the run here with every such file named and where to put it in a
    mirror."""
    store = Store(cfg.store)
    at_hand, problems = [], []
    for ds in cfg.datasets:
        files = DownloadConfig.of(ds, cfg.mirror)
        if all(f.local is not None or f.in_mirror(cfg.mirror) is not None for f in files.all_files(cfg.mirror)):
            at_hand.append((ds, files))
        elif store.load(DOWNLOAD.name, DOWNLOAD.key([], files)) is None:
            problems += [f"  dataset {ds.name!r}: {spec.name} from {source_of(spec)}: {why}"
                         for spec, why in unreachable(files, cfg.mirror)]
    if problems and cfg.mirror is not None and not Path(cfg.mirror).is_dir():
        what = "is a file, not a folder" if Path(cfg.mirror).exists() else "does not exist"
        raise DataError(f"the mirror folder {cfg.mirror} {what} (--mirror, RBENCH_MIRROR or the config's mirror), "
                        f"and {len(problems)} file(s) the run needs are not at hand without it: pass the folder that "
                        "holds the datasets' files (such as ../shared/data), or drop the mirror to download them")
    if problems:
        raise DataError(f"{len(problems)} file(s) the run needs cannot be fetched now:\n" + "\n".join(problems) +
                        "\nWith the network, check the addresses above; without it, put each file under its name in "
                        "a mirror folder and pass --mirror DIR (or set RBENCH_MIRROR)")
    built, corpora = set(), {}
    for ds, files in at_hand:
        try:
            raw = DOWNLOAD.run(store, [], files, mirror=cfg.mirror)
            prepared = PREPARE.run(store, [raw], ds, call=build_call(PREPARE, ds, cfg.execution.native_builds_apart()))
        except OSError as e:
            raise DataError(f"dataset {ds.name!r}: {os_problem(e, store)}") from None
        built |= {(a.stage, a.key) for a in (raw, prepared) if a.built}
        corpora[ds.name] = prepared
    return CheckedData(frozenset(built), corpora)


def torch_in_stage_threads(cfg: ExperimentConfig) -> bool:
    """Whether a stage of this experiment may import torch in a thread of this process: builds
    that load a model run in stage processes (``execution.stage_processes``, the default) or on
    a cluster's workers, else in the flow's threads."""
    return cfg.execution.in_process() and not cfg.execution.native_builds_apart()


def warm_up_index_builds(cfg: ExperimentConfig, corpora: dict[str, Artifact]) -> int:
    """Warm up (:meth:`~rbench.retrievers.base.Retriever.warm_up`) each retriever whose index this
    run will build in this process, on the datasets of ``corpora`` (their prepared corpora, as
    :func:`check_data` prepares them before the flow): a Lucene worker's JVM starts while the
    flow's server does. Returns how many were warmed."""
    if not cfg.execution.in_process():
        return 0
    store, warmed = Store(cfg.store), set()
    for ds in cfg.datasets:
        corpus = corpora.get(ds.name)
        if corpus is None:
            continue
        rows = pq.ParquetFile(corpus.file("corpus.parquet")).metadata.num_rows
        for r in cfg.retrievers:
            for leaf, leaf_cfg in zip(r.build().leaves(), IndexConfig.all_of(r)):
                key = INDEX.key([corpus], leaf_cfg)
                apart = cfg.execution.native_builds_apart() and leaf.loads_native()
                if key in warmed or apart or leaf_cfg.shards(rows, cfg.execution.shard_size) or \
                        store.load(INDEX.name, key) is not None:
                    continue
                leaf.warm_up()
                warmed.add(key)
    return len(warmed)


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
