"""LLM backends: each answers a list of chat requests and reports every answer as it
returns. ``openai`` talks to any OpenAI-compatible server over HTTP; ``transformers`` and
``vllm`` run the model in this process (extras ``llm`` and ``vllm``)."""

from __future__ import annotations

import itertools
import logging
import os
import random
import threading
import time
from abc import ABC, abstractmethod
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from typing import Callable, Sequence

from rbench.core.errors import ConfigError, MissingExtraError, RbenchError
from rbench.core.imports import one_load_at_a_time
from rbench.llm.config import LLMConfig, Sampling
from rbench.llm.limits import endpoint_slot

RETRY_STATUS = {408, 409, 429, 500, 502, 503, 504}
log = logging.getLogger("rbench")


class LLMError(RbenchError):
    """A call failed for good (after the configured retries) or the server refused it."""


@dataclass(frozen=True)
class Request:
    """One chat call: the messages, the sampling settings and the sample's index."""

    messages: tuple[tuple[str, str], ...]
    sampling: Sampling
    sample: int = 0

    def as_messages(self) -> list[dict[str, str]]:
        """The messages in the OpenAI chat format."""
        return [{"role": role, "content": content} for role, content in self.messages]

    def seed(self) -> int:
        """The seed this sample is drawn with."""
        return self.sampling.seed + self.sample


@dataclass(frozen=True)
class Completion:
    """One answer with its token counts and time: ``seconds`` is the request's own latency when
    ``batch`` is None, else the wall time of the batch ``batch`` (an id) of ``batch_size``
    requests it was generated in (a batch has no per-request latency)."""

    text: str
    prompt_tokens: int
    completion_tokens: int
    seconds: float
    finish_reason: str | None = None
    batch: int | None = None
    batch_size: int = 1


_BATCHES = itertools.count(1)


Done = Callable[[int, Completion], None]


class Backend(ABC):
    """Answers requests; ``done(i, completion)`` is called as each one returns."""

    @abstractmethod
    def generate(self, requests: list[Request], done: Done) -> None:
        """Answer every request (raise :class:`LLMError` when one fails for good)."""


def _stop_at(text: str, stop: tuple[str, ...]) -> str:
    cut = min((i for i in (text.find(s) for s in stop) if i >= 0), default=-1)
    return text if cut < 0 else text[:cut]


