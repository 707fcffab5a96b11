"""Keeping secrets out of logs, params and messages."""

from __future__ import annotations

import re

PYSERINI_PLACEHOLDER_KEY = "unused-by-rbench"  # pyserini builds an OpenAI client at import


def redact(text: str) -> str:
    """``text`` with the password of every ``scheme://user:password@host`` replaced by ``***``."""
    return re.sub(r"(://[^/\s:@]*):[^/\s@]*@", r"\1:***@", text)
