"""Content hashing: canonical JSON (what a cache key hashes), file digests, and fast fingerprints
of files and folders."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Mapping

from pydantic import BaseModel

FINGERPRINT_EDGE = 1 << 16


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


def fast_fingerprint(path: Path, edge: int = FINGERPRINT_EDGE) -> str:
    """sha256 of a file's size and its first and last ``edge`` bytes: O(1) per file.

    Catches deleted, truncated, replaced and most overwritten files; a change in the
    middle of a large file needs the full check (``Store.load(..., full=True)``).
    """
    size = path.stat().st_size
    h = hashlib.sha256(str(size).encode())
    with open(path, "rb") as f:
        h.update(f.read(edge))
        if size > 2 * edge:
            f.seek(size - edge)
        h.update(f.read(edge))
    return h.hexdigest()


def folder_fingerprint(folder: Path) -> str:
    """A digest of a folder's files (relative paths, sizes and fast fingerprints), ``.cache`` ignored."""
    h = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and ".cache" not in p.parts):
        h.update(f"{path.relative_to(folder).as_posix()}:{fast_fingerprint(path)}\n".encode())
    return h.hexdigest()
