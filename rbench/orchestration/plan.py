"""An experiment's plan: every stage it runs, as data, made once per run.

:func:`plan_experiment` walks the experiment's datasets x retrievers once and returns an
:class:`ExperimentPlan` of frozen :class:`PlanNode` s (stage, resolved config, store key, inputs,
label, GPU or not) and the :class:`PlannedPair` s they serve. Every consumer reads the plan: the
cached-run probe (:meth:`ExperimentPlan.cached`), the warm-ups (:meth:`ExperimentPlan.to_warm_up`),
the flow's submission (:func:`run_plan`), the outcome and ``rbench run --plan``
(:meth:`ExperimentPlan.lines`); no other code derives a stage's key. Keys follow the prepared
corpora's content, so a plan is made after the data phase
(:func:`rbench.orchestration.graph.check_data`); made before it (``--plan`` on an empty store), the
stages below a dataset that is not prepared yet have no key. PyTerrier builds its plan the same
way before running it (``pyterrier/_evaluation/_exec_tree.py``).
"""

from __future__ import annotations

import contextlib
import contextvars
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterator, Mapping, Sequence

import pyarrow.parquet as pq

from rbench.config import DatasetConfig, ExperimentConfig, RetrieverConfig
from rbench.core.hashing import canonical_json
from rbench.core.processes import loads_native
from rbench.core.store import Artifact, Stage, Store
from rbench.dataset_adapters.base import get_adapter
from rbench.retrievers.base import Retriever
from rbench.results import Failure, PairResult, StageRow
from rbench.tasks.download import DOWNLOAD, DownloadConfig
from rbench.tasks.evaluate import EVALUATE
from rbench.tasks.index import ENCODE, INDEX, IndexConfig
from rbench.tasks.prepare import PREPARE
from rbench.tasks.retrieve import RETRIEVE, RetrieveConfig
from rbench.tasks.rewrite import REWRITE
from rbench.tasks.subsample import SUBSAMPLE


@dataclass(frozen=True)
class PlanNode:
    """One stage of the plan: ``stage`` runs on the nodes ``inputs`` (positions in
    :attr:`ExperimentPlan.nodes`) with ``config``, its artifact stored under ``key`` (None while
    a dataset it reads is not prepared), reported under ``label``. ``gpu``: it asks for a GPU;
    ``options``: build options that never enter the key (a mirror folder, a device); ``native``:
    its build loads a native runtime (torch, FAISS, an LLM), answered from the retriever the plan
    built, so that no stage rebuilds one to ask (issue 80, item 1); ``warm``: the retriever whose
    :meth:`~rbench.retrievers.base.Retriever.warm_up` starts this index build's runtime early,
    where the build runs in this process; ``retriever``: the label of the retriever whose pair
    this node belongs to alone (retrieve, evaluate), None for what pairs share."""

    stage: Stage
    config: Any
    label: str
    key: str | None
    dataset: str
    inputs: tuple[int, ...] = ()
    gpu: bool = False
    options: tuple[tuple[str, Any], ...] = ()
    native: bool = False
    warm: Any = field(default=None, compare=False, repr=False)
    retriever: str | None = None

    def row(self, **fields: Any) -> StageRow:
        """This node's report row, with its pair's fields."""
        return StageRow(stage=self.stage.name, label=self.label, dataset=self.dataset, retriever=self.retriever,
                        **fields)


@dataclass(frozen=True)
class PlannedPair:
    """A dataset x retriever pair: the nodes it depends on (``needs``, in plan order: its failure
    names the first that failed), its ``indexes`` and ``rewrites`` (in the order the retriever
    reads them), its ``run`` and its ``evaluation``."""

    dataset: str
    retriever: RetrieverConfig
    needs: tuple[int, ...]
    indexes: tuple[int, ...]
    rewrites: tuple[int, ...]
    run: int
    evaluation: int


