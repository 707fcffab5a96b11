"""Listwise LLM reranking after any first stage: a sliding window moved from the back of
the candidate list to the front (window 20, step 10, as rank_llm does), or top-k selection
from the whole list (as XRR2 does); the number of passes is configurable."""

from __future__ import annotations

from typing import Literal, Mapping

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PositiveInt,
    StrictInt,
    model_validator,
)

from rbench.llm.config import LLMConfig, Sampling
from rbench.llm.prompts import PassagesPrompt
from rbench.retrievers.base import RETRIEVERS, FirstStage, RetrieverSpec, Run
from rbench.retrievers.llm_common import LLMComposite, ranked


class LLMRerankParams(BaseModel):
    """The first stage, how many of its hits the LLM reorders, and how."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    llm: LLMConfig
    """The LLM that reorders."""
    first_stage: RetrieverSpec = Field(default_factory=lambda: RetrieverSpec(name="bm25"))
    """The retriever whose hits are reordered."""
    mode: Literal["sliding", "topk"] = "sliding"
    """``sliding``: a window moved from the back of the list to the front (as rank_llm does); ``topk``: the LLM picks
    ``select`` of the whole list (as XRR2 does)."""
    candidates: PositiveInt = 100
    """How many of the first stage's hits are reordered."""
    window: StrictInt = Field(20, ge=2)
    """``sliding``: passages shown at once."""
    step: PositiveInt = 10
    """``sliding``: how far the window moves; smaller than ``window``."""
    passes: PositiveInt = 1
    """How many times the whole list is reordered."""
    select: PositiveInt = Field(10, description="topk mode: how many the LLM picks")
    prompt: PassagesPrompt | None = Field(None, description="default: listwise_rerank (sliding) or select_topk (topk)")
    passage_chars: PositiveInt = 300
    """Characters of each passage shown to the LLM."""
    max_tokens: PositiveInt = 160
    """The most tokens the LLM writes per answer."""

    @model_validator(mode="after")
    def _check(self) -> "LLMRerankParams":
        if self.step >= self.window:
            raise ValueError(f"step {self.step} must be smaller than window {self.window} (windows must overlap)")
        if self.prompt is None:
            object.__setattr__(self, "prompt", "listwise_rerank" if self.mode == "sliding" else "select_topk")
        return self


@RETRIEVERS.register
class LLMRerank(FirstStage, LLMComposite):
    """First stage -> listwise LLM reordering of its top ``candidates``; the rest follow."""

    name = "llm_rerank"
    description = "listwise LLM reranking (sliding window or top-k selection) of any first stage"
    conformance = {"": {"llm": "$SMOLLM2", "first_stage": {"name": "dense", "params": {"model": "static-64d"}}, "window": 4, "step": 2,
                        "max_tokens": 24}}  # a dense first stage returns every object: a list of one asks nothing
    Params = LLMRerankParams
    version = 2

    def search(self, queries: Mapping[str, str], k: int) -> Run:
        from rbench.llm.listwise import select_top, sliding_window
        from rbench.llm.prompts import load_prompt

        p = self.params
        first = self._first.search(queries, max(k, p.candidates))
        self._rows.load_runs(first)
        candidates = {q: (queries[q], [oid for oid, _ in hits[:p.candidates]]) for q, hits in first.items()}
        llm, sampling = self.llm(p.llm), Sampling(max_tokens=p.max_tokens)
        if p.mode == "sliding":
            prompt = load_prompt(p.prompt)
            order = sliding_window(llm, prompt, sampling, candidates, self._texts, p.window, p.step, p.passes,
                                   p.passage_chars)
        else:
            prompt = load_prompt(p.prompt)
            order = candidates
            for _ in range(p.passes):
                reordered = select_top(llm, prompt, sampling, order, self._texts, p.select, p.passage_chars)
                order = {q: (queries[q], oids) for q, oids in reordered.items()}
            order = {q: oids for q, (_, oids) in order.items()}
        run = {}
        for q, hits in first.items():
            head = order.get(q, [])
            run[q] = ranked(head + [oid for oid, _ in hits if oid not in set(head)])[:k]
        return run
