"""Prompt budgets: how many tokens a prompt may take, how they are counted, and how a prompt
that shows passages is fitted to them.

A prompt may take the model's context less the answer's ``max_tokens`` (a vLLM server refuses
a longer one with HTTP 400). The context is ``context_tokens`` of the LLM's config when set;
else, in process, vLLM's ``max_model_len`` when set or the model's ``max_position_embeddings``;
for a server, the ``max_model_len`` a vLLM server reports at ``GET /models``. A server that
reports none gives no budget: prompts go as built, and a warning says to set ``context_tokens``.

Tokens are counted on the chat as the model sees it: in process with the model's own
tokenizer and chat template, as the backend encodes it; for a server with its ``/tokenize``
endpoint (vLLM), else with a stated approximation (:func:`approximate_tokens`).

:func:`fit_prompt` fits a prompt built from passages in this order: first every passage keeps
the text its caller gives it; then their tails are cut (every passage to one longest length
that fits, at a word boundary, down to ``MIN_PASSAGE_CHARS``); then the last candidates are
left out until the prompt fits. Each clipped passage and each left-out candidate is counted.
"""

from __future__ import annotations

import logging
import math
import threading
from dataclasses import dataclass
from typing import Callable, Sequence

from rbench.core.errors import MissingExtraError
from rbench.llm.backends import LLMError
from rbench.llm.config import LLMConfig, Sampling

Messages = Sequence[tuple[str, str]]
Render = Callable[[list[str]], Messages]
MIN_PASSAGE_CHARS = 64
log = logging.getLogger("rbench")


class PromptTooLong(LLMError):
    """A prompt does not fit its LLM's budget even without any passage."""


def clip(text: str, chars: int) -> str:
    """``text`` on one line, cut to ``chars`` characters at a word boundary (`` ...`` marks a cut)."""
    flat = " ".join(text.split())
    return flat if len(flat) <= chars else flat[:chars].rsplit(" ", 1)[0] + " ..."


def approximate_tokens(messages: Messages) -> int:
    """A served model's prompt length when no tokenizer is at hand: one token per 3 UTF-8 bytes
    plus 8 per message (role and template), rounded up. English BPE tokenizers give about one
    token per 4-5 bytes, so this overestimates, and clips early rather than being refused."""
    return sum(math.ceil(len(content.encode()) / 3) + 8 for _, content in messages)


@dataclass(frozen=True)
class Budget:
    """The context of one LLM (None: unknown, no budget) and how its prompts are counted."""

    context_tokens: int | None
    count: Callable[[Messages], int]
    counter: str

    def room(self, sampling: Sampling) -> int | None:
        """Tokens a prompt may take when the answer may take ``sampling.max_tokens``."""
        return None if self.context_tokens is None else self.context_tokens - sampling.max_tokens


@dataclass(frozen=True)
class Fitted:
    """A fitted prompt: its messages, how many (leading) candidates it shows, how many of those
    were clipped to fit, and whether it was changed at all."""

    messages: Messages
    shown: int
    clipped: int
    changed: bool


def fit_prompt(render: Render, texts: Sequence[str], room: int | None, count: Callable[[Messages], int],
               what: str = "prompt") -> Fitted:
    """The prompt ``render`` builds from ``texts`` (passages as the caller shows them, best
    first), fitted to ``room`` tokens as the module says; :class:`PromptTooLong` (naming
    ``what``) when it does not fit even without passages."""
    texts = list(texts)
    messages = render(texts)
    if room is None or count(messages) <= room:
        return Fitted(messages, len(texts), 0, False)

    def at(cap: int, n: int) -> Messages:
        return render([clip(t, cap) for t in texts[:n]])

    def fits(cap: int, n: int) -> bool:
        return count(at(cap, n)) <= room

    n = len(texts)
    if n and fits(MIN_PASSAGE_CHARS, n):
        lo, hi = MIN_PASSAGE_CHARS, max(len(t) for t in texts)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (mid, hi) if fits(mid, n) else (lo, mid)
        cap = lo
    else:
        cap = MIN_PASSAGE_CHARS
        if not fits(cap, 0):
            raise PromptTooLong(f"{what} needs {count(at(cap, 0))} tokens without any passage, but its LLM has room "
                                f"for {room} (context_tokens less the answer's max_tokens): lower max_tokens, "
                                "shorten the prompt file, or use a model (or server --max-model-len) with a longer "
                                "context")
        lo, hi = 0, n
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (mid, hi) if fits(cap, mid) else (lo, mid)
        n = lo
    clipped = sum(clip(t, cap) != t for t in texts[:n])
    return Fitted(at(cap, n), n, clipped, True)


class LocalTokenizer:
    """The tokenizer and chat template of an in-process model, loaded without its weights."""

    def __init__(self, folder: str):
        try:
            from transformers import AutoTokenizer
        except ImportError:
            raise MissingExtraError("transformers", "llm", "counting an LLM's prompt tokens") from None
        self.tokenizer = AutoTokenizer.from_pretrained(folder)

    def count(self, messages: Messages) -> int:
        """Tokens of the chat with the generation prompt, encoded as the backends encode it."""
        text = self.tokenizer.apply_chat_template([{"role": r, "content": c} for r, c in messages],
                                                  add_generation_prompt=True, tokenize=False)
        return len(self.tokenizer(text, add_special_tokens=False)["input_ids"])


def _local_budget(config: LLMConfig) -> Budget:
    from rbench.llm.models import converted_folder, resolve_llm

    folder = str(converted_folder(resolve_llm(config.model)))
    context = config.context_tokens or (config.max_model_len if config.backend == "vllm" else None)
    if context is None:
        from transformers import AutoConfig

        context = getattr(AutoConfig.from_pretrained(folder), "max_position_embeddings", None)
    return Budget(context, LocalTokenizer(folder).count, "tokenizer")


def _served_budget(config: LLMConfig) -> Budget:
    from rbench.llm.backends import backend_for

    server = backend_for(config)
    context = config.context_tokens or server.served_context()
    if context is None:
        log.warning("LLM %s at %s reports no context length: prompts are sent as built; set context_tokens in its "
                    "config to fit them", config.model, config.base_url)
    if server.tokenizes():
        return Budget(context, server.count_tokens, "server /tokenize")
    return Budget(context, approximate_tokens, "approximation: 1 token per 3 bytes + 8 per message")


_BUDGETS: dict[str, Budget] = {}
_LOCK = threading.Lock()


def budget_for(config: LLMConfig) -> Budget:
    """The budget of ``config``'s model, found once per process."""
    key = config.model_dump_json()
    with _LOCK:
        if key not in _BUDGETS:
            _BUDGETS[key] = _served_budget(config) if config.backend == "openai" else _local_budget(config)
        return _BUDGETS[key]
