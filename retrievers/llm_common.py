"""What the LLM-driven retrievers share: the LLM session and rewrite tables handed over by
the retrieve stage, rewrites computed on the spot when a retriever runs on its own, the
corpus texts, and merging of several runs per question."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal, Mapping, Sequence

import pyarrow.parquet as pq

from rbench.evaluation.runs_fusion import fuse_ranking
from rbench.retrievers.base import Composite, Hits
from rbench.retrievers.corpus import CorpusRows


def round_robin(runs: Sequence[Hits]) -> Hits:
    """Interleave runs rank by rank (first run first), each object once; scores are
    ``1 / position`` in the merged list."""
    merged, seen = [], set()
    for rank in range(max((len(r) for r in runs), default=0)):
        for hits in runs:
            if rank < len(hits) and hits[rank][0] not in seen:
                seen.add(hits[rank][0])
                merged.append(hits[rank][0])
    return [(oid, 1.0 / i) for i, oid in enumerate(merged, 1)]


def merge(runs: Sequence[Hits], method: Literal["rrf", "round_robin"], rrf_k: float,
          ties: Literal["id", "first_seen"] = "id") -> Hits:
    """One run from several (the sub-queries' runs of one question); equal RRF scores by id or in the
    order first met."""
    return fuse_ranking(runs, "rrf", rrf_k, ties=ties) if method == "rrf" else round_robin(runs)


def collapse_documents(hits: Hits, doc_of: Mapping[str, str]) -> Hits:
    """Keep the best object of each document (so that many segments of one do not dominate)."""
    seen, kept = set(), []
    for oid, score in hits:
        if doc_of[oid] not in seen:
            seen.add(doc_of[oid])
            kept.append((oid, score))
    return kept


def search_many(retriever, questions: Mapping[str, Sequence[str]], k: int,
                rows: CorpusRows | None = None) -> dict[str, list[Hits]]:
    """Search every query of every question in one call; per question, its queries' runs in
    order (their objects loaded into ``rows``)."""
    flat = {f"{q}\x1f{i}": text for q, texts in questions.items() for i, text in enumerate(texts)}
    run = retriever.search(flat, k) if flat else {}
    if rows is not None:
        rows.load_runs(run)
    return {q: [run.get(f"{q}\x1f{i}", []) for i in range(len(texts))] for q, texts in questions.items()}


def ranked(order: Sequence[str]) -> Hits:
    """An ordered list of objects as hits with descending scores ``1 / position``."""
    return [(oid, 1.0 / i) for i, oid in enumerate(order, 1)]


class LLMComposite(Composite):
    """A composite retriever that calls an LLM: subclasses list their ``own_rewrites`` and
    read them with :meth:`rewritten`; LLM calls go through :meth:`llm`, into the stage's
    call cache and accounting (without a stage: no cache, own accounting)."""

    uses_model = True
    native = True
    asks_llm = True

    def __init__(self, params=None):
        super().__init__(params)
        from rbench.llm.client import LLMSession

        self._session = LLMSession()
        self._tables: list[Path] = []
        self._loaded: dict[int, dict] = {}

    def bind_llm(self, session, tables: Sequence[Path]) -> None:
        self._session, self._tables, self._loaded = session, list(tables), {}

    @property
    def session(self):
        """The ``LLMSession`` this retriever's calls go through (its accounting counts them)."""
        return self._session

    def llm(self, config):
        """The model of ``config`` in this retriever's session."""
        return self._session.llm(config)

    def model_identities(self) -> list[str]:
        from rbench.llm.models import llm_identity

        return [llm_identity(self.params.llm), *super().model_identities()]

    def needs_gpu(self) -> bool:
        llm = self.params.llm
        in_process = llm.backend != "openai" and (llm.device is None or str(llm.device).startswith("cuda"))
        return in_process or any(c.needs_gpu() for c in self.components())

    def rewritten(self, index: int, queries: Mapping[str, str]) -> dict[str, Any]:
        """The rewrites of ``own_rewrites()[index]`` for ``queries``: from the stage's table
        where it holds the same query text, else asked now."""
        from rbench.llm.rewrite import read_rewrites, rewrite

        if index not in self._loaded:
            self._loaded[index] = read_rewrites(pq.read_table(self._tables[index])) if index < len(self._tables) else {}
        table = self._loaded[index]
        found = {q: table[q][1] for q, text in queries.items() if q in table and table[q][0] == text}
        missing = {q: text for q, text in queries.items() if q not in found}
        if missing:
            spec = self.own_rewrites()[index]
            found.update(rewrite(spec, missing, self.llm(spec.llm)))
        return found

    def open(self, folders: Sequence[Path], corpus: Path) -> None:
        super().open(folders, corpus)
        self._rows = CorpusRows(corpus, ["text", "doc_id", "page_title", "modality"])
        self._texts, self._doc_of, self._title_of = (self._rows.view(c) for c in ("text", "doc_id", "page_title"))

    def content_digests(self) -> dict[str, str]:
        return {**self.own_digests(), **super().content_digests()}

    def own_digests(self) -> dict[str, str]:
        """Digests of this retriever's own prompt files (and other content files)."""
        from rbench.llm.prompts import load_prompt

        return {field: load_prompt(getattr(self.params, field)).digest
                for field in type(self.params).model_fields if field.endswith("prompt")}
