"""Prompt budgets: fitting passages to a context (hand-computed with a character counter), the
stated approximation, and prompts fitted to a scripted vLLM-like server that refuses long ones."""

from __future__ import annotations

import re

import pytest

from rbench.llm.backends import LLMError
from rbench.core.errors import ConfigError
from rbench.llm.budget import Budget, PromptTooLong, approximate_tokens, fit_prompt
from rbench.llm.client import LLM
from rbench.llm.config import LLMConfig, Sampling
from rbench.llm.listwise import select_top, sliding_window
from rbench.llm.prompts import parse_prompt
from tests.unit.llm.server import ChatServer, tokens


def render(texts):
    return [("user", "Q:" + "|".join(texts))]


def chars(messages):
    return sum(len(content) for _, content in messages)


def test_a_prompt_that_fits_is_kept_as_built():
    fitted = fit_prompt(render, ["x" * 200] * 3, 604, chars)
    assert fitted.messages == render(["x" * 200] * 3) and (fitted.shown, fitted.clipped, fitted.changed) == (3, 0, False)
    assert fit_prompt(render, ["x" * 200] * 3, None, chars).shown == 3


def test_passage_tails_are_cut_first_to_the_longest_length_that_fits():
    # 2 + 3 * (cap + 4 for " ...") + 2 separators <= 400  ->  cap = 128
    fitted = fit_prompt(render, ["x" * 200] * 3, 400, chars)
    assert fitted.messages == render(["x" * 128 + " ..."] * 3) and chars(fitted.messages) == 400
    assert (fitted.shown, fitted.clipped, fitted.changed) == (3, 3, True)
    # a short passage keeps its text; the long one is cut: 2 + 50 + (cap + 4) + 1 <= 200  ->  cap = 143
    fitted = fit_prompt(render, ["x" * 50, "y" * 300], 200, chars)
    assert fitted.messages == render(["x" * 50, "y" * 143 + " ..."]) and fitted.clipped == 1


def test_then_the_last_candidates_are_left_out():
    # at 64 characters three passages need 2 + 3 * 68 + 2 = 208 > 200; two need 2 + 136 + 1 = 139
    fitted = fit_prompt(render, ["a" * 200, "b" * 200, "c" * 200], 200, chars)
    assert fitted.messages == render(["a" * 64 + " ...", "b" * 64 + " ..."])
    assert (fitted.shown, fitted.clipped) == (2, 2)


def test_a_prompt_too_long_without_passages_names_what_to_change():
    with pytest.raises(PromptTooLong, match="the listwise prompt of query 'q1' needs 2 tokens without any passage, "
                                            "but its LLM has room for 1"):
        fit_prompt(render, ["x"], 1, chars, "the listwise prompt of query 'q1'")


def test_the_approximation_counts_bytes_and_messages():
    assert approximate_tokens([("system", "abc"), ("user", "é" * 3)]) == (1 + 8) + (2 + 8)


def test_context_tokens_is_a_runtime_setting():
    base = LLMConfig(backend="openai", model="m", base_url="http://h/v1")
    assert base.model_copy(update={"context_tokens": 512}).key_view() == base.key_view()
    with pytest.raises(ValueError):
        LLMConfig(backend="openai", model="m", context_tokens=0)


PROMPT = parse_prompt("user: |-\n  Question: {question}\n  Pick {k}:\n  {passages}\n", "select.yaml")
RANK = parse_prompt("user: |-\n  Question: {question}\n  Order these {count}:\n  {passages}\n", "rank.yaml")


def _candidates(n: int, words: int):
    texts = {f"o{i}": " ".join(f"w{i}" for _ in range(words)) for i in range(n)}
    return {"q1": ("what is w3", [f"o{i}" for i in range(n)])}, texts


def _shown(messages) -> int:
    return len(re.findall(r"^\[\d+\]", messages[-1]["content"], re.M))


