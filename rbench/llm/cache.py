"""The LLM call cache: one JSON file per answered call, addressed by the call's content.

The key hashes the model's identity, the full rendered messages and the sampling
fields the answer depends on (see :meth:`Sampling.key_view`): greedy answers are shared
by every run that asks the same thing; sampled ones per seed and sample index. Each
answer is written atomically as soon as it returns, so a killed stage resumes without
asking again, and many workers can share one store. A record holds the sha256 of its own
content: one edited in place (still valid JSON under the same key) is damaged, not a hit.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from pathlib import Path
from typing import Any

from rbench.core.hashing import canonical_json
from rbench.core.store import write_atomic

log = logging.getLogger("rbench")
FOLDER = "llm-calls"


def _record_digest(record: dict[str, Any]) -> str:
    content = {k: v for k, v in record.items() if k != "digest"}
    return hashlib.sha256(canonical_json(content).encode()).hexdigest()


def call_key(model: dict[str, Any], messages: list[dict[str, str]], sampling: dict[str, Any]) -> str:
    """The content address of one call."""
    payload = canonical_json({"model": model, "messages": messages, "sampling": sampling})
    return hashlib.sha256(payload.encode()).hexdigest()


class CallCache:
    """Answers under ``<store>/llm-calls/<key[:2]>/<key>.json``; unreadable files count as misses."""

    def __init__(self, store_root: Path | str):
        self.root = Path(store_root) / FOLDER
        self.corrupt = 0
        self._lock = threading.Lock()

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict[str, Any] | None:
        """The stored answer of ``key``, or None (missing, or damaged: unreadable, another key's,
        or not matching its digest; then it is counted and removed)."""
        path = self._path(key)
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
            if (record.get("key") == key and isinstance(record.get("text"), str)
                    and record.get("digest") == _record_digest(record)):
                return record
        except FileNotFoundError:
            return None
        except (OSError, ValueError, AttributeError):
            pass
        with self._lock:
            self.corrupt += 1
        log.warning("LLM call cache: damaged answer %s removed; it will be asked again", path)
        path.unlink(missing_ok=True)
        return None

    def put(self, key: str, record: dict[str, Any]) -> None:
        """Store the answer of ``key`` (atomically: a reader sees the old state or the whole file)."""
        record = {k: v for k, v in record.items() if k != "digest"} | {"key": key}
        write_atomic(self._path(key), json.dumps({**record, "digest": _record_digest(record)}, ensure_ascii=False))