@dataclass(frozen=True)
class ExperimentPlan:
    """Every stage of an experiment, in an order where each node follows its inputs. ``prebuilt``:
    ``(stage, key)`` of what the data phase built before the flow (the flow reports them ``ran``)."""

    experiment: ExperimentConfig = field(compare=False, repr=False)
    nodes: tuple[PlanNode, ...]
    pairs: tuple[PlannedPair, ...]
    prebuilt: frozenset[tuple[str, str]] = frozenset()

    @property
    def complete(self) -> bool:
        """Whether every node has its key (every dataset was prepared when the plan was made)."""
        return all(node.key is not None for node in self.nodes)

    def serves(self, cfg: ExperimentConfig) -> bool:
        """Whether this plan is ``cfg``'s (its MLflow settings aside, which no stage reads)."""
        return cfg is self.experiment or _stages_view(cfg) == _stages_view(self.experiment)

    def in_store(self, store: Store) -> list[Artifact | None]:
        """Each node's artifact in ``store`` (intact and fresh, as a cache hit in the flow), or None."""
        return [store.load(node.stage.name, node.key) if node.key is not None else None for node in self.nodes]

    def cached(self, store: Store) -> tuple[list[PairResult], list[StageRow]] | None:
        """``(results, report)`` when every stage is in ``store`` (and passes its stage's check), else None."""
        from rbench.core.errors import RbenchError

        artifacts = []
        for node, artifact in zip(self.nodes, self.in_store(store)):
            if artifact is None:
                return None
            if node.stage.check is not None:
                try:
                    node.stage.check(artifact, node.config)
                except RbenchError:  # refused by a check: the flow reports it
                    return None
            artifacts.append(artifact)
        report = [n.row(key=n.key, status="cached", seconds=0.0) for n in self.nodes]
        return [self.result(pair, artifacts) for pair in self.pairs], report

    def result(self, pair: PlannedPair, artifacts: Sequence[Any]) -> PairResult:
        """The pair's result from its nodes' artifacts (by node position)."""
        return PairResult(pair.dataset, pair.retriever, artifacts[pair.evaluation], artifacts[pair.run],
                          tuple(artifacts[i] for i in pair.indexes), tuple(artifacts[i] for i in pair.rewrites))

    def to_warm_up(self, store: Store) -> list[PlanNode]:
        """The index builds this run will make in this process (not in the store), one per key."""
        keys: set[str] = set()
        out = []
        for node in self.nodes:
            if node.warm is not None and node.key is not None and node.key not in keys and \
                    store.load(node.stage.name, node.key) is None:
                keys.add(node.key)
                out.append(node)
        return out

    def lines(self, store: Store) -> list[str]:
        """The plan as ``rbench run --plan`` prints it: a line per stage (what it is, its key, whether
        the store holds it), then the totals and the runner."""
        artifacts = self.in_store(store)
        out = []
        for node, artifact in zip(self.nodes, artifacts):
            status = ("cached" if artifact is not None else "to run" if node.key
                      else "to run (keyed once its inputs are)")
            device = " gpu" if node.gpu else ""
            key = (node.key or "-")[:12]
            out.append(f"{node.stage.name:<9} {node.label:<40} {key:<12} {status}{device}")
        cached = sum(a is not None for a in artifacts)
        execution = self.experiment.execution
        apart = ", native builds in stage processes" if execution.native_builds_apart() else ""
        pairs = f"{len(self.pairs)} dataset x retriever pair{'s' * (len(self.pairs) != 1)}"
        out.append(f"{len(self.nodes)} stages: {cached} cached, {len(self.nodes) - cached} to run; {pairs}; "
                   f"runner {execution.runner}{apart}")
        return out


def _stages_view(cfg: ExperimentConfig) -> dict[str, Any]:
    return cfg.model_dump(mode="json", exclude={"mlflow"})


def data_nodes(cfg: ExperimentConfig, ds: DatasetConfig) -> tuple[PlanNode, PlanNode]:
    """The download and prepare nodes of dataset ``ds`` (their keys need no prepared data)."""
    files = DownloadConfig.of(ds, cfg.mirror)
    download_key = DOWNLOAD.key_of([], files)
    download = PlanNode(DOWNLOAD, files, ds.name, download_key, ds.name, options=(("mirror", cfg.mirror),))
    prepare = PlanNode(PREPARE, ds, ds.name, PREPARE.key_of([download_key], ds), ds.name,
                       native=loads_native(PREPARE, ds))
    return download, prepare


def prepared_in_store(cfg: ExperimentConfig) -> dict[str, Artifact]:
    """The prepared corpus of each dataset the store holds already, by dataset name."""
    store, out = Store(cfg.store), {}
    for ds in cfg.datasets:
        _, prepare = data_nodes(cfg, ds)
        artifact = store.load(PREPARE.name, prepare.key) if prepare.key is not None else None
        if artifact is not None:
            out[ds.name] = artifact
    return out


