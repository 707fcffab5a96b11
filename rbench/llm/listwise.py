"""Listwise LLM reranking: a sliding window moved from the back of the list to the front
(each window's order from one call), and top-k selection from the whole list. Queries are
processed side by side, so each step is one batch of calls."""

from __future__ import annotations

import random
from typing import Mapping, Sequence

from rbench.llm.budget import clip
from rbench.llm.client import LLM
from rbench.llm.config import Sampling
from rbench.llm.parse import parse_ranking, parse_selection
from rbench.llm.prompts import Prompt

Candidates = Mapping[str, tuple[str, Sequence[str]]]  # query id -> (question, object ids best first)


def numbered(texts: Sequence[str]) -> str:
    """Passages as ``[1] text`` lines."""
    return "\n".join(f"[{i}] {t}" for i, t in enumerate(texts, 1))


def window_spans(count: int, window: int, step: int) -> list[tuple[int, int]]:
    """``(start, stop)`` of each window, from the back of the list to the front."""
    spans, stop = [], count
    while True:
        start = max(0, stop - window)
        spans.append((start, stop))
        if start == 0:
            return spans
        stop -= step


def sliding_window(llm: LLM, prompt: Prompt, sampling: Sampling, candidates: Candidates,
                   texts: Mapping[str, str], window: int, step: int, passes: int, chars: int) -> dict[str, list[str]]:
    """Reorder each query's candidates by ``passes`` back-to-front sweeps of ``window``. A
    window's passages are cut to ``chars``, and fitted to the LLM's context: passages it
    leaves out stay, in their order, below the ones it reorders."""
    order = {q: list(oids) for q, (_, oids) in candidates.items()}
    for _ in range(passes):
        spans = {q: window_spans(len(o), window, step) for q, o in order.items() if len(o) > 1}
        for w in range(max((len(s) for s in spans.values()), default=0)):
            batch = [(q, s[w]) for q, s in spans.items() if w < len(s)]
            fitted = [llm.fit(lambda shown, q=q: prompt.render(question=candidates[q][0], count=str(len(shown)),
                                                                passages=numbered(shown)),
                              [clip(texts[o], chars) for o in order[q][a:b]], sampling,
                              f"the listwise prompt of query {q!r}") for q, (a, b) in batch]
            asked = [(q, span, shown) for (q, span), (_, shown) in zip(batch, fitted) if shown > 1]
            answers = llm.chat_one([messages for messages, shown in fitted if shown > 1], sampling)
            for (q, (a, b), shown), answer in zip(asked, answers):
                parsed = parse_ranking(answer, shown)
                llm.accounting.parsed(parsed.status)
                span = order[q][a:b]
                order[q][a:b] = [span[i] for i in parsed.items] + span[shown:]
    return order


def select_top(llm: LLM, prompt: Prompt, sampling: Sampling, candidates: Candidates, texts: Mapping[str, str],
               k: int, chars: int) -> dict[str, list[str]]:
    """Per query, the ``k`` candidates the LLM picks (in its order), then the rest in their
    previous order; a failed parse keeps the previous order. Candidates the prompt leaves out
    to fit the LLM's context cannot be picked."""
    ids = [q for q, (_, oids) in candidates.items() if oids]
    fitted = [llm.fit(lambda shown, q=q: prompt.render(question=candidates[q][0], k=str(k), passages=numbered(shown)),
                      [clip(texts[o], chars) for o in candidates[q][1]], sampling,
                      f"the selection prompt of query {q!r}")
              for q in ids]
    out = {q: list(oids) for q, (_, oids) in candidates.items()}
    asked = [(q, shown) for q, (_, shown) in zip(ids, fitted) if shown]
    answers = llm.chat_one([messages for messages, shown in fitted if shown], sampling)
    for (q, shown), answer in zip(asked, answers):
        oids = list(candidates[q][1])
        parsed = parse_selection(answer, shown, k)
        llm.accounting.parsed(parsed.status)
        chosen = [oids[i] for i in parsed.items]
        out[q] = chosen + [o for o in oids if o not in set(chosen)]
    return out


def averaged_reranks(llm: LLM, prompt: Prompt, sampling: Sampling, candidates: Candidates,
                     texts: Mapping[str, str], rounds: int, chars: int) -> dict[str, list[str]]:
    """Rerank each (short) list ``rounds`` more times, each time shown in a different
    shuffled order (seeded by the round), and order by the mean rank over the given order
    and every round; ties keep the given order."""
    ranks = {q: {o: [r] for r, o in enumerate(oids)} for q, (_, oids) in candidates.items()}
    for round_ in range(rounds):
        shown = {}
        for q, (question, oids) in candidates.items():
            shuffled = list(oids)
            random.Random(f"{round_}:{q}").shuffle(shuffled)
            shown[q] = (question, shuffled)
        reordered = sliding_window(llm, prompt, sampling, shown, texts, window=max(
            (len(o) for _, o in shown.values()), default=1), step=1, passes=1, chars=chars)
        for q, oids in reordered.items():
            for r, o in enumerate(oids):
                ranks[q][o].append(r)
    return {q: sorted(oids, key=lambda o: (sum(ranks[q][o]) / len(ranks[q][o]), list(oids).index(o)))
            for q, (_, oids) in candidates.items()}
