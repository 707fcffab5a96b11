"""ReAct: the LLM alternates a Thought and an Action for at most ``max_iterations`` turns.
An action is ``Search[keywords]`` (the base retriever returns ``k_search`` objects, shown
to the LLM as the next observation) or ``Finish``. Each turn is constrained to
``Thought: ...`` then ``Action: Search[...]|Finish`` (vLLM structured outputs, a logits
processor with transformers, a checked retry with other servers) and parsed permissively.
Each observation is fitted to the LLM's context (:mod:`rbench.llm.budget`); a conversation
that has no room left for one stops (``context_full``). The result is every retrieved object
in order of first retrieval; each query's trace (thoughts, actions, observations, turns, why
it stopped) is kept with the run."""

from __future__ import annotations

import time
from collections import Counter
from typing import Any, Mapping

from pydantic import BaseModel, ConfigDict, Field, PositiveInt, StrictInt

from rbench.llm.config import LLMConfig
from rbench.llm.prompts import QuestionPrompt
from rbench.retrievers.base import RETRIEVERS, Retriever, RetrieverSpec, Run
from rbench.retrievers.llm_common import LLMComposite, ranked


def _bm25s() -> RetrieverSpec:
    return RetrieverSpec(name="bm25s")


class ReActParams(BaseModel):
    """The LLM, the base retriever its searches run on, and the loop's limits."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    llm: LLMConfig
    """The LLM that thinks and acts."""
    base: RetrieverSpec = Field(default_factory=_bm25s)
    """The retriever its ``Search[...]`` actions run on."""
    prompt: QuestionPrompt = "react"
    """The ReAct prompt."""
    max_iterations: StrictInt = Field(5, ge=1, le=30)
    """The most Thought/Action turns per question."""
    k_search: PositiveInt = 5
    """Objects each search returns to the LLM."""
    passage_chars: PositiveInt = 200
    """Characters of each object in an observation."""
    thought_chars: StrictInt = Field(200, ge=10, le=2000)
    """The most characters of a Thought (the constrained turn's limit)."""
    keyword_chars: StrictInt = Field(80, ge=5, le=500)
    """The most characters of a search's keywords."""
    max_tokens: PositiveInt = 96
    """The most tokens the LLM writes per turn."""


def turn_pattern(thought_chars: int, keyword_chars: int) -> str:
    """The regular expression one turn must match."""
    return rf"Thought: [^\n]{{1,{thought_chars}}}\nAction: (Search\[[^\]\n]{{1,{keyword_chars}}}\]|Finish)"


@RETRIEVERS.register
class ReAct(LLMComposite):
    """Thought / Search[...] | Finish turns over a base retriever; the union of what it found."""

    name = "react"
    description = "ReAct agent: Thought + Search[keywords] | Finish turns (constrained) over a base retriever"
    conformance = {"": {"llm": "$SMOLLM2", "max_iterations": 2, "k_search": 3, "max_tokens": 48, "thought_chars": 60}}
    Params = ReActParams

    def __init__(self, params=None):
        super().__init__(params)
        self._base = self.params.base.build()
        self._traces: list[dict] = []
        self._stops: Counter = Counter()
        self._turns = 0
        self._turn_seconds: Counter = Counter()
        self._queries = 0

    def components(self) -> list[Retriever]:
        return [self._base]

    def search(self, queries: Mapping[str, str], k: int) -> Run:
        from rbench.llm.budget import PromptTooLong, clip
        from rbench.llm.config import Sampling
        from rbench.llm.constrain import Constraint
        from rbench.llm.listwise import numbered
        from rbench.llm.parse import parse_action
        from rbench.llm.prompts import load_prompt

        p = self.params
        prompt = load_prompt(p.prompt)
        llm = self.llm(p.llm)
        sampling = Sampling(max_tokens=p.max_tokens, constraint=Constraint(
            kind="regex", pattern=turn_pattern(p.thought_chars, p.keyword_chars)))
        state = {q: {"messages": prompt.render(question=text, k_search=str(p.k_search)), "found": [], "turns": [],
                     "stop": None} for q, text in queries.items()}
        for turn in range(1, p.max_iterations + 1):
            active = [q for q, s in state.items() if s["stop"] is None]
            if not active:
                break
            started = time.perf_counter()
            with llm.accounting.step(f"react_turn{turn}"):
                answers = llm.chat_one([state[q]["messages"] for q in active], sampling)
            searches = {}
            for q, answer in zip(active, answers):
                parsed = parse_action(answer)
                llm.accounting.parsed(parsed.status)
                thought, action, keywords = parsed.items
                s = state[q]
                s["messages"] = [*s["messages"], ("assistant", answer.strip())]
                s["turns"].append({"thought": thought, "action": action, "keywords": keywords, "status": parsed.status})
                if action == "search":
                    searches[q] = keywords
                else:
                    s["stop"] = "finish" if action == "finish" else "malformed_action"
            run = self._base.search(searches, p.k_search) if searches else {}
            self._rows.load_runs(run)
            for q in searches:
                s, hits = state[q], [oid for oid, _ in run.get(q, [])]
                s["found"] += [oid for oid in hits if oid not in set(s["found"])]
                try:
                    s["messages"], shown = llm.fit(
                        lambda texts, history=s["messages"]: [
                            *history, ("user", f"Observation:\n{numbered(texts) or '(no results)'}")],
                        [clip(self._texts[oid], p.passage_chars) for oid in hits], sampling,
                        f"the ReAct prompt of query {q!r} at turn {turn + 1}")
                except PromptTooLong:
                    s["stop"], shown = "context_full", 0
                s["turns"][-1]["observation"] = hits[:shown]
            self._turn_seconds[turn] += time.perf_counter() - started
        out = {}
        for q, s in state.items():
            s["stop"] = s["stop"] or "max_iterations"
            self._stops[s["stop"]] += 1
            self._turns += len(s["turns"])
            self._queries += 1
            self._traces.append({"query_id": q, "question": queries[q], "turns": s["turns"], "stop": s["stop"],
                                 "found": len(s["found"])})
            out[q] = ranked(s["found"])[:k]
        return out

    def take_traces(self) -> list[dict]:
        traces, self._traces = self._traces, []
        return traces + super().take_traces()

    def stats(self) -> dict[str, Any]:
        out = super().stats()
        if self._queries:
            out["react_turns_mean"] = round(self._turns / self._queries, 3)
            out.update({f"react_seconds_turn{t}": round(sec, 3) for t, sec in sorted(self._turn_seconds.items())})
            out.update({f"react_stop_{reason}": n for reason, n in sorted(self._stops.items())})
        return out
