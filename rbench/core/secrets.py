"""Keeping secrets out of logs, params and messages."""

from __future__ import annotations

import re
from urllib.parse import unquote, urlsplit, urlunsplit

PYSERINI_PLACEHOLDER_KEY = "unused-by-rbench"  # pyserini builds an OpenAI client at import


def redact(text: str) -> str:
    """``text`` with the password of every ``scheme://user:password@host`` replaced by ``***``."""
    return re.sub(r"(://[^/\s:@]*):[^/\s@]*@", r"\1:***@", text)


def split_credentials(url: str) -> tuple[str, tuple[str, str] | None]:
    """``url`` without its ``user:password@`` part, and that (user, password) pair (None when absent).

    Libraries print and store the URLs they are given (MLflow's "View run ... at" lines, link
    artifacts, error messages): they get the bare URL, and the credentials travel apart.
    """
    parts = urlsplit(url)
    if not parts.scheme or "@" not in parts.netloc:
        return url, None
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=host)), (unquote(parts.username or ""), unquote(parts.password or ""))
