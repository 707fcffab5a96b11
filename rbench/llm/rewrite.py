"""Query rewriting by an LLM: decomposition into sub-queries, keyword queries with a
master query, and answer-like expansion. The ``rewrite`` stage runs this over a query set
so that the LLM is asked once per query, whatever retrieves with the rewrites later."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Mapping

import pyarrow as pa
from pydantic import BaseModel, ConfigDict, Field, StrictInt

from rbench.llm.client import LLM
from rbench.llm.config import LLMConfig, Sampling
from rbench.llm.parse import Parsed, parse_passage, parse_queries
from rbench.llm.prompts import Prompt, load_prompt, parse_prompt

Kind = Literal["decompose", "multi_query", "expand"]
REWRITE_SCHEMA = pa.schema([("query_id", pa.string()), ("text", pa.string()), ("queries", pa.list_(pa.string())),
                            ("master", pa.string()), ("raw", pa.string()), ("status", pa.string())])


class RewriteSpec(BaseModel):
    """One rewriting of a query set: the kind, the LLM, the prompt file's text (so any
    worker can run it) and the generation settings."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Kind
    llm: LLMConfig
    prompt_source: str
    prompt_text: str
    max_queries: StrictInt = Field(4, ge=1, le=16)
    sampling: Sampling = Sampling()

    @classmethod
    def of(cls, kind: Kind, llm: LLMConfig, prompt: str, **options: Any) -> "RewriteSpec":
        """The spec for a prompt given by built-in name or path (checked for its variables)."""
        loaded = load_prompt(prompt, {"question"})
        return cls(kind=kind, llm=llm, prompt_source=loaded.source, prompt_text=loaded.text, **options)

    def prompt(self) -> Prompt:
        """The prompt, from the text carried in the spec."""
        return parse_prompt(self.prompt_text, self.prompt_source)

    def key_view(self) -> dict[str, Any]:
        """What the rewrites depend on (not where the prompt file was, nor runtime settings)."""
        view = self.model_dump(mode="json", exclude={"prompt_source", "llm"})
        return {**view, "llm": self.llm.key_view()}


@dataclass(frozen=True)
class Rewritten:
    """The rewrites of one query: the queries, the master query (``multi_query``), the
    LLM's raw output and the parse status."""

    queries: tuple[str, ...]
    master: str | None
    raw: str
    status: str


def parse(kind: Kind, raw: str, question: str, limit: int) -> Parsed:
    """Parse one raw answer of ``kind``."""
    if kind == "expand":
        return parse_passage(raw, question)
    parsed = parse_queries(raw, question, limit)
    if kind == "multi_query" and parsed.master is None:
        parsed.master = question
        parsed.status = "repaired" if parsed.status == "ok" else parsed.status
    return parsed


def rewrite(spec: RewriteSpec, queries: Mapping[str, str], llm: LLM) -> dict[str, Rewritten]:
    """Rewrite every query (one LLM call each, through ``llm``'s cache); count parse outcomes."""
    prompt = spec.prompt()
    ids = list(queries)
    messages = [prompt.render(question=queries[q], max_queries=str(spec.max_queries)) for q in ids]
    answers = llm.chat_one(messages, spec.sampling)
    out = {}
    for qid, raw in zip(ids, answers):
        parsed = parse(spec.kind, raw, queries[qid], spec.max_queries)
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
