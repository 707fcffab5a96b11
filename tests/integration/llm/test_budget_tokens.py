"""Prompt budgets of an in-process model: SmolLM2's context from its config, and its prompts
counted exactly as the transformers backend encodes them."""

from __future__ import annotations

from rbench.llm.budget import budget_for
from rbench.llm.client import LLM
from rbench.llm.config import LLMConfig, Sampling
from rbench.llm.listwise import select_top
from rbench.llm.prompts import load_prompt

SMOLLM2 = LLMConfig(backend="transformers", model="smollm2-135m", threads=2)


def test_the_tokenizer_counts_what_the_backend_encodes():
    budget = budget_for(SMOLLM2)
    assert budget.context_tokens == 8192 and budget.counter == "tokenizer"
    prompts = [[("user", "What is the capital of France?")],
               [("system", "You rank passages."), ("user", "Passages:\n[1] Paris is in France.\n[2] Lyon.")]]
    llm = LLM(SMOLLM2)
    llm.chat_one(prompts, Sampling(max_tokens=1))
    assert llm.accounting.calls == 2 and llm.accounting.prompt_tokens == sum(budget.count(p) for p in prompts)


def test_a_selection_prompt_is_fitted_to_a_shorter_context():
    llm = LLM(SMOLLM2.model_copy(update={"context_tokens": 400}))
    texts = {f"o{i}": f"Passage {i} about the history of the city and its rivers. " * 8 for i in range(12)}
    sampling = Sampling(max_tokens=16)
    select_top(llm, load_prompt("select_topk"), sampling, {"q": ("Which city has rivers?", list(texts))}, texts,
               k=3, chars=400)
    stats = llm.accounting.summary()
    assert stats["llm_calls"] == 1 and stats["llm_prompt_tokens"] <= 400 - 16
    assert stats["llm_budget_prompts_fitted"] == 1 and stats["llm_budget_passages_clipped"] > 0
