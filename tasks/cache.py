"""Content-hash keyed artifact store and the Prefect cache policy built on it.

Every stage output is a folder ``<store>/<stage>/<key>``. The key hashes the stage
name and version, the stage's resolved configuration and the keys of its input
artifacts, so a change anywhere upstream changes every key below it. A folder is
built under a temporary name and renamed into place once complete; its
``_manifest.json`` (written last) lists each file with size and sha256, and a hit
is trusted only when every file still matches.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from pydantic import BaseModel

MANIFEST = "_manifest.json"
log = logging.getLogger("rbench")


def canonical_json(value: Any) -> str:
    """Serialise ``value`` deterministically (sorted keys, pydantic models dumped as JSON)."""
    return json.dumps(_plain(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _plain(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    return value


def file_digest(path: Path, chunk_size: int = 1 << 20) -> str:
    """Return the sha256 hex digest of a file, read in chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk_size):
            h.update(block)
    return h.hexdigest()


def stage_key(stage: str, version: int, config: Any, input_keys: Sequence[str]) -> str:
    """Hash a stage's identity, version, resolved config and input keys into its store key."""
    payload = canonical_json(
        {"stage": stage, "version": version, "config": config, "inputs": list(input_keys)}
    )
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:32]


@dataclass(frozen=True)
class Artifact:
    """A completed stage output: its stage, key, folder and the summary its builder returned."""

    stage: str
    key: str
    path: Path
    info: dict = field(default_factory=dict, compare=False)

    def file(self, name: str) -> Path:
        """Path of a file inside the artifact folder."""
        return self.path / name


class Store:
    """A folder of artifacts addressed by (stage, key), written atomically and verified on read."""

    def __init__(self, root: Path | str):
        self.root = Path(root).expanduser().resolve()

    def folder(self, stage: str, key: str) -> Path:
        """Final folder of an artifact (which may not exist yet)."""
        return self.root / stage / key

    def load(self, stage: str, key: str) -> Artifact | None:
        """Return the artifact if it is present and every file matches its manifest, else None."""
        folder = self.folder(stage, key)
        manifest_path = folder / MANIFEST
        try:
            manifest = json.loads(manifest_path.read_text())
            files = manifest["files"]
        except (OSError, ValueError, KeyError, TypeError):
            return None
        present = {
            p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()
        } - {MANIFEST}
        if present != set(files):
            return None
        for name, meta in files.items():
            path = folder / name
            if path.stat().st_size != meta["size"] or file_digest(path) != meta["sha256"]:
                return None
        return Artifact(stage, key, folder, manifest.get("info", {}))

    def build(
        self, stage: str, key: str, builder: Callable[[Path], dict | None]
    ) -> tuple[Artifact, bool]:
        """Return ``(artifact, built)``: the verified cached artifact, or a freshly built one.

        ``builder`` writes into an empty temporary folder and returns a JSON-able summary
        (counts, timings) stored in the manifest. A stale or corrupt folder is replaced.
        """
        cached = self.load(stage, key)
        if cached is not None:
            return cached, False
        final = self.folder(stage, key)
        final.parent.mkdir(parents=True, exist_ok=True)
        tmp = final.parent / f".tmp-{key}-{uuid.uuid4().hex[:8]}"
        tmp.mkdir()
        try:
            started = time.perf_counter()
            info = dict(builder(tmp) or {})
            info["build_seconds"] = round(time.perf_counter() - started, 3)
            files = {
                p.relative_to(tmp).as_posix(): {"size": p.stat().st_size, "sha256": file_digest(p)}
                for p in sorted(tmp.rglob("*"))
                if p.is_file()
            }
            manifest = {"stage": stage, "key": key, "files": files, "info": info}
            _write_text_atomic(tmp / MANIFEST, canonical_json(manifest))
            if final.exists():
                log.warning("replacing incomplete or corrupt artifact %s", final)
                trash = final.parent / f".trash-{key}-{uuid.uuid4().hex[:8]}"
                final.rename(trash)
                shutil.rmtree(trash, ignore_errors=True)
            tmp.rename(final)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        return Artifact(stage, key, final, info), True


def _write_text_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    tmp.replace(path)


def write_atomic(path: Path, text: str) -> None:
    """Write a text file atomically (temporary file in the same folder, then rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    _write_text_atomic(path, text)


@dataclass(frozen=True)
class Stage:
    """A pipeline stage: a name, a version bumped whenever its logic changes, and its builder.

    ``build(folder, inputs, config, **options)`` writes the stage output into ``folder``
    and returns a summary. ``config`` is hashed into the key; ``options`` (mirror
    folders, thread counts) are not, because they cannot change the output.
    """

    name: str
    version: int
    build: Callable[..., dict | None]

    def key(self, inputs: Sequence[Artifact], config: Any) -> str:
        """Store key for this stage given its inputs and resolved config."""
        return stage_key(self.name, self.version, config, [a.key for a in inputs])

    def run(
        self, store: Store, inputs: Sequence[Artifact], config: Any, **options: Any
    ) -> Artifact:
        """Return the cached artifact when intact, else build it. Plain function; no Prefect."""
        key = self.key(inputs, config)
        artifact, built = store.build(
            self.name, key, lambda folder: self.build(folder, list(inputs), config, **options)
        )
        verb = "built" if built else "reused"
        log.debug("%s %s %s: %s", self.name, verb, key[:12], summarize(artifact.info))
        return artifact


def summarize(info: Mapping[str, Any]) -> str:
    """One line of ``key=value`` pairs from a stage summary (nested values left out)."""
    return ", ".join(f"{k}={v}" for k, v in info.items() if not isinstance(v, (dict, list)))
