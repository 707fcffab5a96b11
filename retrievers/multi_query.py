"""The MS MARCO v2.1 multi-query pipeline: the LLM writes 2-8 keyword queries and one master
query; each query is optionally expanded with synonyms; every query searches BM25; hits
are collapsed to one object per document and fused by RRF; the top ``ce_candidates`` are
rescored by a cross-encoder against the master query down to ``ce_keep``; the LLM sees the
kept documents' titles and first words and selects those to read. Final order: the
selected documents, the rest of the kept ones in cross-encoder order, then the remaining
fused candidates."""

from __future__ import annotations

import hashlib
import importlib.util
import re
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping, Sequence

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PositiveInt,
    StrictInt,
    field_validator,
    model_validator,
)

from rbench.core.configfile import PathOrName
from rbench.core.errors import ConfigError
from rbench.evaluation.runs_fusion import fuse_ranking
from rbench.llm.config import LLMConfig, Sampling
from rbench.llm.prompts import DocumentsPrompt, QuestionPrompt
from rbench.retrievers.base import RETRIEVERS, FirstStage, RetrieverSpec, Run
from rbench.retrievers.llm_common import (
    LLMComposite,
    collapse_documents,
    ranked,
    search_many,
)
from rbench.retrievers.rerankers import RerankerParams, make_scorer, reranker_identity

WORD = re.compile(r"\w+")


@lru_cache(maxsize=None)
def read_synonyms(path: str) -> dict[str, tuple[str, ...]]:
    """A synonym map file: one ``term: synonym, synonym`` per line; ``#`` starts a comment."""
    synonyms: dict[str, tuple[str, ...]] = {}
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        term, sep, rest = line.partition(":")
        values = tuple(v.strip() for v in rest.split(",") if v.strip())
        if not sep or not term.strip() or not values:
            raise ConfigError(f"{path}:{number}: expected 'term: synonym, synonym', got {line!r}")
        synonyms[term.strip().lower()] = values
    return synonyms


def wordnet_synonyms(term: str) -> tuple[str, ...]:
    """Synonyms of ``term`` from WordNet (nltk with its ``wordnet`` data)."""
    from nltk.corpus import wordnet

    try:
        names = [lemma.name().replace("_", " ") for synset in wordnet.synsets(term) for lemma in synset.lemmas()]
    except LookupError:
        raise ConfigError("synonyms: wordnet needs the WordNet data: python -m nltk.downloader wordnet") from None
    return tuple(dict.fromkeys(n for n in names if n.lower() != term))


