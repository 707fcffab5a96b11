"""Code identity for cache keys, taken from the code itself.

A component's digest hashes the source of every module of the ``rbench`` package that it
imports, directly or through others, at module level or inside functions (its import
closure). Any edit that can change what the component writes therefore changes its key,
without anyone remembering to bump a number; a human ``version`` stays for intent. What is
composed only at run time (a first-stage retriever named in params) is added by the caller.
A class defined where no module file holds it (a notebook cell, a script run as ``__main__``)
is digested from its code objects instead (:func:`object_digest`).
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import inspect
import sys
import threading
import types
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Iterable

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


def importable(module: str) -> bool:
    """Whether ``module`` has a source file Python would import it from (a notebook's or a script's
    ``__main__`` has none that another process could import)."""
    return installed_file(module) is not None


def class_digest(cls: type) -> str:
    """The code identity of a component class: the digest of its module's import closure, or, for a
    class defined in a notebook or a script's ``__main__``, :func:`object_digest` of the class."""
    return code_digest(cls.__module__) if importable(cls.__module__) else object_digest(cls)


def object_digest(obj: Any) -> str:
    """A digest (16 hex digits) of a class or function defined where no importable module holds
    it: the code of its functions (bytecode, constants and names, nested code included; not file
    names or line numbers, so re-running an unchanged cell keeps it), its plain attributes, the
    functions and classes of its own module that it names, followed in turn, the plain values
    (numbers, strings, tuples) of its module that they name, and the import closure of the
    ``rbench`` modules that define its bases or that it names (a module, or a function or class of
    one). Other objects it reads from its module (a dict, an instance) and other packages' code are
    not followed: bump the class's ``version`` when one of those changes."""
    h = hashlib.sha256()
    namespace = vars(sys.modules[obj.__module__]) if obj.__module__ in sys.modules else {}
    ours = {b.__module__ for b in getattr(obj, "__mro__", ()) if b.__module__.startswith(f"{PACKAGE}.")}
    seen: set[int] = set()
    todo = [obj]
    while todo:
        item = todo.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        h.update(f"{getattr(item, '__qualname__', '')}\0".encode())
        for code in _code_objects(item):
            h.update(_code_bytes(code))
            for name in _names(code):
                value = namespace.get(name)
                if (inspect.isfunction(value) or inspect.isclass(value)) and value.__module__ == obj.__module__:
                    todo.append(value)
                elif isinstance(value, _PLAIN):
                    h.update(f"{name}={value!r}\0".encode())
                elif isinstance(value, types.ModuleType) and value.__name__.startswith(PACKAGE):
                    ours.add(value.__name__)
                elif inspect.isfunction(value) or inspect.isclass(value):
                    ours |= {value.__module__} if value.__module__.startswith(f"{PACKAGE}.") else set()
        if inspect.isclass(item):
            for name, value in sorted(vars(item).items()):
                if isinstance(value, _PLAIN):
                    h.update(f"{name}={value!r}\0".encode())
                elif inspect.isclass(value) and value.__module__ == obj.__module__:
                    todo.append(value)
    h.update(code_digest(*sorted(ours)).encode() if ours else b"")
    return h.hexdigest()[:16]


_PLAIN = (str, bytes, int, float, bool, tuple, frozenset, type(None))


def _names(code: types.CodeType) -> list[str]:
    """The global names ``code`` and the code nested in it read."""
    nested = [n for c in code.co_consts if isinstance(c, types.CodeType) for n in _names(c)]
    return [*code.co_names, *nested]


def _code_objects(item: Any) -> list[types.CodeType]:
    if inspect.isfunction(item):
        return [item.__code__]
    if not inspect.isclass(item):
        return []
    codes = []
    for _, value in sorted(vars(item).items()):
        value = value.__func__ if isinstance(value, (classmethod, staticmethod)) else value
        value = value.fget if isinstance(value, property) and value.fget else value
        if inspect.isfunction(value):
            codes.append(value.__code__)
    return codes


def _code_bytes(code: types.CodeType) -> bytes:
    consts = b"".join(_code_bytes(c) if isinstance(c, types.CodeType) else repr(c).encode() + b"\0"
                      for c in code.co_consts)
    return code.co_code + consts + "\0".join((*code.co_names, *code.co_varnames)).encode() + b"\1"
