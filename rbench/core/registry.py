"""Registries filled by registration: built-in components register themselves with a
decorator when their module is imported (every module of a package is imported on first
lookup), and other installed packages add theirs through an ``entry_points`` group."""

from __future__ import annotations

import difflib
import importlib
import pkgutil
import sys
import threading
from importlib.metadata import entry_points
from types import ModuleType
from typing import Callable, Generic, Iterator, TypeVar

from rbench.core.errors import ConfigError

T = TypeVar("T")


class Registry(Generic[T]):
    """Named components of one kind (``retriever``, ``dataset adapter``, ...).

    ``package`` is the dotted name of the package whose modules hold the built-ins;
    ``group`` is the entry-point group other packages declare theirs in (each entry point
    loads a component, or a module that registers some when imported).
    """

    def __init__(self, kind: str, package: str, group: str, key: Callable[[T], str] = lambda c: c.name,
                 hint: str = ""):
        self.kind, self.package, self.group, self._key, self.hint = kind, package, group, key, hint
        self._items: dict[str, T] = {}
        self._loaded = self._loading = False
        self._lock = threading.RLock()

    def register(self, component: T) -> T:
        """Register ``component`` under its name (usable as a class decorator)."""
        name = self._key(component)
        existing = self._items.get(name)
        if existing is not None and _where(existing) != _where(component):  # the same definition may register twice
            raise ConfigError(f"two {self.kind}s are named {name!r}: {_where(existing)} and {_where(component)}; "
                              "rename one")
        self._items[name] = component
        return component

    def _load(self) -> None:
        with self._lock:
            if self._loaded or self._loading:  # loading: a module being imported looked a name up
                return
            self._loading = True
            try:
                package = importlib.import_module(self.package)
                for info in pkgutil.iter_modules(package.__path__, f"{self.package}."):
                    importlib.import_module(info.name)
                for ep in entry_points(group=self.group):
                    try:
                        loaded = ep.load()
                    except Exception as e:
                        raise ConfigError(f"the {self.kind} entry point {ep.name!r} ({ep.value}, group {self.group}) "
                                          f"failed to load: {type(e).__name__}: {e}") from None
                    if not isinstance(loaded, ModuleType):
                        self.register(loaded)
                self._loaded = True  # only once complete: a failed load is retried, never half-used
            finally:
                self._loading = False

    def get(self, name: str) -> T:
        """The component registered as ``name``; a ConfigError lists the known names otherwise."""
        self._load()
        try:
            return self._items[name]
        except KeyError:
            hint = f" {self.hint}" if self.hint else ""
            close = difflib.get_close_matches(str(name).lower(), [n.lower() for n in self._items], n=1, cutoff=0.6)
            guess = next((f" Did you mean {n!r}?" for n in self._items if close and n.lower() == close[0]), "")
            known = sorted(self._items)
            plugin = "" if guess else (f" A {self.kind} of a plugin package is known once that package is installed in "
                                       f"the Python running rbench ({sys.executable}): pip install it there (its entry "
                                       f"points, group {self.group!r}, register it).")
            raise ConfigError(f"unknown {self.kind} {name!r};{guess} known {self.kind}s: {known}.{hint}{plugin}") \
                from None

    def names(self) -> list[str]:
        """Every registered name, sorted."""
        self._load()
        return sorted(self._items)

    def items(self) -> list[tuple[str, T]]:
        """``(name, component)`` pairs, sorted by name."""
        self._load()
        return sorted(self._items.items())

    def __contains__(self, name: object) -> bool:
        self._load()
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __getitem__(self, name: str) -> T:
        return self.get(name)


def _where(component) -> str:
    return f"{getattr(component, '__module__', '?')}.{getattr(component, '__qualname__', component)!s}"