class MultiQueryParams(BaseModel):
    """Query writing, synonym expansion, BM25 fan-out, cross-encoder cut and LLM selection."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    llm: LLMConfig
    """The LLM that writes the queries and selects the documents to read."""
    prompt: QuestionPrompt = "multi_query"
    """The prompt that writes the keyword queries and the master query."""
    max_queries: StrictInt = Field(4, ge=2, le=8)
    """The most keyword queries kept (2 to 8)."""
    max_tokens: PositiveInt = 160
    """The most tokens the LLM writes per answer."""
    synonyms: PathOrName | None = Field(None, description="'wordnet' or a file of 'term: synonym, synonym' lines")
    max_synonyms: StrictInt = Field(2, ge=1)
    """With ``synonyms``: synonyms added per word of each query."""
    first_stage: RetrieverSpec = Field(default_factory=lambda: RetrieverSpec(name="bm25"))
    """The retriever every query searches."""
    rrf_k: float = Field(60, ge=0)
    """The RRF constant of the fusion of the queries' runs."""
    cross_encoder: RerankerParams
    """The cross-encoder that rescores the fused candidates against the master query."""
    ce_candidates: PositiveInt = 600
    """Fused candidates the cross-encoder rescores."""
    ce_keep: PositiveInt = 75
    """How many the cross-encoder keeps for the LLM's selection."""
    select_prompt: DocumentsPrompt = "select_read"
    """The prompt in which the LLM selects the documents to read."""
    select_max: PositiveInt = 20
    """The most documents the LLM may select."""
    snippet_chars: PositiveInt = 200
    """Characters of each document (its title and first words) shown to the LLM."""

    @field_validator("synonyms")
    @classmethod
    def _synonyms(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if value == "wordnet":
            if importlib.util.find_spec("nltk") is None:
                raise ValueError("synonyms: wordnet needs nltk: pip install nltk && python -m nltk.downloader wordnet")
            return value
        path = Path(value).expanduser()
        if not path.is_file():
            raise ValueError(f"synonyms file {value!r} does not exist (or use 'wordnet')")
        read_synonyms(str(path.resolve()))
        return str(path.resolve())

    @model_validator(mode="after")
    def _cut(self) -> "MultiQueryParams":
        if self.ce_keep > self.ce_candidates:
            raise ValueError(f"ce_keep {self.ce_keep} is larger than ce_candidates {self.ce_candidates}")
        return self


@RETRIEVERS.register
class MultiQuery(FirstStage, LLMComposite):
    """LLM keyword queries (+ synonyms) -> BM25 each -> doc collapse + RRF -> cross-encoder
    against the master query -> LLM selection of documents to read."""

    name = "multi_query"
    description = "LLM writes 2-8 BM25 queries + a master query; synonyms; RRF over doc-collapsed runs; " \
                  "cross-encoder cut; LLM selects documents"
    conformance = {"": {"llm": "$SMOLLM2", "first_stage": {"name": "bm25s"}, "max_tokens": 48, "ce_candidates": 6,
                        "ce_keep": 4, "select_max": 3, "cross_encoder": {"model": "$TINY_CROSS_ENCODER"}}}
    Params = MultiQueryParams
    version = 2

    def __init__(self, params=None):
        super().__init__(params)
        self._scorer = make_scorer(self.params.cross_encoder)

    def own_rewrites(self) -> list:
        from rbench.llm.rewrite import RewriteSpec

        p = self.params
        return [RewriteSpec.of("multi_query", p.llm, p.prompt, max_queries=p.max_queries,
                               sampling=Sampling(max_tokens=p.max_tokens))]

    def own_digests(self) -> dict[str, str]:
        digests = super().own_digests()
        if self.params.synonyms not in (None, "wordnet"):
            digests["synonyms"] = hashlib.sha256(Path(self.params.synonyms).read_bytes()).hexdigest()
        return digests

    def model_identities(self) -> list[str]:
        return [*super().model_identities(), reranker_identity(self.params.cross_encoder)]

    def open(self, folders: Sequence[Path], corpus: Path) -> None:
        super().open(folders, corpus)
        self._scorer.load()

    def expand(self, query: str) -> str:
        """``query`` followed by up to ``max_synonyms`` synonyms of each of its words."""
        if self.params.synonyms is None:
            return query
        added = []
        for word in dict.fromkeys(w.lower() for w in WORD.findall(query)):
            found = wordnet_synonyms(word) if self.params.synonyms == "wordnet" else \
                read_synonyms(self.params.synonyms).get(word, ())
            added += [s for s in found[:self.params.max_synonyms] if s.lower() not in query.lower()]
        return " ".join([query, *added])

    def search(self, queries: Mapping[str, str], k: int) -> Run:
        from rbench.llm.budget import clip
        from rbench.llm.listwise import numbered
        from rbench.llm.parse import parse_selection
        from rbench.llm.prompts import load_prompt

        p = self.params
        rewritten = self.rewritten(0, queries)
        asked = {q: [self.expand(s) for s in rewritten[q].queries] for q in queries}
        runs = search_many(self._first, asked, p.ce_candidates, self._rows)
        fused = {q: fuse_ranking([collapse_documents(h, self._doc_of) for h in runs[q]], "rrf", p.rrf_k)
                 for q in queries}
        masters = {q: rewritten[q].master or queries[q] for q in queries}
        scored = self._scorer.rescore({q: (masters[q], [o for o, _ in fused[q][:p.ce_candidates]]) for q in queries},
                                      self._texts)
        kept = {q: [o for o, _ in scored[q][:p.ce_keep]] for q in queries}
        ids = [q for q in queries if kept[q]]
        prompt = load_prompt(p.select_prompt)
        llm = self.llm(p.llm)
        sampling = Sampling(max_tokens=4 * p.select_max + 16)
        messages = []
        for q in ids:
            fitted, count = llm.fit(lambda texts, q=q: prompt.render(question=queries[q], k=str(p.select_max),
                                                                     documents=numbered(texts)),
                                    [f"{self._title_of.get(o) or self._doc_of[o]} (id {self._doc_of[o]}): "
                                     f"{clip(self._texts[o], p.snippet_chars)}" for o in kept[q]],
                                    sampling, f"the selection prompt of query {q!r}")
            kept[q] = kept[q][:count]
            messages.append(fitted)
        selecting = [q for q in ids if kept[q]]
        answers = dict(zip(selecting, llm.chat_one([m for q, m in zip(ids, messages) if kept[q]], sampling)))
        run = {}
        for q in queries:
            chosen = []
            if q in answers:
                parsed = parse_selection(answers[q], len(kept[q]), p.select_max)
                llm.accounting.parsed(parsed.status)
                chosen = [kept[q][i] for i in parsed.items]
            head = chosen + [o for o in kept[q] if o not in set(chosen)]
            run[q] = ranked(head + [o for o, _ in fused[q] if o not in set(head)])[:k]
        return run

    def stats(self) -> dict[str, Any]:
        return {**super().stats(), **self._scorer.stats()}
