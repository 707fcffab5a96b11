"""XRR2 (eXpand -> Retrieve -> Rerank -> Rerank, from BRIGHT): the LLM writes an answer-like
expansion; question + expansion search BM25 with query-term weighting (each repeated term
counts, the BRIGHT trick); the LLM picks the ``topk1`` most relevant of the top ``topk0``;
that short list is reranked ``rounds`` more times, each shown in a different order, and
ordered by mean rank. ``rounds: 0`` is the ``rr`` variant, the default 5 is ``rr2``."""

from __future__ import annotations

from typing import Mapping

from pydantic import BaseModel, ConfigDict, Field, PositiveInt, StrictInt

from rbench.llm.config import LLMConfig, Sampling
from rbench.llm.prompts import PassagesPrompt, QuestionPrompt
from rbench.retrievers.base import RETRIEVERS, FirstStage, RetrieverSpec, Run
from rbench.retrievers.llm_common import LLMComposite, ranked


def _weighted_bm25() -> RetrieverSpec:
    return RetrieverSpec(name="bm25s", params={"query_weighting": "tf"})


class XRR2Params(BaseModel):
    """Expansion, first stage and the two LLM reranking steps."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    llm: LLMConfig
    """The LLM that expands, selects and reranks."""
    expand_prompt: QuestionPrompt = "expand"
    """The prompt that writes an answer-like expansion of the question."""
    expansion_tokens: PositiveInt = 256
    """The most tokens of the expansion."""
    first_stage: RetrieverSpec = Field(default_factory=_weighted_bm25)
    """The retriever the question and its expansion search (default: bm25s counting repeated terms, BRIGHT's
    setting)."""
    topk0: PositiveInt = 100
    """Hits of the first stage shown to the LLM's selection."""
    topk1: PositiveInt = 10
    """How many the LLM selects, then reranks."""
    rounds: StrictInt = Field(5, ge=0, le=20)
    """Further reranks of the selection, each shown in another order, averaged by rank; 0: the ``rr`` variant, 5
    ``rr2``."""
    select_prompt: PassagesPrompt = "select_topk"
    """The selection prompt."""
    rerank_prompt: PassagesPrompt = "listwise_rerank"
    """The listwise rerank prompt."""
    passage_chars: PositiveInt = 300
    """Characters of each passage shown to the LLM."""
    max_tokens: PositiveInt = 160
    """The most tokens the LLM writes per answer."""


@RETRIEVERS.register
class XRR2(FirstStage, LLMComposite):
    """Expand -> BM25 -> LLM top-k selection -> averaged LLM reranks of the top k."""

    name = "xrr2"
    description = "LLM expansion -> weighted BM25 -> LLM picks topk1 of topk0 -> topk1 reranked N times, ranks averaged"
    conformance = {"": {"llm": "$SMOLLM2", "expansion_tokens": 32, "rounds": 1, "topk1": 2, "max_tokens": 16}}
    Params = XRR2Params
    version = 2

    def own_rewrites(self) -> list:
        from rbench.llm.rewrite import RewriteSpec

        p = self.params
        return [RewriteSpec.of("expand", p.llm, p.expand_prompt, sampling=Sampling(max_tokens=p.expansion_tokens))]

    def search(self, queries: Mapping[str, str], k: int) -> Run:
        from rbench.llm.listwise import averaged_reranks, select_top
        from rbench.llm.prompts import load_prompt

        p = self.params
        expanded = self.rewritten(0, queries)
        searched = {q: f"{queries[q]} {expanded[q].queries[0]}" if expanded[q].status != "fallback" else queries[q]
                    for q in queries}
        first = self._first.search(searched, max(k, p.topk0))
        self._rows.load_runs(first)
        llm, sampling = self.llm(p.llm), Sampling(max_tokens=p.max_tokens)
        candidates = {q: (queries[q], [oid for oid, _ in hits[:p.topk0]]) for q, hits in first.items()}
        picked = select_top(llm, load_prompt(p.select_prompt), sampling, candidates,
                            self._texts, p.topk1, p.passage_chars)
        top = {q: (queries[q], oids[:p.topk1]) for q, oids in picked.items()}
        if p.rounds:
            reranked = averaged_reranks(llm, load_prompt(p.rerank_prompt),
                                        sampling, top, self._texts, p.rounds, p.passage_chars)
        else:
            reranked = {q: oids for q, (_, oids) in top.items()}
        run = {}
        for q, hits in first.items():
            head = reranked[q] + [o for o in picked[q] if o not in set(reranked[q])]
            run[q] = ranked(head + [oid for oid, _ in hits if oid not in set(head)])[:k]
        return run