class OpenAIBackend(Backend):
    """An OpenAI-compatible ``/chat/completions`` endpoint: at most ``max_concurrency`` requests
    in flight to it from this host (:mod:`rbench.llm.limits`), and every request type (chat,
    ``/tokenize``, ``/models``) retried a bounded number of times (exponential backoff with
    jitter, ``Retry-After`` honoured) on timeouts, connection errors, 429 and 5xx."""

    def __init__(self, config: LLMConfig):
        import httpx

        from rbench.core.secrets import PYSERINI_PLACEHOLDER_KEY

        self.config = config
        self._secrets: list[str] = []
        headers, auth = {}, None
        if config.api_key_env:
            key = os.environ.get(config.api_key_env, "")
            if not key or key == PYSERINI_PLACEHOLDER_KEY:
                raise ConfigError(f"the environment variable {config.api_key_env} (api_key_env of LLM "
                                  f"{config.model!r}) is not set: export it with the server's API key")
            self._secrets.append(key)
            headers["Authorization"] = f"Bearer {key}"
        if config.basic_auth_env:
            user, colon, password = os.environ.get(config.basic_auth_env, "").partition(":")
            if not colon:
                raise ConfigError(f"the environment variable {config.basic_auth_env} (basic_auth_env of LLM "
                                  f"{config.model!r}) must hold USER:PASSWORD: export it")
            self._secrets.append(password)
            auth = httpx.BasicAuth(user, password)
        self._http = httpx.Client(base_url=config.base_url, headers=headers, auth=auth, timeout=config.timeout)

    def _hide(self, text: str) -> str:
        for secret in self._secrets:
            if secret:
                text = text.replace(secret, "***")
        return text

    def _body(self, request: Request) -> dict:
        s = request.sampling
        body = {"model": self.config.model, "messages": request.as_messages(), "max_tokens": s.max_tokens,
                "temperature": s.temperature, "top_p": s.top_p, "seed": request.seed()}
        if s.stop:
            body["stop"] = list(s.stop)
        if s.constraint is not None and self.config.structured_outputs:
            body["structured_outputs"] = {"regex": s.constraint.pattern}
        return body

    def _checked(self, request: Request) -> Completion:
        """One call; a constraint must be a regex (enforced by a vLLM server with
        ``structured_outputs``, else checked by :class:`rbench.llm.client.LLM`)."""
        _regex_only(request.sampling)
        return self._call(request)

    def _send(self, method: str, path: str, json: dict | None = None) -> tuple[object | None, str, int]:
        """One request with the endpoint's slot held for each attempt, retried ``max_retries`` times
        (backoff with jitter, ``Retry-After`` honoured) on timeouts, connection errors, 429 and 5xx:
        ``(the last response or None, the last problem, attempts)``."""
        import httpx

        problem, response = "", None
        for attempt in range(self.config.max_retries + 1):
            wait_s = min(30.0, 0.5 * 2 ** attempt) * (0.5 + random.random())
            try:
                with endpoint_slot(self.config.base_url, self.config.max_concurrency):
                    response = self._http.request(method, path, json=json)
            except httpx.HTTPError as e:  # timeouts and connection errors: retried
                problem, response = f"{type(e).__name__}: {e}", None
            else:
                if response.status_code == 200:
                    return response, "", attempt + 1
                problem = f"HTTP {response.status_code}: {response.text[:300]}"
                if response.status_code not in RETRY_STATUS:
                    break
                retry_after = response.headers.get("retry-after", "")
                if retry_after.replace(".", "", 1).isdigit():
                    wait_s = min(60.0, float(retry_after))
            if attempt < self.config.max_retries:
                time.sleep(wait_s)
        return response, problem, attempt + 1

    def _call(self, request: Request) -> Completion:
        started = time.perf_counter()
        response, problem, attempts = self._send("POST", "/chat/completions", self._body(request))
        if not problem:
            return self._completion(response.json(), time.perf_counter() - started)
        raise LLMError(self._hide(f"LLM call to {self.config.base_url} (model {self.config.model!r}) failed after "
                                  f"{attempts} attempt(s): {problem}"))

    def _completion(self, payload: dict, seconds: float) -> Completion:
        try:
            choice = payload["choices"][0]
            text = choice["message"].get("content") or ""
        except (KeyError, IndexError, TypeError, AttributeError):
            raise LLMError(f"LLM server {self.config.base_url} answered without choices[0].message: "
                           f"{str(payload)[:200]}") from None
        usage = payload.get("usage") or {}
        return Completion(text, int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0),
                          seconds, choice.get("finish_reason"))

    def served_context(self) -> int | None:
        """The ``max_model_len`` the server reports for this model at ``GET /models`` (vLLM), or None."""
        response, problem, _ = self._send("GET", "/models")
        try:
            models = response.json().get("data") if not problem else None
        except (ValueError, AttributeError):
            models = None
        for model in models if isinstance(models, list) else []:
            if isinstance(model, dict) and model.get("id") == self.config.model:
                length = model.get("max_model_len")
                return length if isinstance(length, int) and length > 0 else None
        return None

    def _tokenize(self, messages: Sequence[tuple[str, str]]):
        root = self.config.base_url.removesuffix("/v1")
        return self._send("POST", f"{root}/tokenize", {
            "model": self.config.model, "add_generation_prompt": True,
            "messages": [{"role": role, "content": content} for role, content in messages]})

    def tokenizes(self) -> bool:
        """Whether the server counts prompt tokens at ``/tokenize`` beside ``/v1`` (vLLM does). A
        server without that route says no; one that fails the probe after its retries is named in
        a warning, since prompts are then counted by approximation."""
        response, problem, attempts = self._tokenize([("user", "x")])
        try:
            if not problem and isinstance(response.json().get("count"), int):
                return True
        except (ValueError, AttributeError):
            pass
        if response is None or response.status_code != 404:
            log.warning("%s", self._hide(f"{self.config.base_url.removesuffix('/v1')}/tokenize failed after {attempts} "
                                         f"attempt(s) ({problem or 'no count in its answer'}): prompts are counted "
                                         "by approximation"))
        return False

    def count_tokens(self, messages: Sequence[tuple[str, str]]) -> int:
        """The prompt tokens of the chat ``messages``, counted by the server's own tokenizer."""
        response, problem, attempts = self._tokenize(messages)
        if not problem:
            try:
                return int(response.json()["count"])
            except (ValueError, KeyError, TypeError) as e:
                problem = f"{type(e).__name__}: {e}"
        raise LLMError(self._hide(f"counting prompt tokens at {self.config.base_url.removesuffix('/v1')}/tokenize "
                                  f"(model {self.config.model!r}) failed after {attempts} attempt(s): {problem}"))

    def generate(self, requests: list[Request], done: Done) -> None:
        pool = ThreadPoolExecutor(self.config.max_concurrency, thread_name_prefix="rbench-llm")
        try:
            futures = {pool.submit(self._checked, r): i for i, r in enumerate(requests)}
            for future in as_completed(futures):
                done(futures[future], future.result())
        finally:
            pool.shutdown(wait=False, cancel_futures=True)