class _Planner:
    """Adds nodes in order, each index and rewrite once per dataset, and keys each from its inputs."""

    def __init__(self, cfg: ExperimentConfig, described: Mapping[str, Retriever] | None = None):
        self.cfg = cfg
        self.described = dict(described or {})
        self.nodes: list[PlanNode] = []
        self.artifacts: dict[int, Artifact] = {}
        self.shared: dict[tuple[str, str, str], tuple[int, tuple[int, ...]]] = {}
        self.taken: dict[str, dict[str, str]] = {}
        self.built: dict[str, Retriever] = {}

    def add(self, stage: Stage, config: Any, label: str, dataset: str, inputs: Sequence[int] = (),
            gpu: bool = False, options: Mapping[str, Any] | None = None, warm: Any = None,
            native: bool | None = None, retriever: str | None = None) -> int:
        """Add a node; ``native`` None: the stage's own answer for ``config`` (no retriever built)."""
        digests = [self.digest(i, stage) for i in inputs]
        known = [d for d in digests if d is not None]
        key = stage.key_of(known, config) if len(known) == len(digests) else None
        native = loads_native(stage, config) if native is None else native
        self.nodes.append(PlanNode(stage, config, label, key, dataset, tuple(inputs), gpu,
                                   tuple((options or {}).items()), native, warm, retriever))
        return len(self.nodes) - 1

    def add_node(self, node: PlanNode, artifact: Artifact | None = None) -> int:
        self.nodes.append(node)
        if artifact is not None:
            self.artifacts[len(self.nodes) - 1] = artifact
        return len(self.nodes) - 1

    def digest(self, i: int, consumer: Stage) -> str | None:
        """What ``consumer``'s key follows of node ``i``: the content of the part it reads, else the key."""
        part, node = consumer.part_of(self.nodes[i].stage.name), self.nodes[i]
        if part is None or node.key is None:
            return node.key
        artifact = self.artifacts.get(i)
        return artifact.digest(part) if artifact is not None else None

    def retriever(self, r: RetrieverConfig) -> Retriever:
        """The object that answers the plan's questions about ``r``: the one the experiment's checks
        built from the same settings, else one built here, once."""
        label = str(r.label)
        if label not in self.built:
            checked = self.described.get(label)
            if checked is None or checked.name != r.name or checked.params != r.typed_params():
                checked = r.build()
            self.built[label] = checked
        return self.built[label]

    def unique(self, dataset: str, label: str, key: str) -> str:
        """``label``, or ``label#2``, ``#3``... when another configuration of this dataset (two LLMs
        serving one model, two indexes of one model) already has it, so a failure is reported under its
        own name."""
        taken = self.taken.setdefault(dataset, {})
        candidate, n = label, 1
        while taken.setdefault(candidate, key) != key:
            n += 1
            candidate = f"{label}#{n}"
        return candidate

    def indexes(self, ds: DatasetConfig, r: RetrieverConfig, prepared: int, rows: int | None,
                ) -> tuple[list[int], set[int]]:
        """The index nodes the retriever searches (with their encode shards), and every node they add."""
        execution, instance = self.cfg.execution, self.retriever(r)
        built: list[int] = []
        needs: set[int] = set()
        for leaf, leaf_cfg in zip(instance.leaves(), IndexConfig.all_of(r, instance)):
            shared = (ds.name, "index", canonical_json(leaf_cfg))
            if shared not in self.shared:
                label = self.unique(ds.name, _index_label(ds.name, leaf), shared[2])
                device = getattr(leaf.params, "device", None)
                shards = leaf_cfg.shards(rows, execution.shard_size, leaf) if rows is not None else []
                encoded = [self.add(ENCODE, shard, f"{label}[{shard.start}:{shard.stop}]", ds.name, (prepared,),
                                    gpu=leaf.needs_gpu(), options={"device": device}) for shard in shards]
                warm = execution.in_process() and not shards and \
                    not (execution.native_builds_apart() and leaf.loads_native())
                index = self.add(INDEX, leaf_cfg, label, ds.name, (prepared, *encoded),
                                 gpu=leaf.needs_gpu() and not shards, warm=leaf if warm else None,
                                 native=leaf.loads_native())
                self.shared[shared] = (index, (*encoded, index))
            index, added = self.shared[shared]
            built.append(index)
            needs |= set(added)
        return built, needs

    def rewrites(self, ds: DatasetConfig, r: RetrieverConfig, queries: int) -> list[int]:
        """The LLM rewrite nodes of the queries the retriever reads."""
        out = []
        for spec in self.retriever(r).rewrites():
            shared = (ds.name, "rewrite", canonical_json(spec.key_view()))
            if shared not in self.shared:
                label = self.unique(ds.name, f"{ds.name}/{spec.kind}:{spec.llm.model.rsplit('/', 1)[-1]}", shared[2])
                gpu = spec.llm.backend != "openai" and spec.llm.device != "cpu"
                node = self.add(REWRITE, spec, label, ds.name, (queries,), gpu=gpu)
                self.shared[shared] = (node, (node,))
            out.append(self.shared[shared][0])
        return out


def _index_label(dataset: str, leaf: Retriever) -> str:
    model = leaf.model()
    return f"{dataset}/{leaf.name}" + (f":{model.rsplit('/', 1)[-1]}" if model else "")


