"""Query decomposition: the LLM splits the question into sub-queries, each searched with a
first-stage retriever, merged by RRF or round-robin, optionally rescored by a
reranker against the original question (the ARM paper's "dense + decomposition")."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal, Mapping, Sequence

from pydantic import BaseModel, ConfigDict, Field, PositiveInt, StrictBool, StrictInt

from rbench.llm.config import LLMConfig, Sampling
from rbench.llm.prompts import QuestionPrompt
from rbench.retrievers.base import RETRIEVERS, FirstStage, RetrieverSpec, Run
from rbench.retrievers.llm_common import LLMComposite, merge, search_many
from rbench.retrievers.rerankers import RerankerParams, make_scorer, reranker_identity


class DecomposeParams(BaseModel):
    """The LLM and prompt that decompose, how sub-query runs are merged, and an optional rerank."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    llm: LLMConfig
    """The LLM that writes the sub-queries."""
    prompt: QuestionPrompt = "decompose"
    """The decomposition prompt."""
    max_queries: StrictInt = Field(4, ge=1, le=16)
    """The most sub-queries kept from the answer."""
    max_tokens: PositiveInt = 128
    """The most tokens the LLM writes."""
    include_question: StrictBool = True
    """Search the question itself beside its sub-queries."""
    first_stage: RetrieverSpec = Field(default_factory=lambda: RetrieverSpec(name="dense"))
    """The retriever each sub-query searches."""
    per_query_k: PositiveInt | None = Field(None, description="hits per sub-query; default: k")
    merge: Literal["rrf", "round_robin"] = "rrf"
    """How the sub-queries' runs are merged: ``rrf`` (reciprocal rank fusion) or ``round_robin``."""
    rrf_k: float = Field(60, ge=0)
    """The RRF constant: a hit at rank r scores 1 / (rrf_k + r)."""
    rerank: RerankerParams | None = None
    """A reranker that rescores the merged candidates; none: the merged order."""
    rerank_multiplier: PositiveInt = Field(3, description="with rerank: k x this merged candidates are rescored")


@RETRIEVERS.register
class Decompose(FirstStage, LLMComposite):
    """LLM sub-queries -> first stage per sub-query -> merged run -> optional reranker."""

    name = "decompose"
    description = "LLM query decomposition; sub-queries searched by a first stage, merged (RRF/round-robin), " \
                  "optional rerank"
    conformance = {"": {"llm": "$SMOLLM2", "first_stage": {"name": "dense", "params": {"model": "static-64d"}}, "max_tokens": 48},
                   "rerank": {"llm": "$SMOLLM2", "first_stage": {"name": "dense", "params": {"model": "static-64d"}}, "max_tokens": 48,
                              "rerank": {"model": "$TINY_CROSS_ENCODER"}}}
    Params = DecomposeParams
    version = 2

    def __init__(self, params=None):
        super().__init__(params)
        self._scorer = make_scorer(self.params.rerank) if self.params.rerank else None

    def own_rewrites(self) -> list:
        from rbench.llm.rewrite import RewriteSpec

        p = self.params
        return [RewriteSpec.of("decompose", p.llm, p.prompt, max_queries=p.max_queries,
                               sampling=Sampling(max_tokens=p.max_tokens))]

    def model_identities(self) -> list[str]:
        own = [reranker_identity(self.params.rerank)] if self.params.rerank else []
        return [*super().model_identities(), *own]

    def open(self, folders: Sequence[Path], corpus: Path) -> None:
        super().open(folders, corpus)
        if self._scorer is not None:
            self._scorer.load()

    def search(self, queries: Mapping[str, str], k: int) -> Run:
        rewritten = self.rewritten(0, queries)
        p = self.params
        asked = {q: ([queries[q]] if p.include_question else []) + [s for s in rewritten[q].queries
                                                                    if s != queries[q] or not p.include_question]
                 for q in queries}
        depth = k * p.rerank_multiplier if self._scorer else k
        runs = search_many(self._first, asked, p.per_query_k or depth, self._rows)
        merged = {q: merge(runs[q], p.merge, p.rrf_k)[:depth] for q in queries}
        if self._scorer is None:
            return merged
        rescored = self._scorer.rescore({q: (queries[q], [oid for oid, _ in hits]) for q, hits in merged.items()},
                                        self._texts)
        return {q: hits[:k] for q, hits in rescored.items()}

    def stats(self) -> dict[str, Any]:
        return {**super().stats(), **(self._scorer.stats() if self._scorer else {})}
