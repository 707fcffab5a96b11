"""Two-stage retrieval: any first-stage retriever, then a reranker (:mod:`rbench.retrievers.rerankers`)
rescoring its candidates."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

from pydantic import Field, PositiveInt

from rbench.retrievers.base import RETRIEVERS, FirstStage, RetrieverSpec, Run
from rbench.retrievers.corpus import CorpusRows
from rbench.retrievers.rerankers import RerankerParams, make_scorer, reranker_identity


class RerankParams(RerankerParams):
    """Retrieve ``k * k_multiplier`` candidates with ``first_stage``, rescore with ``model``."""

    first_stage: RetrieverSpec = Field(default_factory=lambda: RetrieverSpec(name="dense"))
    """The retriever whose candidates are rescored."""
    k_multiplier: PositiveInt = 3
    """Candidates rescored per query: k times this."""


@RETRIEVERS.register
class Rerank(FirstStage):
    """Reranking of a first stage's hits by a cross-encoder or a causal-LM reranker (its ``family``)."""

    name = "rerank"
    description = "first stage (any retriever) + reranker (cross-encoder, mxbai-v2) rescoring k x k_multiplier candidates"
    conformance = {"": {"model": "$TINY_CROSS_ENCODER", "first_stage": {"name": "dense", "params": {"model": "static-64d"}}}}
    Params = RerankParams
    uses_model = True
    native = True

    def __init__(self, params=None):
        super().__init__(params)
        self._scorer = make_scorer(self.params)

    def model(self) -> str:
        return self.params.model

    def model_identities(self) -> list[str]:
        return [reranker_identity(self.params), *super().model_identities()]

    def open(self, folders: Sequence[Path], corpus: Path) -> None:
        super().open(folders, corpus)
        self._rows = CorpusRows(corpus, ["text"])
        self._texts = self._rows.view("text")
        self._scorer.load()

    def search(self, queries: Mapping[str, str], k: int) -> Run:
        candidates = self._first.search(queries, k * self.params.k_multiplier)
        self._rows.load_runs(candidates)
        run = self._scorer.rescore({q: (queries[q], [oid for oid, _ in hits]) for q, hits in candidates.items()},
                                   self._texts)
        return {q: hits[:k] for q, hits in run.items()}

    def stats(self) -> dict[str, Any]:
        return {**super().stats(), **self._scorer.stats()}
