"""Names in MLflow metric keys, escaped reversibly: MLflow refuses most punctuation in a key, and
replacing it (``my,data`` and ``my_data`` both as ``my_data``) made two datasets share one key.

A name of letters, digits, ``_``, ``-``, ``/`` and spaces without ``__`` stays as it is (``fetaqa``,
``beir/scifact``, ``dense-minilm``); any other is written with each character outside letters, digits,
``-``, ``/`` and spaces (``_`` and ``.`` included) as ``__x<hex>_``, so an escaped name never holds a
``.`` (the key's separator) and never looks like a plain one."""

from __future__ import annotations

import re

PLAIN = re.compile(r"[\w\-/ ]+")
KEPT = re.compile(r"[^\W_]|[\-/ ]")
ESCAPE = re.compile(r"__x([0-9a-f]+)_")


def key_part(name: str) -> str:
    """``name`` as one ``.``-separated part of an MLflow metric key (see the module)."""
    if PLAIN.fullmatch(name) and "__" not in name:
        return name
    return "".join(c if KEPT.fullmatch(c) else f"__x{ord(c):x}_" for c in name)


def name_of(part: str) -> str:
    """The name :func:`key_part` wrote as ``part``."""
    return ESCAPE.sub(lambda m: chr(int(m.group(1), 16)), part) if "__x" in part else part