def test_prompts_fit_a_server_that_refuses_long_ones(tmp_path):
    candidates, texts = _candidates(10, 60)  # 61 words a passage with its "[i]"; the prompt's own words: 6
    with ChatServer(context=300) as server:
        llm = LLM(LLMConfig(backend="openai", base_url=server.url, model="test-model", max_retries=0))
        assert llm.budget.context_tokens == 300 and llm.budget.counter == "server /tokenize"
        # room 300 - 150 = 150: cut to 64 characters a passage takes 23 words; 6 + 23 n <= 150 -> n = 6
        picked = select_top(llm, PROMPT, Sampling(max_tokens=150), candidates, texts, k=2, chars=1000)
        assert server.refused == [] and server.requests == 1
        sent = server.bodies[0]["messages"]
        assert tokens(sent) == 6 + 23 * 6 and _shown(sent) == 6
        stats = llm.accounting.summary()
        assert (stats["llm_budget_prompts"], stats["llm_budget_prompts_fitted"], stats["llm_budget_passages_clipped"],
                stats["llm_budget_candidates_dropped"]) == (1, 1, 6, 4)
        # the server answers "[6] > ... > [1]": o5 and o4 are picked, the rest follow in their order
        assert picked["q1"] == ["o5", "o4", "o0", "o1", "o2", "o3", "o6", "o7", "o8", "o9"]

        # room 250: all ten fit once their tails are cut
        ranked = sliding_window(llm, RANK, Sampling(max_tokens=50), candidates, texts, window=10, step=5, passes=1,
                                chars=1000)
        sent = server.bodies[1]["messages"]
        assert server.refused == [] and _shown(sent) == 10 and 200 < tokens(sent) <= 250
        assert ranked["q1"] == [f"o{i}" for i in range(9, -1, -1)]
        assert llm.accounting.summary()["llm_budget_passages_clipped"] == 6 + 10

        unfitted = LLM(LLMConfig(backend="openai", base_url=server.url, model="test-model", max_retries=0,
                                 context_tokens=100_000))
        with pytest.raises(LLMError, match="HTTP 400"):
            select_top(unfitted, PROMPT, Sampling(max_tokens=150), candidates, texts, k=2, chars=1000)
        assert len(server.refused) == 1


def test_a_server_without_tokenize_is_counted_by_the_stated_approximation(tmp_path):
    candidates, texts = _candidates(10, 60)
    with ChatServer() as server:
        llm = LLM(LLMConfig(backend="openai", base_url=server.url, model="test-model", context_tokens=400))
        assert llm.budget.counter.startswith("approximation") and llm.budget.context_tokens == 400
        select_top(llm, PROMPT, Sampling(max_tokens=50), candidates, texts, k=2, chars=1000)
        sent = [(m["role"], m["content"]) for m in server.bodies[0]["messages"]]
        assert server.requests == 1 and 300 < approximate_tokens(sent) <= 350
        assert llm.accounting.summary()["llm_budget_candidates_dropped"] == 10 - _shown(server.bodies[0]["messages"])


def test_cap_to_context_lowers_max_tokens_to_the_room_a_prompt_leaves():
    messages = [("user", "one two three four five")]  # 5 words: 5 tokens on this server
    with ChatServer(context=40) as server:
        llm = LLM(LLMConfig(backend="openai", base_url=server.url, model="test-model", max_retries=0))
        llm.chat_one([messages], Sampling(max_tokens=100, cap_to_context=True))
        assert server.refused == [] and server.bodies[-1]["max_tokens"] == 35
        llm.chat_one([messages], Sampling(max_tokens=20, cap_to_context=True))
        assert server.bodies[-1]["max_tokens"] == 20  # room enough: as asked
        with pytest.raises(LLMError):
            llm.chat_one([messages], Sampling(max_tokens=100))
        assert server.refused
    unknown = LLM(LLMConfig(backend="openai", base_url="http://127.0.0.1:9/v1", model="m", context_tokens=None,
                            max_retries=0))
    unknown._budget = Budget(None, len, "test")
    with pytest.raises(ConfigError, match="cap_to_context needs its context length: set context_tokens"):
        unknown.chat_one([messages], Sampling(cap_to_context=True))
