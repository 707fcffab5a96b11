"""A configured LLM with its call cache and accounting: what every LLM retriever calls."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Sequence

from rbench.core.errors import ConfigError
from rbench.llm.backends import Completion, Request, backend_for
from rbench.llm.budget import Budget, Fitted, Render, budget_for, fit_prompt
from rbench.llm.cache import CallCache, call_key
from rbench.llm.config import LLMConfig, Sampling

Messages = Sequence[tuple[str, str]]
CONSTRAINT_RETRIES = 2
STEP_COUNTS = ("calls", "calls_cached", "prompt_tokens", "completion_tokens")
log = logging.getLogger("rbench")


def retry_sampling(sampling: Sampling, retry: int) -> Sampling:
    """The sampling of the ``retry``-th new try of a constrained call: sampled (a greedy repeat
    would give the same answer), with its own seed, so with its own cache key."""
    return sampling.model_copy(update={"temperature": max(sampling.temperature, 0.7), "seed": sampling.seed + retry})


class Accounting:
    """Counts of one run's LLM use, in all and per method step: calls made and served from cache,
    tokens, latency per request where the backend measures one (a server call) or per batch
    (in-process batched generation: wall time and size, never divided into a made-up
    per-request figure), generation time, and parse outcomes."""

    def __init__(self):
        self._lock = threading.Lock()
        self.calls = self.cached = self.prompt_tokens = self.completion_tokens = 0
        self.latencies: list[float] = []
        self.batches: dict[int, tuple[float, int]] = {}
        self.generation_seconds = 0.0
        self.parse: dict[str, int] = {}
        self.fitting = dict.fromkeys(("prompts", "prompts_fitted", "passages_clipped", "candidates_dropped"), 0)
        self.steps: dict[str, dict[str, int]] = {}
        self._local = threading.local()

    @contextlib.contextmanager
    def step(self, name: str):
        """Calls made (or served from the cache) in this thread inside the block also count under
        step ``name`` (a method's step: ``arm_keywords``, ``react_turn2``)."""
        outer = getattr(self._local, "step", None)
        self._local.step = name
        try:
            yield
        finally:
            self._local.step = outer

    def _in_step(self, **counts: int) -> None:
        name = getattr(self._local, "step", None)
        if name is not None:
            step = self.steps.setdefault(name, dict.fromkeys(STEP_COUNTS, 0))
            for field, n in counts.items():
                step[field] += n

    def answered(self, completion: Completion) -> None:
        """Count one call made."""
        with self._lock:
            self.calls += 1
            self.prompt_tokens += completion.prompt_tokens
            self.completion_tokens += completion.completion_tokens
            self._in_step(calls=1, prompt_tokens=completion.prompt_tokens,
                          completion_tokens=completion.completion_tokens)
            if completion.batch is None:
                self.latencies.append(completion.seconds)
            else:
                self.batches[completion.batch] = (completion.seconds, completion.batch_size)

    def generated(self, seconds: float) -> None:
        """Add the wall time of one batch of calls (for tokens per second)."""
        with self._lock:
            self.generation_seconds += seconds

    def hit(self, count: int) -> None:
        """Count calls served from the cache."""
        with self._lock:
            self.cached += count
            self._in_step(calls_cached=count)

    def parsed(self, status: str) -> None:
        """Count one parse outcome (``ok``, ``repaired``, ``fallback``, or ``unconstrained``: an
        answer that missed its constraint on a server that does not enforce it, even when asked again)."""
        with self._lock:
            self.parse[status] = self.parse.get(status, 0) + 1

    def fitted(self, fitted: Fitted, candidates: int) -> None:
        """Count one prompt fitted to its budget from ``candidates`` passages."""
        with self._lock:
            self.fitting["prompts"] += 1
            self.fitting["prompts_fitted"] += fitted.changed
            self.fitting["passages_clipped"] += fitted.clipped
            self.fitting["candidates_dropped"] += candidates - fitted.shown

    def summary(self) -> dict[str, Any]:
        """Flat counters for a stage summary and MLflow (``llm_`` prefixed): per-request latency
        (mean, p95) of unbatched calls, and batches with their mean size and wall seconds (mean, p95)."""
        batch_seconds = [seconds for seconds, _ in self.batches.values()]
        out = {
            "llm_calls": self.calls, "llm_calls_cached": self.cached,
            "llm_prompt_tokens": self.prompt_tokens, "llm_completion_tokens": self.completion_tokens,
            "llm_latency_mean_s": _mean(self.latencies), "llm_latency_p95_s": _p95(self.latencies),
            "llm_completion_tokens_per_s": round(self.completion_tokens / self.generation_seconds, 1)
            if self.generation_seconds else None,
        }
        if self.batches:
            out.update(llm_batches=len(self.batches),
                       llm_batch_size_mean=round(sum(n for _, n in self.batches.values()) / len(self.batches), 2),
                       llm_batch_seconds_mean=_mean(batch_seconds), llm_batch_seconds_p95=_p95(batch_seconds))
        if self.fitting["prompts"]:
            out.update({f"llm_budget_{name}": n for name, n in self.fitting.items()})
        out.update({f"llm_parse_{status}": n for status, n in sorted(self.parse.items())})
        out.update({f"llm_{name}_{field}": n for name, counts in sorted(self.steps.items())
                    for field, n in counts.items()})
        return out


def _mean(values: Sequence[float]) -> float | None:
    return round(sum(values) / len(values), 4) if values else None


def _p95(values: Sequence[float]) -> float | None:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))], 4) if ordered else None