def plan_experiment(cfg: ExperimentConfig, corpora: Mapping[str, Artifact] | None = None,
                    prebuilt: frozenset[tuple[str, str]] = frozenset(),
                    described: Mapping[str, Retriever] | None = None) -> ExperimentPlan:
    """The plan of every dataset x retriever of ``cfg``; ``corpora``: the prepared corpus of each
    dataset by name (default: those the store holds). Each retriever is built once here, unless
    ``described`` (by label) holds the one the experiment's checks built from the same settings
    (:func:`rbench.experiment.preflight`): that one is asked instead."""
    corpora = prepared_in_store(cfg) if corpora is None else corpora
    planner, data = _Planner(cfg, described), {}  # dataset -> its download, prepare and subsample nodes
    for ds in cfg.datasets:
        download, prepare = data_nodes(cfg, ds)
        first = planner.add_node(download)
        prepared = planner.add_node(replace(prepare, inputs=(first,)), corpora.get(ds.name))
        sample = cfg.subsample.for_dataset(get_adapter(ds.adapter or ds.name).every_query)
        data[ds.name] = (first, prepared, planner.add(SUBSAMPLE, sample, ds.name, ds.name, (prepared,)))
    pairs = []
    for ds in cfg.datasets:
        first, prepared, queries = data[ds.name]
        corpus = corpora.get(ds.name)
        rows = pq.ParquetFile(corpus.file("corpus.parquet")).metadata.num_rows if corpus is not None else None
        for r in cfg.retrievers:
            instance = planner.retriever(r)
            indexes, needs = planner.indexes(ds, r, prepared, rows)
            rewrites = planner.rewrites(ds, r, queries)
            label = f"{ds.name}/{r.label}"
            run = planner.add(RETRIEVE, RetrieveConfig.of(r, cfg.depth, instance), label, ds.name,
                              (prepared, queries, *indexes, *rewrites), gpu=instance.needs_gpu(),
                              native=instance.loads_native(), retriever=str(r.label))
            evaluation = planner.add(EVALUATE, cfg.metrics, label, ds.name, (queries, run), retriever=str(r.label))
            needs |= {first, prepared, queries, *rewrites, run, evaluation}
            pairs.append(PlannedPair(ds.name, r, tuple(sorted(needs)), tuple(indexes), tuple(rewrites), run,
                                     evaluation))
    return ExperimentPlan(cfg, tuple(planner.nodes), tuple(pairs), prebuilt)


def run_plan(plan: ExperimentPlan, sub: Any, while_waiting: Callable[[], None] | None = None,
             ) -> tuple[list[PairResult], list[Failure], list[StageRow]]:
    """Submit every node of a complete plan to ``sub`` (Prefect tasks), each once its inputs'
    handles exist; returns (results, failures, stage report) once every stage has ended.
    ``while_waiting`` is called once every stage is submitted, as the wait for them begins.

    A submitter has ``submit(stage, inputs, config, label, gpu=False, key=None, **options)``
    returning a handle, ``artifact(handle)`` (None when the stage failed) and ``report()`` (one
    row per submitted stage, in submission order)."""
    if not plan.complete:
        raise ValueError("a plan runs once every dataset is prepared (check_data before plan_experiment)")
    handles: list[Any] = []
    for node in plan.nodes:
        handles.append(sub.submit(node.stage, [handles[i] for i in node.inputs], node.config, node.label,
                                  gpu=node.gpu, key=node.key, native=node.native, **dict(node.options)))
    if while_waiting is not None:
        while_waiting()
    report = [replace(row, dataset=node.dataset, retriever=node.retriever)
              for row, node in zip(sub.report(), plan.nodes, strict=True)]
    artifacts = [sub.artifact(h) for h in handles]
    results: list[PairResult] = []
    failures: list[Failure] = []
    for pair in plan.pairs:
        if artifacts[pair.evaluation] is None:
            first = next((report[i] for i in pair.needs if report[i].status == "failed"), None)
            error = f"{first.stage}[{first.label}]: {first.error}" if first else "not run"
            failures.append(Failure(dataset=pair.dataset, retriever=str(pair.retriever.label), error=error))
            continue
        results.append(plan.result(pair, artifacts))
    return results, failures, report


_HANDED: contextvars.ContextVar[ExperimentPlan | None] = contextvars.ContextVar("rbench_plan", default=None)


@contextlib.contextmanager
def handed(plan: ExperimentPlan | None) -> Iterator[None]:
    """While the block runs, :func:`handed_plan` gives ``plan`` to the flow the block starts
    (a door made it; a flow hands it to its stages' subflow)."""
    token = _HANDED.set(plan)
    try:
        yield
    finally:
        _HANDED.reset(token)


def handed_plan(cfg: ExperimentConfig) -> ExperimentPlan | None:
    """The plan handed to this flow for ``cfg``, or None (a deployed run makes its own)."""
    plan = _HANDED.get()
    return plan if plan is not None and plan.serves(cfg) else None
