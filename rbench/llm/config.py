"""Typed settings of one LLM (backend, model, limits) and of one generation (sampling)."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    field_validator,
    model_validator,
)

from rbench.core.configfile import PathOrName
from rbench.core.secrets import split_credentials
from rbench.llm.constrain import Constraint

PositiveInt = Annotated[StrictInt, Field(gt=0)]
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
BACKEND_FIELDS = {
    "openai": {"base_url", "api_key_env", "basic_auth_env", "max_concurrency", "timeout", "max_retries", "revision", "structured_outputs"},
    "transformers": {"device", "batch_size", "dtype", "threads"},
    "vllm": {"tensor_parallel_size", "quantization", "gpu_memory_utilization", "max_model_len", "dtype", "batch_size",
             "enforce_eager"},
}
RUNTIME_FIELDS = frozenset({"context_tokens", "base_url", "api_key_env", "basic_auth_env", "max_concurrency",
                            "timeout", "max_retries", "device", "batch_size", "threads", "tensor_parallel_size",
                            "gpu_memory_utilization"})


class LLMConfig(BaseModel):
    """One LLM: which ``backend`` runs which ``model``, and the backend's settings.

    ``openai``: any OpenAI-compatible server at ``base_url``; the API key is read at call
    time from the environment variable *named* by ``api_key_env`` (the key itself never
    appears in a config), and a server behind HTTP basic auth gets ``user:password`` from the
    variable named by ``basic_auth_env`` (credentials written into ``base_url`` are refused:
    URLs are printed, logged and stored); ``revision`` pins what the server serves for the call cache.
    ``structured_outputs: true`` says the server is vLLM and enforces output constraints
    itself (otherwise a constrained answer is checked and asked again, at most twice).
    ``transformers``: in-process, from a hub id, a local folder, a ``.gguf`` file or a
    packaged model (``smollm2-135m``). ``vllm``: vLLM's in-process engine on a GPU host.
    ``context_tokens`` (any backend) is the model's context length that prompts are fitted to
    (:mod:`rbench.llm.budget`); by default the model's own, or what a vLLM server reports.
    Settings that cannot change an answer (URLs, limits, devices, batch sizes) are left
    out of cache keys.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    backend: Literal["openai", "vllm", "transformers"]
    """Which engine runs the model: an OpenAI-compatible server, vLLM in process, or transformers in process."""
    model: PathOrName = Field(min_length=1)
    """A hub id, a local folder, a ``.gguf`` file, a packaged model (``smollm2-135m``) or the name a server serves."""
    revision: str | None = None
    """Pins what the model is (a hub commit, a served model's version) for the call cache."""
    context_tokens: PositiveInt | None = None
    """The context length prompts are fitted to; default: the model's own, or what a vLLM server reports."""
    base_url: str = "https://api.openai.com/v1"
    """The server's OpenAI-compatible API root (no credentials in it)."""
    api_key_env: str | None = None
    """The *name* of the environment variable holding the API key."""
    basic_auth_env: str | None = None
    """The *name* of the environment variable holding ``user:password`` for HTTP basic auth."""
    max_concurrency: PositiveInt = 8
    """Requests in flight at once to the server."""
    timeout: float = Field(120.0, gt=0)
    """Seconds before a request is abandoned (and retried)."""
    max_retries: StrictInt = Field(4, ge=0, le=20)
    """Retries of a request after a timeout, a connection error, 429 or 5xx, with backoff."""
    structured_outputs: StrictBool = False
    """The server (vLLM) enforces output constraints itself."""
    device: str | None = None
    """torch device; default: CUDA when available."""
    batch_size: PositiveInt = 8
    """Prompts generated together."""
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = "auto"
    """Weights' precision."""
    threads: PositiveInt | None = None
    """torch threads for generation on CPU."""
    tensor_parallel_size: PositiveInt = 1
    """GPUs a vLLM engine spreads the model over."""
    quantization: str | None = None
    """vLLM's quantization method (``awq``, ``gptq``, ...)."""
    gpu_memory_utilization: float = Field(0.9, gt=0, le=1)
    """Share of GPU memory vLLM may take."""
    max_model_len: PositiveInt | None = None
    """vLLM's context length."""
    enforce_eager: StrictBool = False
    """Run vLLM without CUDA graphs."""

    @field_validator("api_key_env", "basic_auth_env")
    @classmethod
    def _env_name(cls, name: str | None) -> str | None:
        if name is not None and not ENV_NAME.match(name):
            raise ValueError("must be the *name* of an environment variable holding the secret "
                             "(such as OPENAI_API_KEY), not the secret itself")
        return name

    @field_validator("base_url")
    @classmethod
    def _url(cls, url: str) -> str:
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"base_url {url!r} must start with http:// or https:// (e.g. http://localhost:8000/v1)")
        if split_credentials(url)[1] is not None:
            raise ValueError("base_url must not carry credentials (user:password@host): URLs are printed, logged "
                             "and stored. Export USER:PASSWORD in an environment variable and name it in "
                             "basic_auth_env (or name a bearer key's variable in api_key_env)")
        return url.rstrip("/")

    @model_validator(mode="after")
    def _fields_of_backend(self) -> "LLMConfig":
        others = set().union(*(f for b, f in BACKEND_FIELDS.items() if b != self.backend)) - BACKEND_FIELDS[self.backend]
        fields = type(self).model_fields
        misplaced = sorted(f for f in others & self.model_fields_set if getattr(self, f) != fields[f].default)
        if misplaced:
            raise ValueError(f"{misplaced} do not apply to backend {self.backend!r}: remove them, or pick the "
                             f"backend they belong to")
        return self

    def key_view(self) -> dict[str, Any]:
        """What an answer can depend on: backend, model identity and numeric settings."""
        from rbench.llm.models import llm_identity

        view = {k: v for k, v in self.model_dump(mode="json").items() if k not in RUNTIME_FIELDS}
        view["model"] = llm_identity(self)
        if not view["structured_outputs"]:  # only constrained calls differ: other keys stay as they were
            del view["structured_outputs"]
        return view