class LLM:
    """Chat calls to one configured model through the call cache (``cache=None``: no cache)."""

    def __init__(self, config: LLMConfig | dict, cache: CallCache | None = None,
                 accounting: Accounting | None = None):
        self.config = config if isinstance(config, LLMConfig) else LLMConfig.model_validate(config)
        self.cache = cache
        self.accounting = accounting or Accounting()
        self._model_key = None
        self._budget: Budget | None = None

    @property
    def budget(self) -> Budget:
        """This model's context and token counter (:mod:`rbench.llm.budget`)."""
        if self._budget is None:
            self._budget = budget_for(self.config)
        return self._budget

    def fit(self, render: Render, texts: Sequence[str], sampling: Sampling,
            what: str = "prompt") -> tuple[Messages, int]:
        """The prompt ``render`` builds from ``texts`` (passages as shown, best first), fitted to
        this model's context less ``sampling.max_tokens`` (tails clipped, then the last candidates
        left out; counted as ``llm_budget_*``), and how many leading texts it shows."""
        fitted = fit_prompt(render, texts, self.budget.room(sampling), self.budget.count, what)
        self.accounting.fitted(fitted, len(texts))
        return fitted.messages, fitted.shown

    def chat(self, prompts: Sequence[Messages], sampling: Sampling, samples: int = 1) -> list[list[str]]:
        """The answers to each prompt (``samples`` per prompt), from the cache where answered
        before; new answers are stored as each one returns. A constrained answer from a server
        that does not enforce constraints is checked, and asked again (``CONSTRAINT_RETRIES``
        times at most) as calls of their own: their own sampling and cache key, counted like
        any call; one that still misses is passed on and counted as parse status ``unconstrained``."""
        fitted = [self._capped(p, sampling) for p in prompts] if sampling.cap_to_context else [sampling] * len(prompts)
        requests = [Request(tuple(map(tuple, p)), fitted[i], s) for i, p in enumerate(prompts) for s in range(samples)]
        texts = self._answers(requests)
        if sampling.constraint is not None and self.config.backend == "openai" and not self.config.structured_outputs:
            self._conform(requests, texts)
        return [[texts[i * samples + s] for s in range(samples)] for i in range(len(prompts))]

    def _capped(self, prompt: Messages, sampling: Sampling) -> Sampling:
        context = self.budget.context_tokens
        if context is None:
            raise ConfigError(f"LLM {self.config.model!r}: cap_to_context needs its context length: set context_tokens")
        room = context - self.budget.count(prompt)
        if room < 1:
            raise ConfigError(f"LLM {self.config.model!r}: a prompt of {context - room} tokens leaves no room in its "
                              f"context of {context}: shorten the prompt or raise context_tokens")
        return sampling.model_copy(update={"max_tokens": min(sampling.max_tokens, room)})

    def _conform(self, requests: list[Request], texts: list[str]) -> None:
        constraint = requests[0].sampling.constraint
        for retry in range(1, CONSTRAINT_RETRIES + 1):
            missed = [i for i, text in enumerate(texts) if not constraint.accepts(text.strip())]
            if not missed:
                return
            again = [Request(requests[i].messages, retry_sampling(requests[i].sampling, retry), requests[i].sample)
                     for i in missed]
            for i, text in zip(missed, self._answers(again)):
                texts[i] = text
        missed = [i for i, text in enumerate(texts) if not constraint.accepts(text.strip())]
        for _ in missed:
            self.accounting.parsed("unconstrained")
        if missed:
            log.warning("LLM %s: %d answer(s) still miss their constraint after %d retries and are passed on "
                        "unconstrained (counted as llm_parse_unconstrained); a vLLM server with structured_outputs: "
                        "true enforces it", self.config.model, len(missed), CONSTRAINT_RETRIES)

    def _answers(self, requests: list[Request]) -> list[str]:
        """The answer to each request, from the cache or the backend (stored as each returns)."""
        if self._model_key is None:
            self._model_key = self.config.key_view()
        keys = [call_key(self._model_key, r.as_messages(), r.sampling.key_view(r.sample)) for r in requests]
        texts: list[str | None] = [None] * len(requests)
        for i, key in enumerate(keys):
            record = self.cache.get(key) if self.cache is not None else None
            if record is not None:
                texts[i] = record["text"]
        missing = [i for i, t in enumerate(texts) if t is None]
        self.accounting.hit(len(requests) - len(missing))
        if missing:
            def done(j: int, completion: Completion) -> None:
                i = missing[j]
                texts[i] = completion.text
                self.accounting.answered(completion)
                if self.cache is not None:
                    self.cache.put(keys[i], {"text": completion.text, "prompt_tokens": completion.prompt_tokens,
                                             "completion_tokens": completion.completion_tokens,
                                             "seconds": round(completion.seconds, 4),
                                             "batch_size": completion.batch_size,
                                             "finish_reason": completion.finish_reason})

            backend = backend_for(self.config)
            started = time.perf_counter()
            backend.generate([requests[i] for i in missing], done)
            self.accounting.generated(time.perf_counter() - started)
        return texts

    def chat_one(self, prompts: Sequence[Messages], sampling: Sampling) -> list[str]:
        """One answer per prompt."""
        return [answers[0] for answers in self.chat(prompts, sampling)]


@dataclass
class LLMSession:
    """What the LLM-driven retrievers of one stage share: the call cache and the accounting."""

    cache: CallCache | None = None
    accounting: Accounting = field(default_factory=Accounting)

    def llm(self, config: LLMConfig | dict) -> LLM:
        """The configured model, called through this session's cache and accounting."""
        return LLM(config, self.cache, self.accounting)
