"""What a hub model id points at now, for cache keys."""

from __future__ import annotations

from functools import lru_cache


@lru_cache(maxsize=None)
def hub_revision(model_id: str) -> str:
    """The commit the hub resolves ``model_id`` to; ``unresolved`` offline, without a hub
    client, or for an unknown id (the key then follows the id alone)."""
    try:
        from huggingface_hub import HfApi

        return HfApi().model_info(model_id, timeout=10).sha or "unresolved"
    except Exception:
        return "unresolved"
