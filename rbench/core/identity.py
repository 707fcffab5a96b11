"""Code identity for cache keys, taken from the code itself.

A component's digest hashes the source of every module of the ``rbench`` package that it
imports, directly or through others, at module level or inside functions (its import
closure). Any edit that can change what the component writes therefore changes its key,
without anyone remembering to bump a number; a human ``version`` stays for intent. What is
composed only at run time (a first-stage retriever named in params) is added by the caller.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import threading
from functools import lru_cache
from pathlib import Path
from typing import Callable, Iterable

PACKAGE = "rbench"
Locate = Callable[[str], "Path | None"]
_DIGESTS = threading.Lock()
"""Held while a digest is computed: once per process and set of modules, whatever the threads. Two
threads parsing sources at once can fail in CPython 3.11's parser ("AST constructor recursion
depth mismatch"), and would both compute what one can."""


@lru_cache(maxsize=None)
def installed_file(name: str) -> Path | None:
    """The source file of module ``name`` as Python would import it, or None (not a module,
    a name inside a module, or not a Python source)."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, AttributeError, ValueError):
        return None
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        return None
    return Path(spec.origin)


def imported_modules(name: str, path: Path, locate: Locate) -> set[str]:
    """The package's modules that module ``name`` (source ``path``) imports anywhere in its code."""
    is_package = path.name == "__init__.py"
    targets: set[str] = set()
    for node in ast.walk(ast.parse(path.read_bytes(), str(path))):
        if isinstance(node, ast.Import):
            targets |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = name.split(".")
                parts = parts[: len(parts) - node.level + (1 if is_package else 0)]
                base = ".".join(parts + ([node.module] if node.module else []))
            targets |= {base} | {f"{base}.{a.name}" for a in node.names}
    found = set()
    for target in targets:
        if target != PACKAGE and not target.startswith(f"{PACKAGE}."):
            continue
        parts = target.split(".")
        for i in range(len(parts), 0, -1):
            candidate = ".".join(parts[:i])
            if locate(candidate) is not None:
                found.add(candidate)
                break
    return found


def closure(modules: Iterable[str], locate: Locate = installed_file) -> dict[str, Path]:
    """Every package module reachable from ``modules`` by imports, with its source file."""
    seen: dict[str, Path] = {}
    todo = list(modules)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        path = locate(name)
        if path is None:
            raise ValueError(f"{name} is not a module of the {PACKAGE} package")
        seen[name] = path
        todo += [m for m in imported_modules(name, path, locate) if m not in seen]
    return seen


def code_digest(*modules: str, locate: Locate = installed_file) -> str:
    """A digest of the sources of the import closure of ``modules`` (16 hex digits)."""
    with _DIGESTS:
        if locate is installed_file:
            return _installed_digest(tuple(sorted(set(modules))))
        return _digest(closure(modules, locate))


@lru_cache(maxsize=None)
def _installed_digest(modules: tuple[str, ...]) -> str:
    return _digest(closure(modules))


def _digest(files: dict[str, Path]) -> str:
    h = hashlib.sha256()
    for name in sorted(files):
        h.update(name.encode() + b"\0" + hashlib.sha256(files[name].read_bytes()).digest())
    return h.hexdigest()[:16]
