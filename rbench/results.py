"""Typed, frozen records of what crosses stages, flows and doors, as ranx types its ``Run`` and
``Qrels``: a dataset x retriever pair's finished result, and what each kind of flow returns."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from rbench.config import RetrieverConfig
from rbench.core.store import Artifact

Status = Literal["ran", "cached", "failed", "skipped"]
"""What a stage did."""


@dataclass(frozen=True)
class StageRow:
    """What one stage did: its ``status`` is ``ran``, ``cached``, ``failed`` or ``skipped``;
    ``seconds`` its build's (0 when cached, None when it did not finish); ``finished`` the epoch
    second a stage that ran was seen to end; ``summary`` its artifact's one-line summary (the
    progress line's; not in a flow's report), ``error`` why it failed or was skipped. ``dataset`` and
    ``retriever`` (its label) name the pair a retrieve or evaluate stage belongs to (``dataset`` alone
    for a dataset's stages and its shared indexes): the pair is the value, ``label`` only its display,
    since ``a/b`` x ``c`` and ``a`` x ``b/c`` both display ``a/b/c``."""

    stage: str
    label: str
    key: str | None
    status: Status
    seconds: float | None
    finished: float | None = None
    summary: str | None = None
    error: str | None = None
    dataset: str | None = None
    retriever: str | None = None


@dataclass(frozen=True)
class Failure:
    """A dataset x retriever pair that did not finish, and the first failed stage it depends on."""

    dataset: str
    retriever: str
    error: str


@dataclass(frozen=True)
class MetricRow:
    """One aggregated metric of a pair: the mean ``value`` of ``metric`` at ``k`` over ``queries``."""

    dataset: str
    retriever: str
    metric: str
    k: int
    value: float
    queries: int


@dataclass(frozen=True)
class PairResult:
    """One dataset x retriever pair that finished: its dataset's name, its retriever's config, and
    the artifacts its stages published: the evaluation (metrics, run file, qrels), the run (the
    retrieve stage's; None for a pair that retrieved nothing of its own), its indexes and its
    query rewrites, in the order the retriever uses them."""

    dataset: str
    retriever: RetrieverConfig
    evaluation: Artifact
    run: Artifact | None = None
    indexes: tuple[Artifact, ...] = ()
    rewrites: tuple[Artifact, ...] = ()

    @property
    def label(self) -> str:
        """``dataset/retriever label``, as stage rows and MLflow child runs name the pair."""
        return f"{self.dataset}/{self.retriever.label}"

    def artifacts(self) -> list[Artifact | None]:
        """Every artifact of the pair: indexes, rewrites, run, evaluation."""
        return [*self.indexes, *self.rewrites, self.run, self.evaluation]


@dataclass(frozen=True)
class StagesOutcome:
    """What the stages of an experiment returned (the ``rbench-stages`` subflow): the pairs that
    finished, the pairs that did not, and a row per stage, in submission order."""

    results: tuple[PairResult, ...]
    failures: tuple[Failure, ...]
    stages: tuple[StageRow, ...]


@dataclass(frozen=True)
class FlowSummary:
    """What a benchmark (or embeddings) flow returns, ``rbench run`` prints and :func:`rbench.run`
    reads: where MLflow has the results, the metric rows (:class:`MetricRow`), a row per stage
    (:class:`StageRow`), and the pairs that failed (:class:`Failure`).
    ``mlflow_error`` and ``mlflow_pending`` say that the MLflow logging failed and where it is kept;
    the embeddings flow adds its ``models`` table and ``report_folder``."""

    tracking_uri: str
    metrics: tuple[MetricRow, ...] = ()
    stages: tuple[StageRow, ...] = ()
    failures: tuple[Failure, ...] = ()
    mlflow_run_id: str | None = None
    mlflow_error: str | None = None
    mlflow_pending: str | None = None
    models: tuple[dict[str, Any], ...] = ()
    report_folder: str | None = None

    def stage_count(self, status: str) -> int:
        """How many stages ended with ``status`` (``ran``, ``cached``, ``failed``, ``skipped``)."""
        return sum(1 for s in self.stages if s.status == status)


@dataclass(frozen=True)
class SearchSummary:
    """What a search returns (``rbench search``, a chunking grid's ``search:`` section): the
    trials in order (``trial``, ``params``, ``value``, and for ``rbench search`` ``stages_ran``),
    the best of them, the stage rows (a chunking search's), and the MLflow run that logged them
    (``rbench search``'s; its tracking URI with any password masked)."""

    best: dict[str, Any]
    trials: tuple[dict[str, Any], ...]
    stages: tuple[StageRow, ...] = ()
    mlflow_run_id: str | None = None
    tracking_uri: str | None = None


@dataclass(frozen=True)
class GridSummary:
    """What a chunking grid returns: a row per (chunk size, overlap, N) with its ``summary`` of
    span-level measures and its ``per_question`` file, the best cell per measure, the folder of
    its table and figures, the stage rows and the MLflow run."""

    results: tuple[dict[str, Any], ...]
    best: dict[str, Any]
    report_folder: str
    stages: tuple[StageRow, ...] = ()
    mlflow_run_id: str | None = None
