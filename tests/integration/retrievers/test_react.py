"""ReAct: the permissive action parser, and the loop with SmolLM2 (constrained turns)."""

from __future__ import annotations

import pytest

from rbench.llm.parse import parse_action
from tests.conftest import CORPUS

ACTIONS = {
    "Thought: need the year.\nAction: Search[Andy Karl award year]": ("need the year.", "search", "Andy Karl award year", "ok"),
    "Thought: done\nAction: Finish": ("done", "finish", "", "ok"),
    "Thought: x\nAction: search(volcano ash)": ("x", "search", "volcano ash", "repaired"),
    "Action: Search: chess board": ("", "search", "chess board", "repaired"),
    "thought - hmm\naction: finish now": ("hmm", "finish", "", "repaired"),
    "Action: Search[ ]": ("", "none", "", "fallback"),
    "I do not know what to do.": ("", "none", "", "fallback"),
    "": ("", "none", "", "fallback"),
}


@pytest.mark.parametrize("text", ACTIONS)
def test_the_action_parser_is_permissive_and_counts(text):
    thought, action, keywords, status = ACTIONS[text]
    parsed = parse_action(text)
    assert parsed.items == [thought, action, keywords] and parsed.status == status


@pytest.mark.slow
def test_the_loop_with_smollm2_takes_well_formed_turns_and_stops(corpus_file, tmp_path):
    import regex

    from rbench.retrievers.base import make_retriever
    from rbench.retrievers.react import turn_pattern
    from tests.integration.retrievers.conftest import index_leaves

    params = {"llm": {"backend": "transformers", "model": "smollm2-135m"}, "max_iterations": 2, "k_search": 2,
              "max_tokens": 64, "thought_chars": 80}
    react = make_retriever("react", params)
    react.open(index_leaves(make_retriever("react", params), corpus_file, tmp_path), corpus_file)
    queries = {"volcano": "Which mountain erupted with lava and ash?", "chess": "How many squares has a chess board?",
               "birds": "Which birds cannot fly?"}
    run = react.search(queries, k=10)
    traces = {t["query_id"]: t for t in react.take_traces()}
    assert set(traces) == set(queries) and react.take_traces() == []
    pattern = turn_pattern(80, 80)
    for q, trace in traces.items():
        assert 1 <= len(trace["turns"]) <= 2 and trace["stop"] in ("finish", "max_iterations")
        assert trace["stop"] == "finish" or len(trace["turns"]) == 2  # stopped by Finish or at the limit
        for turn in trace["turns"]:
            assert turn["status"] == "ok" and turn["action"] in ("search", "finish")
        searched = [oid for turn in trace["turns"] for oid in turn.get("observation", [])]
        assert [oid for oid, _ in run[q]] == list(dict.fromkeys(searched))[:10]  # first retrieval order
        assert all(oid in {f"o{i}" for i in range(len(CORPUS))} for oid in searched)
    stats = react.stats()
    assert stats["react_turns_mean"] >= 1 and sum(v for k, v in stats.items() if k.startswith("react_stop_")) == 3
    llm = react.session.accounting.summary()  # every call counted under its turn, with its seconds
    assert llm["llm_react_turn1_calls"] == 3 and llm["llm_react_turn1_prompt_tokens"] > 0
    assert sum(v for k, v in llm.items() if k.startswith("llm_react_turn") and k.endswith("_calls")) == llm["llm_calls"]
    assert stats["react_seconds_turn1"] > 0
    assert regex.fullmatch(pattern, "Thought: a\nAction: Search[b]") and not regex.fullmatch(pattern, "Action: Finish")
