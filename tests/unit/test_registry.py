"""Registries: filled by registration and entry points; unknown names, clashes and broken
plugins are named errors."""

from __future__ import annotations

from importlib.metadata import EntryPoint

import pytest

import rbench.core.registry as registry_module
from rbench.core.errors import ConfigError
from rbench.core.registry import Registry
from rbench.retrievers.base import RETRIEVERS
from rbench.tasks.datasets.base import ADAPTERS


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


def test_every_builtin_registers_itself():
    assert {"bm25", "bm25s", "dense", "rerank", "fusion", "decompose", "multi_query", "xrr2", "llm_rerank", "react",
            "arm", "ngrams"} <= set(RETRIEVERS.names())
    assert {"fetaqa", "ottqa", "tabfact", "arm", "target", "beir", "jsonl"} <= set(ADAPTERS.names())
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
