"""Around an experiment's plan (:mod:`rbench.orchestration.plan`): the data phase before it
(:func:`check_data`), the warm-ups it names, and the flow's summary of what it ran."""

from __future__ import annotations

import errno
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

from rbench.config import ExperimentConfig
from rbench.core.errors import DamagedArtifact, DataError
from rbench.core.processes import build_call
from rbench.core.secrets import redact
from rbench.core.store import Artifact, Store
from rbench.orchestration.plan import ExperimentPlan, data_nodes, plan_experiment
from rbench.results import Failure, FlowSummary, MetricRow, PairResult, StageRow
from rbench.retrievers.base import Retriever
from rbench.tasks.download import DOWNLOAD, DownloadConfig, source_of, unreachable
from rbench.tasks.evaluate import read_aggregate
from rbench.tasks.prepare import PREPARE


def summarize_results(cfg: ExperimentConfig, results: Sequence[PairResult], report: Sequence[StageRow],
                      run_id: str | None, failures: Sequence[Failure] = ()) -> FlowSummary:
    """The flow's return value: MLflow run, metrics rows, the stage report and the failed pairs."""
    metrics = tuple(
        MetricRow(dataset=r.dataset, retriever=str(r.retriever.label), metric=row["metric"], k=row["k"],
                  value=row["value"], queries=row["queries"])
        for r in results
        for row in read_aggregate(r.evaluation)
    )
    return FlowSummary(tracking_uri=redact(cfg.tracking_uri()), metrics=metrics, stages=tuple(report),
                       failures=tuple(failures), mlflow_run_id=run_id)


def handed_on(cfg: ExperimentConfig, results: Sequence[PairResult],
              failures: Sequence[Failure]) -> tuple[list[PairResult], list[Failure]]:
    """The finished pairs whose evaluation and run pass a check of every byte against their manifests
    (:meth:`Store.verified`), and the failures with one more for each pair that does not
    (``DamagedArtifact``, naming the repair): what a run logs, summarizes and returns is never read
    from a damaged stored file, not even one a cache hit's check of its size and ends passed."""
    store, kept, failed = Store(cfg.store), [], list(failures)
    for result in results:
        try:
            for artifact in (result.evaluation, result.run):
                if artifact is not None:
                    store.verified(artifact)
        except DamagedArtifact as e:
            failed.append(Failure(dataset=result.dataset, retriever=str(result.retriever.label),
                                  error=f"DamagedArtifact: {e}"))
            continue
        kept.append(result)
    return kept, failed


@dataclass(frozen=True)
class CheckedData:
    """What :func:`check_data` did: ``built``, ``(stage, key)`` of what it built (for
    the plan's ``prebuilt``), and ``corpora``, the prepared corpus of each dataset, by dataset name."""

    built: frozenset[tuple[str, str]]
    corpora: dict[str, Artifact]


def check_data(cfg: ExperimentConfig) -> CheckedData:
    """The data phase, before any flow starts: check every file the experiment needs, then
    download and prepare every dataset, as plain functions: a bad line or field is one error
    before the Prefect server and the other stages, and the plan (:func:`planned`) keys the
    stages below from the prepared corpora. A file that must be fetched (its dataset's download
    not in the store yet) is asked for at its source first: one that is not there, or a source
    that does not answer, stops the run here with every such file named and where to put it in
    a mirror; a fetch that fails with a transient error is tried again by the download itself
    (:data:`rbench.tasks.download.RETRY_DELAYS`), here as in any flow: the data phase has no retry of its own."""
    store = Store(cfg.store)
    data, problems = [], []
    for ds in cfg.datasets:
        download, prepare = data_nodes(cfg, ds)
        files = download.config
        data.append((ds, download, prepare))
        if not _at_hand(files, cfg.mirror) and store.load(DOWNLOAD.name, str(download.key)) is None:
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
    for ds, download, prepare in data:
        try:
            raw = DOWNLOAD.run(store, [], download.config, key=download.key, mirror=cfg.mirror)
            try:
                prepared = PREPARE.run(store, [raw], ds, key=prepare.key,
                                       call=build_call(PREPARE, ds, cfg.execution.native_builds_apart()))
            except DataError:
                if raw.built and _at_hand(download.config, cfg.mirror):
                    store.discard(raw)  # a refused input leaves no copy in the store (a copy is cheap to make again)
                raise
        except OSError as e:
            raise DataError(f"dataset {ds.name!r}: {os_problem(e, store)}") from None
        built |= {(a.stage, a.key) for a in (raw, prepared) if a.built}
        corpora[ds.name] = prepared
    return CheckedData(frozenset(built), corpora)


def _at_hand(files: DownloadConfig, mirror: Path | None) -> bool:
    """Whether every file of a download is the user's own or in the mirror (nothing fetched from a network)."""
    return all(f.local is not None or f.in_mirror(mirror) is not None for f in files.all_files(mirror))


def planned(cfg: ExperimentConfig, described: Mapping[str, Retriever] | None = None) -> ExperimentPlan:
    """The experiment's plan, made after its data phase (:func:`check_data`): what a door makes
    before its flow, and a flow no door started (a deployed run) makes itself. ``described``: the
    retrievers the experiment's checks built, by label (see :func:`plan_experiment`)."""
    checked = check_data(cfg)
    return plan_experiment(cfg, checked.corpora, checked.built, described)


def torch_in_stage_threads(cfg: ExperimentConfig) -> bool:
    """Whether a stage of this experiment may import torch in a thread of this process: builds
    that load a model run in stage processes (``execution.stage_processes``, the default) or on
    a cluster's workers, else in the flow's threads."""
    return cfg.execution.in_process() and not cfg.execution.native_builds_apart()


def warm_up_index_builds(plan: ExperimentPlan) -> int:
    """Warm up (:meth:`~rbench.retrievers.base.Retriever.warm_up`) each index build the plan will
    make in this process (:meth:`ExperimentPlan.to_warm_up`): a Lucene worker's JVM starts while
    the flow's server does. Returns how many were warmed."""
    nodes = plan.to_warm_up(Store(plan.experiment.store))
    for node in nodes:
        node.warm.warm_up()
    return len(nodes)


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