class TransformersBackend(Backend):
    """A causal LM in this process (CPU or GPU): greedy requests in padded batches of
    ``batch_size``, sampled ones one by one with their own seed. One generation at a time
    per loaded model."""

    @one_load_at_a_time
    def __init__(self, config: LLMConfig):
        try:
            import torch
            from transformers import AutoModelForCausalLM, AutoTokenizer
        except ImportError:
            raise MissingExtraError("transformers", "llm", "the transformers LLM backend") from None
        from rbench.llm.models import converted_folder, resolve_llm

        self.config = config
        if config.threads:
            torch.set_num_threads(config.threads)
        folder = str(converted_folder(resolve_llm(config.model)))
        dtype = {"auto": "auto", "float32": torch.float32, "bfloat16": torch.bfloat16,
                 "float16": torch.float16}[config.dtype]
        self.device = config.device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.tokenizer = AutoTokenizer.from_pretrained(folder)
        self.tokenizer.padding_side = "left"
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.model = AutoModelForCausalLM.from_pretrained(folder, dtype=dtype).to(self.device).eval()
        self._lock = threading.Lock()

    def generate(self, requests: list[Request], done: Done) -> None:
        groups: dict[str, list[int]] = {}
        for i, r in enumerate(requests):
            if r.sampling.greedy:
                groups.setdefault(r.sampling.model_dump_json(), []).append(i)
        batches = []
        for group in groups.values():  # one batch, one sampling
            group.sort(key=lambda i: sum(len(c) for _, c in requests[i].messages))
            batches += [group[j:j + self.config.batch_size] for j in range(0, len(group), self.config.batch_size)]
        batches += [[i] for i, r in enumerate(requests) if not r.sampling.greedy]
        for batch in batches:
            with self._lock:
                for i, completion in zip(batch, self._run([requests[i] for i in batch])):
                    done(i, completion)

    def _run(self, requests: list[Request]) -> list[Completion]:
        import torch

        sampling = requests[0].sampling
        prompts = [self.tokenizer.apply_chat_template(r.as_messages(), add_generation_prompt=True, tokenize=False)
                   for r in requests]
        encoded = self.tokenizer(prompts, return_tensors="pt", padding=True, add_special_tokens=False).to(self.device)
        options = {"max_new_tokens": sampling.max_tokens, "pad_token_id": self.tokenizer.pad_token_id}
        if sampling.greedy:
            options.update(do_sample=False, temperature=None, top_p=None, top_k=None)
        else:
            torch.manual_seed(requests[0].seed())
            options.update(do_sample=True, temperature=sampling.temperature, top_p=sampling.top_p, top_k=None)
        if sampling.stop:
            options.update(stop_strings=list(sampling.stop), tokenizer=self.tokenizer)
        width = encoded["input_ids"].shape[1]
        if sampling.constraint is not None:
            from transformers import LogitsProcessorList

            from rbench.llm.constrain import ConstrainedLogits

            options["logits_processor"] = LogitsProcessorList([ConstrainedLogits(sampling.constraint, self.tokenizer,
                                                                                 width)])
        if sampling.beams > 1:
            options.update(num_beams=sampling.beams, num_return_sequences=sampling.beams, do_sample=False)
        started = time.perf_counter()
        with torch.inference_mode():
            output = self.model.generate(**encoded, **options)
        seconds, batch = time.perf_counter() - started, next(_BATCHES)
        completions = []
        for i, mask in enumerate(encoded["attention_mask"]):
            texts, tokens = [], 0
            for row in output[i * sampling.beams:(i + 1) * sampling.beams]:
                new = row[width:]
                new = new[new != self.tokenizer.pad_token_id] if self.tokenizer.pad_token_id is not None else new
                texts.append(_stop_at(self.tokenizer.decode(new, skip_special_tokens=True), sampling.stop))
                tokens = max(tokens, len(new))
            finish = "length" if tokens >= sampling.max_tokens else "stop"
            completions.append(Completion("\n".join(texts), int(mask.sum()), tokens, seconds, finish, batch,
                                          len(requests)))
        return completions


