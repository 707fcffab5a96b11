"""Query rewriting by an LLM: decomposition into sub-queries, keyword queries with a
master query, and answer-like expansion. The ``rewrite`` stage runs this over a query set
so that the LLM is asked once per query, whatever retrieves with the rewrites later."""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Callable, Mapping

import pyarrow as pa
from pydantic import BaseModel, ConfigDict, Field, StrictInt, model_validator

from rbench.core.errors import ConfigError
from rbench.core.identity import code_digest
from rbench.llm.client import LLM
from rbench.llm.config import LLMConfig, Sampling
from rbench.llm.parse import Parsed, parse_lines, parse_passage, parse_queries
from rbench.llm.prompts import Prompt, load_prompt, parse_prompt

Parser = Callable[[str, str, int], Parsed]
"""``parser(raw answer, question, limit) -> Parsed``: how one kind of rewrite reads an answer."""
_KINDS: dict[str, Parser] = {}


def rewrite_kind(name: str) -> Callable[[Parser], Parser]:
    """Register the parser of rewrite kind ``name`` (a decorator); an LLM method registers its
    own kind in its own module."""

    def register(parser: Parser) -> Parser:
        existing = _KINDS.get(name)
        if existing is not None and (existing.__module__, existing.__qualname__) != (parser.__module__,
                                                                                     parser.__qualname__):
            raise ConfigError(f"two parsers for rewrite kind {name!r}: {existing.__module__}.{existing.__qualname__} "
                              f"and {parser.__module__}.{parser.__qualname__}")
        _KINDS[name] = parser
        return parser

    return register


@rewrite_kind("decompose")
def _decompose(raw: str, question: str, limit: int) -> Parsed:
    return parse_queries(raw, question, limit)


@rewrite_kind("decompose_lines")
def _decompose_lines(raw: str, question: str, limit: int) -> Parsed:
    return parse_lines(raw)


@rewrite_kind("multi_query")
def _multi_query(raw: str, question: str, limit: int) -> Parsed:
    parsed = parse_queries(raw, question, limit)
    if parsed.master is None:
        parsed.master = question
        parsed.status = "repaired" if parsed.status == "ok" else parsed.status
    return parsed


@rewrite_kind("expand")
def _expand(raw: str, question: str, limit: int) -> Parsed:
    return parse_passage(raw, question)


REWRITE_SCHEMA = pa.schema([("query_id", pa.string()), ("text", pa.string()), ("queries", pa.list_(pa.string())),
                            ("master", pa.string()), ("raw", pa.string()), ("status", pa.string())])


class RewriteSpec(BaseModel):
    """One rewriting of a query set: the kind (a registered parser, and the module that
    registered it, which a worker imports and whose code is in the key), the LLM, the prompt
    file's text (so any worker can run it) and the generation settings."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: str
    parser_module: str = ""
    llm: LLMConfig
    prompt_source: str
    prompt_text: str
    max_queries: StrictInt = Field(4, ge=1, le=16)
    sampling: Sampling = Sampling()

    @model_validator(mode="after")
    def _registered(self) -> "RewriteSpec":
        parser = parser_of(self.kind, self.parser_module)
        if not self.parser_module:
            object.__setattr__(self, "parser_module", parser.__module__)
        return self

    @classmethod
    def of(cls, kind: str, llm: LLMConfig, prompt: str, **options: Any) -> "RewriteSpec":
        """The spec for a prompt given by built-in name or path (checked for its variables)."""
        parser_of(kind)
        loaded = load_prompt(prompt, {"question"})
        return cls(kind=kind, llm=llm, prompt_source=loaded.source, prompt_text=loaded.text, **options)

    def prompt(self) -> Prompt:
        """The prompt, from the text carried in the spec."""
        return parse_prompt(self.prompt_text, self.prompt_source)

    def key_view(self) -> dict[str, Any]:
        """What the rewrites depend on (not where the prompt file was, nor runtime settings)."""
        view = self.model_dump(mode="json", exclude={"prompt_source", "llm", "parser_module"})
        llm = self.llm.key_view() | ({"context_tokens": self.llm.context_tokens} if self.sampling.cap_to_context else {})
        return {**view, "llm": llm, "parser": code_digest(self.parser_module)}


@dataclass(frozen=True)
class Rewritten:
    """The rewrites of one query: the queries, the master query (``multi_query``), the
    LLM's raw output and the parse status."""

    queries: tuple[str, ...]
    master: str | None
    raw: str
    status: str


def parser_of(kind: str, module: str = "") -> Parser:
    """The parser registered for ``kind``, importing ``module`` (where it registers) when this
    process has not; a ConfigError lists the known kinds otherwise."""
    if kind not in _KINDS and module:
        importlib.import_module(module)
    try:
        return _KINDS[kind]
    except KeyError:
        raise ConfigError(f"unknown rewrite kind {kind!r}; known kinds: {sorted(_KINDS)} (register a parser with "
                          "@rewrite_kind)") from None


def parse(kind: str, raw: str, question: str, limit: int) -> Parsed:
    """Parse one raw answer of ``kind``."""
    return parser_of(kind)(raw, question, limit)


def rewrite(spec: RewriteSpec, queries: Mapping[str, str], llm: LLM) -> dict[str, Rewritten]:
    """Rewrite every query (one LLM call each, through ``llm``'s cache); count parse outcomes."""
    prompt = spec.prompt()
    ids = list(queries)
    messages = [prompt.render(question=queries[q], max_queries=str(spec.max_queries)) for q in ids]
    answers = llm.chat_one(messages, spec.sampling)
    out = {}
    for qid, raw in zip(ids, answers):
        parsed = parser_of(spec.kind, spec.parser_module)(raw, queries[qid], spec.max_queries)
        llm.accounting.parsed(parsed.status)
        out[qid] = Rewritten(tuple(parsed.items), parsed.master, raw, parsed.status)
    return out


def rewrites_table(queries: Mapping[str, str], rewritten: Mapping[str, Rewritten]) -> pa.Table:
    """The rewrite stage's output rows."""
    ids = list(queries)
    return pa.table({
        "query_id": ids, "text": [queries[q] for q in ids], "queries": [list(rewritten[q].queries) for q in ids],
        "master": [rewritten[q].master for q in ids], "raw": [rewritten[q].raw for q in ids],
        "status": [rewritten[q].status for q in ids],
    }, schema=REWRITE_SCHEMA)


def read_rewrites(table: pa.Table) -> dict[str, tuple[str, Rewritten]]:
    """``query_id -> (query text, Rewritten)`` from a rewrite table."""
    rows = table.to_pylist()
    return {r["query_id"]: (r["text"], Rewritten(tuple(r["queries"]), r["master"], r["raw"], r["status"]))
            for r in rows}
