"""A rewrite kind is registered beside the method that uses it, and is part of its keys."""

from __future__ import annotations

import pytest

from rbench.core.errors import ConfigError
from rbench.llm.config import LLMConfig
from rbench.llm.parse import Parsed
from rbench.llm.rewrite import RewriteSpec, parse, rewrite_kind

LLM = LLMConfig(backend="openai", base_url="http://localhost:1/v1", model="m")


@rewrite_kind("first_line")
def first_line(raw: str, question: str, limit: int) -> Parsed:
    lines = [line.strip() for line in raw.splitlines() if line.strip()]
    return Parsed(lines[:1] or [question], "ok" if lines else "fallback")


def test_a_registered_kind_parses_and_names_its_module():
    spec = RewriteSpec.of("first_line", LLM, "decompose")
    assert spec.parser_module == __name__
    assert parse("first_line", "\n  alpha\nbeta", "q", 1).items == ["alpha"]
    assert spec.key_view()["parser"] != RewriteSpec.of("decompose", LLM, "decompose").key_view()["parser"]


def test_builtin_kinds_keep_their_behaviour():
    assert parse("multi_query", "1. a b\n2. c d", "the question", 4).master == "the question"
    assert parse("expand", "A passage about volcanoes.", "q", 1).items


def test_an_unknown_kind_is_named():
    with pytest.raises(ConfigError, match=r"unknown rewrite kind 'nope'; known kinds: \[.*'decompose'"):
        RewriteSpec.of("nope", LLM, "decompose")


def test_two_parsers_for_one_kind_are_refused():
    with pytest.raises(ConfigError, match="two parsers for rewrite kind 'decompose'"):
        rewrite_kind("decompose")(first_line)
