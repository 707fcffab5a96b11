"""Typed, frozen records of what crosses stages, flows and doors, as ranx types its ``Run`` and
``Qrels``: a dataset x retriever pair's finished result."""

from __future__ import annotations

from dataclasses import dataclass

from rbench.config import RetrieverConfig
from rbench.core.store import Artifact


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
