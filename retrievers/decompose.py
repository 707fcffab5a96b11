"""Query decomposition: the LLM splits the question into sub-queries, each searched with a
first-stage retriever, merged by RRF or round-robin, optionally rescored by a
reranker against the original question (the ARM paper's "dense + decomposition").

ARM's own computation (``src/retrieval/dense_decomp.py`` and ``dense_decomp_rerank.py``,
apostolhskouk/ARM@5a6cb92) is these settings: ``prompt: arm:decompose``, ``parse: lines``,
``dedupe: false``, ``rrf_ties: first_seen`` and, with a reranker, ``rerank_candidates: union``."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal, Mapping, Sequence

from pydantic import BaseModel, ConfigDict, Field, PositiveInt, StrictBool, StrictInt, model_validator

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
    """The most sub-queries kept from the answer (``parse: queries``)."""
    parse: Literal["queries", "lines"] = "queries"
    """How the answer is read: ``queries`` (bullets and numbering stripped; preambles, repeats and lines in
    another script dropped; at most ``max_queries``; none usable: the question) or ``lines`` (every line that
    is not blank, white space collapsed, repeats kept, no limit; none: no sub-query), ARM's reading
    (``src/utils/query_decomposition_vllm.py`` lines 207-212)."""
    max_tokens: PositiveInt = 128
    """The most tokens the LLM writes."""
    cap_to_context: StrictBool = False
    """Lower ``max_tokens`` per question to what the LLM's context leaves after the prompt: ARM's vLLM
    decomposer (``max_model_len=4096`` with ``max_tokens=4096``, ``query_decomposition_vllm.py`` lines 18,
    46, 52) stops each answer where the context ends."""
    include_question: StrictBool = True
    """Search the question itself beside its sub-queries (first)."""
    dedupe: StrictBool = True
    """Search each distinct query of a question once; ``false`` searches every one as given, so that a
    sub-query repeating the question adds its run to the merge twice, as ARM does
    (``[nlqs[i]] + sub_queries``, ``dense_decomp.py`` line 55, ``dense_decomp_rerank.py`` line 65)."""
    first_stage: RetrieverSpec = Field(default_factory=lambda: RetrieverSpec(name="dense"))
    """The retriever each sub-query searches."""
    per_query_k: PositiveInt | None = Field(None, description="hits per sub-query; default: k")
    merge: Literal["rrf", "round_robin"] = "rrf"
    """How the sub-queries' runs are merged: ``rrf`` (reciprocal rank fusion) or ``round_robin``."""
    rrf_k: float = Field(60, ge=0)
    """The RRF constant: a hit at rank r scores 1 / (rrf_k + r)."""
    rrf_ties: Literal["id", "first_seen"] = "id"
    """Equal RRF scores ordered by object id, or by where the object was first met (the question's run
    first, each run by rank), as ARM's stable ``sorted(..., reverse=True)`` leaves them
    (``dense_decomp.py`` lines 97-101)."""
    rerank: RerankerParams | None = None
    """A reranker that rescores the merged candidates; none: the merged order."""
    rerank_multiplier: PositiveInt = Field(3, description="with rerank: k x this merged candidates are rescored")
    rerank_candidates: Literal["merged", "union"] = "merged"
    """What the reranker rescores: ``merged``, the first k x ``rerank_multiplier`` of the merged run; or
    ``union``, every hit of every query's run (each k deep unless ``per_query_k``), once each, in the order
    first met: ARM's ``drr-d`` (``dense_decomp_rerank.py`` lines 80-105)."""

    @model_validator(mode="after")
    def _consistent(self) -> "DecomposeParams":
        if self.parse == "lines" and self.max_queries != type(self).model_fields["max_queries"].default:
            raise ValueError("max_queries applies to parse: queries; parse: lines keeps every line (remove one)")
        if self.cap_to_context and self.llm.context_tokens is None:
            raise ValueError("cap_to_context needs the LLM's context_tokens (ARM's decomposer: 4096): set it in the "
                             "LLM's settings")
        if self.rerank is None and self.rerank_candidates != "merged":
            raise ValueError("rerank_candidates needs a rerank model: add rerank, or remove rerank_candidates")
        return self


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
        kind = "decompose" if p.parse == "queries" else "decompose_lines"
        return [RewriteSpec.of(kind, p.llm, p.prompt, max_queries=p.max_queries,
                               sampling=Sampling(max_tokens=p.max_tokens, cap_to_context=p.cap_to_context))]

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
        asked = {}
        for q in queries:
            texts = ([queries[q]] if p.include_question else []) + list(rewritten[q].queries)
            asked[q] = list(dict.fromkeys(texts)) if p.dedupe else texts
        union = self._scorer is not None and p.rerank_candidates == "union"
        depth = k * p.rerank_multiplier if self._scorer and not union else k
        runs = search_many(self._first, asked, p.per_query_k or depth, self._rows)
        if union:
            candidates = {q: list(dict.fromkeys(oid for run in runs[q] for oid, _ in run)) for q in queries}
        else:
            merged = {q: merge(runs[q], p.merge, p.rrf_k, p.rrf_ties)[:depth] for q in queries}
            if self._scorer is None:
                return merged
            candidates = {q: [oid for oid, _ in hits] for q, hits in merged.items()}
        rescored = self._scorer.rescore({q: (queries[q], candidates[q]) for q in queries}, self._texts)
        return {q: hits[:k] for q, hits in rescored.items()}

    def stats(self) -> dict[str, Any]:
        return {**super().stats(), **(self._scorer.stats() if self._scorer else {})}