class Sampling(BaseModel):
    """Generation settings of one call. ``temperature: 0`` is greedy decoding; sampled calls
    are told apart (and cached) by ``seed`` and the sample's index. ``constraint`` limits
    what the answer may be (:mod:`rbench.llm.constrain`); ``beams`` > 1 runs beam search
    and answers with every beam, one per line (transformers backend)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    temperature: float = Field(0.0, ge=0, le=2)
    top_p: float = Field(1.0, gt=0, le=1)
    max_tokens: PositiveInt = 256
    seed: StrictInt = 0
    stop: tuple[str, ...] = ()
    constraint: Constraint | None = None
    beams: PositiveInt = 1
    cap_to_context: bool = False
    """Lower ``max_tokens``, prompt by prompt, to what the model's context leaves after the prompt, as
    vLLM's in-process engine stops a request at ``max_model_len`` (needs a known context length)."""

    @property
    def greedy(self) -> bool:
        """Whether the answer is deterministic (seed and sample index do not matter)."""
        return self.temperature == 0

    def key_view(self, sample: int) -> dict[str, Any]:
        """The sampling fields an answer depends on, with the sample index for sampled calls."""
        view = {"max_tokens": self.max_tokens, "stop": list(self.stop)}
        if self.constraint is not None:
            view["constraint"] = self.constraint.key_view()
        if self.beams > 1:
            view["beams"] = self.beams
        if self.cap_to_context:
            view["cap_to_context"] = True
        if not self.greedy:
            view.update(temperature=self.temperature, top_p=self.top_p, seed=self.seed, sample=sample)
        return view


def check_llm(config: LLMConfig) -> None:
    """Raise a ConfigError unless ``config`` can run here: its API key variable is set
    (``openai``), or its model resolves to packaged weights, a file, a folder or a hub id."""
    import os

    from rbench.core.errors import ConfigError

    if config.backend == "openai":
        if config.api_key_env and not os.environ.get(config.api_key_env):
            raise ConfigError(f"the environment variable {config.api_key_env} (api_key_env of LLM {config.model!r}) "
                              "is not set: export it with the server's API key")
        if config.basic_auth_env and ":" not in os.environ.get(config.basic_auth_env, ""):
            raise ConfigError(f"the environment variable {config.basic_auth_env} (basic_auth_env of LLM "
                              f"{config.model!r}) must hold USER:PASSWORD: export it")
        return
    from rbench.llm.models import resolve_llm

    resolve_llm(config.model)