class VLLMBackend(Backend):
    """vLLM's in-process engine (GPU hosts): every request of a call goes to one batched
    ``chat``; prefix caching on, since few-shot prompts share long prefixes."""

    def __init__(self, config: LLMConfig):
        try:
            from vllm import LLM
        except ImportError:
            raise MissingExtraError("vllm", "vllm", "the in-process vLLM backend (in its own environment or "
                                    "image; see deployments/README.md)") from None
        from rbench.llm.models import converted_folder, resolve_llm

        options = {"tensor_parallel_size": config.tensor_parallel_size, "enable_prefix_caching": True,
                   "gpu_memory_utilization": config.gpu_memory_utilization, "dtype": config.dtype,
                   "enforce_eager": config.enforce_eager}
        if config.quantization:
            options["quantization"] = config.quantization
        if config.max_model_len:
            options["max_model_len"] = config.max_model_len
        self.config = config
        self.engine = LLM(model=str(converted_folder(resolve_llm(config.model))), **options)
        self._lock = threading.Lock()

    def generate(self, requests: list[Request], done: Done) -> None:
        from vllm import SamplingParams

        step = 512  # answers are reported (and cached) every `step` requests
        for start in range(0, len(requests), step):
            chunk = requests[start:start + step]
            params = [SamplingParams(temperature=r.sampling.temperature, top_p=r.sampling.top_p,
                                     max_tokens=r.sampling.max_tokens, seed=r.seed(), stop=list(r.sampling.stop),
                                     **_vllm_constraint(r.sampling)) for r in chunk]
            started = time.perf_counter()
            with self._lock:
                outputs = self.engine.chat([r.as_messages() for r in chunk], sampling_params=params, use_tqdm=False)
            seconds, batch = time.perf_counter() - started, next(_BATCHES)
            for j, out in enumerate(outputs):
                answer = out.outputs[0]
                done(start + j, Completion(answer.text, len(out.prompt_token_ids or ()), len(answer.token_ids),
                                           seconds, answer.finish_reason, batch, len(chunk)))


def _regex_only(sampling: Sampling) -> None:
    """Refuse what only the transformers backend does: n-gram constraints and beam search."""
    if sampling.beams > 1 or (sampling.constraint is not None and sampling.constraint.kind != "regex"):
        raise LLMError("n-gram constraints and beam search run on the transformers backend: give this step an "
                       "LLM with backend: transformers")


def _vllm_constraint(sampling: Sampling) -> dict:
    """vLLM's structured-output setting for a regex constraint."""
    _regex_only(sampling)
    if sampling.constraint is None:
        return {}
    from vllm.sampling_params import StructuredOutputsParams

    return {"structured_outputs": StructuredOutputsParams(regex=sampling.constraint.pattern)}


BACKENDS: dict[str, type[Backend]] = {"openai": OpenAIBackend, "transformers": TransformersBackend,
                                      "vllm": VLLMBackend}
_LOADED: dict[str, Backend] = {}
_LOAD_LOCK = threading.Lock()


def backend_for(config: LLMConfig) -> Backend:
    """The backend of ``config``, loaded once per process and shared by every caller."""
    key = config.model_dump_json()
    with _LOAD_LOCK:
        if key not in _LOADED:
            _LOADED[key] = BACKENDS[config.backend](config)
        return _LOADED[key]
