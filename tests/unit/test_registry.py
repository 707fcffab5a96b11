"""Registries: filled by registration and entry points; unknown names, clashes and broken
plugins are named errors."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from importlib.metadata import EntryPoint

import pytest

import rbench.core.registry as registry_module
from rbench.core.errors import ConfigError
from rbench.core.registry import Registry
from rbench.dataset_adapters.base import ADAPTERS, Adapter
from rbench.retrievers.base import RETRIEVERS, Retriever


class A:
    name = "a"


class B:
    name = "a"


def _registry(monkeypatch, *eps: EntryPoint) -> Registry:
    monkeypatch.setattr(registry_module, "entry_points", lambda group: [e for e in eps if e.group == group])
    return Registry("widget", package="rbench.core", group="rbench.widgets", hint="See the README.")


def test_registration_lookup_and_unknown_names(monkeypatch):
    reg = _registry(monkeypatch)
    assert reg.register(A) is A
    assert reg.get("a") is A and "a" in reg and reg.names() == ["a"]
    with pytest.raises(ConfigError, match=r"unknown widget 'b'; known widgets: \['a'\]. See the README."):
        reg.get("b")


def test_two_components_with_one_name_are_refused(monkeypatch):
    reg = _registry(monkeypatch)
    reg.register(A)
    with pytest.raises(ConfigError, match="two widgets are named 'a'.*test_registry.A and .*test_registry.B"):
        reg.register(B)


def test_entry_points_add_components_and_a_broken_one_is_named(monkeypatch):
    good = EntryPoint(name="a", value="tests.unit.test_registry:A", group="rbench.widgets")
    assert _registry(monkeypatch, good).get("a") is A
    broken = EntryPoint(name="gone", value="no_such_package_x:Thing", group="rbench.widgets")
    with pytest.raises(ConfigError, match=r"entry point 'gone' \(no_such_package_x:Thing, group rbench.widgets\) "
                                          r"failed to load: ModuleNotFoundError"):
        _registry(monkeypatch, broken).names()


def _defined(package: str, base: type) -> set[type]:
    """The concrete subclasses of ``base`` (those with a ``name``) defined in ``package``'s modules."""
    found = set()
    for info in pkgutil.iter_modules(importlib.import_module(package).__path__, f"{package}."):
        module = importlib.import_module(info.name)
        found |= {c for c in vars(module).values() if isinstance(c, type) and issubclass(c, base)
                  and c.__module__ == module.__name__ and not inspect.isabstract(c) and "name" in vars(c)}
    return found


def test_every_builtin_registers_itself():
    """Each retriever and adapter class of the package is registered under its own name (a class
    that forgets the decorator is named), and a name that is not a dataset points to ``jsonl``."""
    for registry, package, base in ((RETRIEVERS, "rbench.retrievers", Retriever),
                                    (ADAPTERS, "rbench.dataset_adapters", Adapter)):
        defined = _defined(package, base)
        assert len(defined) >= 9
        unregistered = sorted(f"{c.__module__}.{c.__name__}" for c in defined if dict(registry.items()).get(c.name) is not c)
        assert not unregistered, f"not registered: {unregistered}"
    with pytest.raises(ConfigError, match="For your own files use adapter 'jsonl'"):
        ADAPTERS.get("my-data")


def test_params_are_parsed_once_and_shared_so_they_must_be_immutable():
    from rbench.config import parse_config

    raw = {"datasets": [{"name": "fetaqa"}], "retrievers": [{"name": "dense", "params": {"model": "minilm"}}]}
    first, second = parse_config(raw).retrievers[0], parse_config(raw).retrievers[0]
    assert first.typed_params() is second.typed_params() and first == second
    assert first.build().params is first.typed_params()
    assert all(cls.Params.model_config.get("frozen") for _, cls in RETRIEVERS.items())


def test_a_failed_load_is_retried_not_half_used(monkeypatch):
    broken = EntryPoint(name="gone", value="no_such_package_x:Thing", group="rbench.widgets")
    reg = _registry(monkeypatch, broken)
    with pytest.raises(ConfigError, match="failed to load"):
        reg.names()
    with pytest.raises(ConfigError, match="failed to load"):  # not an empty registry the second time
        reg.get("a")
