"""ARM (alignment-oriented LLM-based retrieval, arXiv 2501.18539), step by step:

1. keywords: the LLM lists keywords separated by ``|`` (``keyword_samples`` samples);
2. alignment (``ngram_alignment``): each keyword is rephrased by beam search constrained to
   n-grams of the corpus (the ``ngrams`` index of the LLM's tokenizer);
3. alignment retrieval: the ``max_ngrams`` most frequent sub-n-grams (stopwords removed)
   each search ``base`` for ``alignment_retrieval_k`` objects, the question searches
   ``dense`` for ``query_retrieval_k``; candidates are de-duplicated by text and get the
   relevance ``R = (cos + 1) / 2`` against the question;
4. expansion: ``expansion_steps`` rounds in which every new candidate adds its
   ``expansion_k_compatible`` nearest neighbours;
5. selection among ``mip_candidates`` taken rank by rank from each source in turn (the
   question's hits, each sub-n-gram's, the expansion's), so that aligned objects compete:
   ``mip`` picks ``mip_k_select`` by relevance plus pairwise compatibility
   ``w_sem cos + w_lex lexical`` (exactly, by ``rbench.arm.bnb``, or with OR-Tools),
   ``rerank`` keeps the reranker's best;
6. final selection (``final_selection``): the picked objects grouped into documents, the LLM
   names the documents that hold the evidence (``final_samples`` samples, unioned).

The run lists the chosen documents' objects first, then the other picked objects, then the
remaining candidates by relevance. Per-step seconds, MIP status, gap and solve time are
reported with the run."""

from __future__ import annotations

import contextlib
import re
import time
from collections import Counter
from typing import Any, Literal, Mapping, Sequence

import numpy as np
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PositiveInt,
    StrictBool,
    StrictInt,
    model_validator,
)

from rbench.llm.config import LLMConfig
from rbench.llm.prompts import DocumentsPrompt, QuestionPrompt, prompt_ref
from rbench.retrievers.base import RETRIEVERS, Retriever, RetrieverSpec, Run
from rbench.retrievers.llm_common import LLMComposite, ranked, round_robin
from rbench.retrievers.ngrams import NgramIndex
from rbench.retrievers.rerankers import RerankerParams, make_scorer, reranker_identity

KeywordPrompt = prompt_ref("question", "keyword")
STEPS = ("keywords", "alignment", "retrieval", "expansion", "selection", "final")
WORD = re.compile(r"\w+")


def _bm25s() -> RetrieverSpec:
    return RetrieverSpec(name="bm25s")


def _minilm() -> RetrieverSpec:
    return RetrieverSpec(name="dense", params={"model": "sentence-transformers/all-MiniLM-L6-v2"})


class ARMParams(BaseModel):
    """Every step of ARM, each configurable (defaults sized for a small model on CPU)."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    llm: LLMConfig
    """The LLM that writes keywords, rephrases them and makes the final selection."""
    base: RetrieverSpec = Field(default_factory=_bm25s)
    """The lexical retriever each aligned n-gram searches."""
    dense: RetrieverSpec = Field(default_factory=_minilm)
    """The dense retriever of the question's own hits; its vectors give relevance and compatibility."""
    keyword_prompt: QuestionPrompt = "arm_keywords"
    """The prompt that asks for the question's keywords."""
    max_keywords: PositiveInt = 8
    """The most keywords kept from an answer."""
    keyword_samples: PositiveInt = 1
    """How many answers the LLM gives for keywords (their keywords are merged)."""
    keyword_temperature: float = Field(0.0, ge=0, le=2)
    """The sampling temperature of those answers (0: greedy)."""
    ngram_alignment: StrictBool = True
    """Rephrase each keyword into n-grams of the corpus by constrained decoding (the transformers backend); false:
    search the keywords as written."""
    rephrase_prompt: KeywordPrompt = "arm_rephrase"
    """The prompt that rephrases one keyword."""
    keyword_rephrasing_beams: StrictInt = Field(3, ge=1, le=16)
    """Beams of the constrained decoding; each beam's n-gram is kept."""
    corpus_ngram_min_len: StrictInt = Field(1, ge=1, le=16)
    """The fewest of the LLM's tokens a rephrased n-gram has (fewer only where no corpus n-gram continues it)."""
    corpus_ngram_max_len: StrictInt = Field(5, ge=1, le=16)
    """The longest corpus n-gram, in the LLM's tokens (the n-gram table's window)."""
    max_ngrams: PositiveInt = 20
    """The most sub-n-grams of the rephrased keywords searched per question, the most frequent first."""
    alignment_retrieval_k: PositiveInt = 20
    """Hits per sub-n-gram from ``base``."""
    query_retrieval_k: PositiveInt = 80
    """Hits of the question from ``dense``."""
    expansion_steps: StrictInt = Field(1, ge=0, le=5)
    """Rounds of adding each candidate's nearest neighbours (by ``dense`` vectors) to the pool; 0: none."""
    expansion_k_compatible: PositiveInt = 5
    """Neighbours added per candidate and round."""
    selection: Literal["mip", "rerank"] = "mip"
    """How objects are picked from the pool: ``mip`` (relevance plus pairwise compatibility, OR-Tools or branch-and-
    bound) or ``rerank`` (a reranker)."""
    mip_k_select: PositiveInt = 10
    """How many objects the selection picks."""
    mip_candidates: StrictInt = Field(100, ge=2, le=500)
    """The pool's size for the selection: candidates taken round-robin from the question's and the n-grams' hits."""
    mip_formulation: Literal["degree", "quadratic", "reproduction"] = "degree"
    """``degree`` or ``quadratic`` (the same exact optimum) or ``reproduction`` (the ARM reproduction's model, a
    different problem); see ``rbench/arm/mip.py``."""
    mip_solver: Literal["bnb", "cp_sat", "scip"] = "bnb"
    """``bnb`` (rbench's exact branch-and-bound, not for ``reproduction``), or OR-Tools' ``cp_sat`` or ``scip``."""
    mip_time_limit: float = Field(5.0, gt=0, le=600)
    """Seconds per solve; a cut solve keeps its best feasible selection (counted as ``feasible`` with its gap)."""
    w_sem: float = Field(0.5, ge=0)
    """Weight of the cosine similarity of two objects' vectors in their compatibility."""
    w_lex: float = Field(0.5, ge=0)
    """Weight of the overlap of two table rows' cell values in their compatibility; 0 skips it."""
    rerank: RerankerParams | None = None
    """``selection: rerank``: the reranker."""
    final_selection: StrictBool = True
    """Let the LLM choose among the selected documents, which then rank first; false: the selection's order."""
    select_prompt: DocumentsPrompt = "arm_select"
    """The prompt of the final selection."""
    final_samples: PositiveInt = 1
    """How many answers the LLM gives for the final selection (their choices are merged)."""
    final_temperature: float = Field(0.0, ge=0, le=2)
    """The sampling temperature of those answers."""
    passage_chars: PositiveInt = 200
    """Characters of each object shown to the LLM in the final selection."""
    max_tokens: PositiveInt = 64
    """The most tokens the LLM writes per answer (keywords and final selection)."""

    @model_validator(mode="after")
    def _consistent(self) -> "ARMParams":
        if self.dense.name != "dense":
            raise ValueError(f"dense must be a dense retriever (its vectors give relevance and compatibility), "
                             f"got {self.dense.name!r}")
        if self.selection == "rerank" and self.rerank is None:
            raise ValueError("selection: rerank needs a rerank: {model: ...} reranker")
        if self.ngram_alignment and self.llm.backend != "transformers":
            raise ValueError("ngram_alignment constrains generation to corpus n-grams with the transformers "
                             f"backend; this llm uses {self.llm.backend!r}: set ngram_alignment: false or use "
                             "backend: transformers")
        if self.mip_solver == "bnb" and self.mip_formulation == "reproduction":
            raise ValueError("mip_solver: bnb solves the exact problem (mip_formulation degree or quadratic); "
                             "use mip_solver: cp_sat or scip for mip_formulation: reproduction")
        if self.corpus_ngram_min_len > self.corpus_ngram_max_len:
            raise ValueError(f"corpus_ngram_min_len {self.corpus_ngram_min_len} is above corpus_ngram_max_len "
                             f"{self.corpus_ngram_max_len}")
        return self


def sub_ngrams(phrases: Sequence[str], stopwords: frozenset[str], limit: int) -> list[str]:
    """The ``limit`` most frequent contiguous word n-grams of ``phrases`` after stopword
    removal (ties: longer first, then alphabetical)."""
    counts: Counter = Counter()
    for phrase in phrases:
        words = [w for w in WORD.findall(phrase.lower()) if w not in stopwords]
        counts.update({" ".join(words[i:j]) for i in range(len(words)) for j in range(i + 1, len(words) + 1)})
    return [g for g, _ in sorted(counts.items(), key=lambda item: (-item[1], -len(item[0].split()), item[0]))[:limit]]


def column_values(text: str) -> set[str] | None:
    """The cell values of a serialised table row (``title [SEP] [H] col : value , ...``), else None."""
    if "[H]" not in text:
        return None
    body = text.split("[SEP]", 1)[-1]
    return {cell.split(":", 1)[1].strip().lower() for cell in body.split(" , ") if ":" in cell} - {""}


def lexical(a: str, b: str, stopwords: frozenset[str]) -> float:
    """Jaccard similarity of the column values of two table rows; the overlap coefficient of
    their words otherwise."""
    va, vb = column_values(a), column_values(b)
    if va is not None and vb is not None:
        return len(va & vb) / len(va | vb) if va | vb else 0.0
    wa = set(WORD.findall(a.lower())) - stopwords
    wb = set(WORD.findall(b.lower())) - stopwords
    return len(wa & wb) / min(len(wa), len(wb)) if wa and wb else 0.0


@RETRIEVERS.register
class ARM(LLMComposite):
    """Keywords -> constrained n-gram alignment -> retrieval -> expansion -> MIP -> LLM selection."""

    name = "arm"
    description = ("ARM: LLM keywords, corpus-constrained n-gram alignment, alignment retrieval, neighbour "
                   "expansion, MIP (OR-Tools) or reranker selection, final LLM document selection")
    conformance = {"": {"llm": "$SMOLLM2", "dense": {"name": "dense", "params": {"model": "static-64d"}},
                        "max_keywords": 3, "keyword_rephrasing_beams": 2, "corpus_ngram_max_len": 3, "max_ngrams": 5,
                        "alignment_retrieval_k": 3, "query_retrieval_k": 3, "mip_k_select": 3, "mip_candidates": 6,
                        "max_tokens": 32}}
    Params = ARMParams
    version = 2

    def __init__(self, params=None):
        super().__init__(params)
        p = self.params
        self._base = p.base.build()
        self._dense = p.dense.build()
        self._ngrams = NgramIndex({"tokenizer": p.llm.model, "max_len": p.corpus_ngram_max_len}) \
            if p.ngram_alignment else None
        self._scorer = make_scorer(p.rerank) if p.selection == "rerank" else None
        self._seconds = dict.fromkeys(STEPS, 0.0)
        self._mip: Counter = Counter()
        self._mip_gap: list[float] = []
        self._mip_seconds: list[float] = []
        self._queries = 0

    def components(self) -> list[Retriever]:
        return [self._base, self._dense, *([self._ngrams] if self._ngrams is not None else [])]

    def model_identities(self) -> list[str]:
        own = [reranker_identity(self.params.rerank)] if self._scorer is not None else []
        return [*own, *super().model_identities()]

    def open(self, folders, corpus) -> None:
        super().open(folders, corpus)
        from rbench.core.imports import torch_before_scipy

        torch_before_scipy()
        from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

        self._modality = self._rows.view("modality")
        self._stopwords = frozenset(ENGLISH_STOP_WORDS)
        if self._scorer is not None:
            self._scorer.load()

    @contextlib.contextmanager
    def _step(self, step: str):
        """Time a step, and count its LLM calls and tokens under ``arm_<step>``."""
        started = time.perf_counter()
        try:
            with self.session.accounting.step(f"arm_{step}"):
                yield
        finally:
            self._seconds[step] += time.perf_counter() - started

    def search(self, queries: Mapping[str, str], k: int) -> Run:
        if not queries:
            return {}
        with self._step("keywords"):
            keywords = self._keywords(queries)
        with self._step("alignment"):
            phrases = self._align(queries, keywords) if self._ngrams is not None else keywords
        with self._step("retrieval"):
            pools, sources, relevance = self._retrieve(queries, phrases)
        with self._step("expansion"):
            self._expand(pools, sources)
        with self._step("selection"):
            picked = self._select(queries, pools, sources, relevance)
        with self._step("final"):
            chosen = self._final(queries, picked) if self.params.final_selection else {q: [] for q in queries}
        self._queries += len(queries)
        run = {}
        for q in queries:
            by_relevance = sorted(pools[q], key=lambda o: -relevance[q][o])
            order = list(dict.fromkeys([o for doc in chosen[q] for o in picked[q] if self._doc_of[o] == doc]
                                       + picked[q] + by_relevance))
            run[q] = ranked(order)[:k]
        return run

    def _keywords(self, queries: Mapping[str, str]) -> dict[str, list[str]]:
        from rbench.llm.config import Sampling
        from rbench.llm.parse import parse_keywords
        from rbench.llm.prompts import load_prompt

        p = self.params
        llm = self.llm(p.llm)
        prompt = load_prompt(p.keyword_prompt)
        sampling = Sampling(temperature=p.keyword_temperature, max_tokens=p.max_tokens)
        answers = llm.chat([prompt.render(question=text, max_keywords=str(p.max_keywords))
                            for text in queries.values()], sampling, samples=p.keyword_samples)
        out = {}
        for q, samples in zip(queries, answers):
            found: list[str] = []
            for answer in samples:
                parsed = parse_keywords(answer, p.max_keywords)
                llm.accounting.parsed(parsed.status)
                found += [kw for kw in parsed.items if kw.lower() not in {f.lower() for f in found}]
            out[q] = found or [queries[q]]
        return out

    def _align(self, queries: Mapping[str, str], keywords: dict[str, list[str]]) -> dict[str, list[str]]:
        from rbench.llm.config import Sampling
        from rbench.llm.constrain import Constraint
        from rbench.llm.prompts import load_prompt

        p = self.params
        llm = self.llm(p.llm)
        prompt = load_prompt(p.rephrase_prompt)
        constraint = Constraint(kind="ngrams", table=str(self._ngrams.table_path), digest=self._ngrams.digest,
                                min_len=p.corpus_ngram_min_len)
        sampling = Sampling(max_tokens=p.corpus_ngram_max_len, constraint=constraint,
                            beams=p.keyword_rephrasing_beams)
        asked = [(q, kw) for q in queries for kw in keywords[q]]
        answers = llm.chat_one([prompt.render(question=queries[q], keyword=kw) for q, kw in asked], sampling)
        out: dict[str, list[str]] = {q: [] for q in queries}
        for (q, _), answer in zip(asked, answers):
            out[q] += [line.strip() for line in answer.split("\n") if line.strip()]
        return {q: out[q] or keywords[q] for q in queries}

    def _retrieve(self, queries: Mapping[str, str], phrases: dict[str, list[str]]):
        """Per query: the candidate pool (one object per distinct text), its sources (the
        question's dense hits, then each sub-n-gram's hits, in rank order) and relevances."""
        p = self.params
        grams = {q: sub_ngrams(phrases[q], self._stopwords, p.max_ngrams) for q in queries}
        flat = {f"{q}\x1f{i}": g for q in queries for i, g in enumerate(grams[q])}
        aligned = self._base.search(flat, p.alignment_retrieval_k) if flat else {}
        direct = self._dense.search(dict(queries), p.query_retrieval_k)
        self._rows.load_runs(aligned, direct)
        qvecs = self._dense.encode(list(queries.values()))
        pools, sources, relevance = {}, {}, {}
        for n, q in enumerate(queries):
            first = {}
            lists = [direct.get(q, [])] + [aligned.get(f"{q}\x1f{i}", []) for i in range(len(grams[q]))]
            sources[q] = [list(dict.fromkeys(first.setdefault(self._texts[oid], oid) for oid, _ in hits))
                          for hits in lists]
            pools[q] = list(first.values())
            relevance[q] = dict(zip(pools[q], ((self._dense.vectors(pools[q]) @ qvecs[n] + 1) / 2).tolist()))
        self._qvecs = dict(zip(queries, qvecs))
        return pools, sources, relevance

    def _expand(self, pools: dict[str, list[str]], sources: dict[str, list[list[str]]]) -> None:
        p = self.params
        for q, pool in pools.items():
            texts = {self._texts[o] for o in pool}
            frontier, added = list(pool), []
            for _ in range(p.expansion_steps):
                found = self._dense.neighbours(frontier, p.expansion_k_compatible)
                self._rows.load_runs(found)
                frontier = []
                for oid in (n for o in found for n, _ in found[o]):
                    if self._texts[oid] not in texts:
                        texts.add(self._texts[oid])
                        pool.append(oid)
                        frontier.append(oid)
                added += frontier
            if added:
                sources[q].append(added)

    def _select(self, queries: Mapping[str, str], pools: dict[str, list[str]], sources: dict[str, list[list[str]]],
                relevance: dict[str, dict[str, float]]) -> dict[str, list[str]]:
        p = self.params
        for q, pool in pools.items():  # expanded objects get their relevance too
            missing = [o for o in pool if o not in relevance[q]]
            if missing:
                relevance[q].update(zip(missing, ((self._dense.vectors(missing) @ self._qvecs[q] + 1) / 2).tolist()))
        shortlists = {q: [o for o, _ in round_robin([[(o, 0.0) for o in src] for src in sources[q]])]
                      [:p.mip_candidates] for q in pools}
        if p.selection == "rerank":
            scored = self._scorer.rescore({q: (queries[q], shortlists[q]) for q in queries}, self._texts)
            return {q: [o for o, _ in scored[q][:p.mip_k_select]] for q in queries}
        from rbench.arm.mip import select

        out = {}
        for q, shortlist in shortlists.items():
            if not shortlist:
                out[q] = []
                continue
            vectors = self._dense.vectors(shortlist)
            texts = [self._texts[o] for o in shortlist]
            compat = p.w_sem * (vectors @ vectors.T)
            if p.w_lex:
                lex = np.array([[lexical(a, b, self._stopwords) if i < j else 0.0 for j, b in enumerate(texts)]
                                for i, a in enumerate(texts)])
                compat = compat + p.w_lex * (lex + lex.T)
            tables = [self._modality[o] not in ("text", "passage") for o in shortlist]
            solved = select([relevance[q][o] for o in shortlist], compat, tables, p.mip_k_select,
                            p.mip_formulation, p.mip_solver, p.mip_time_limit)
            self._mip[solved.status] += 1
            self._mip_gap.append(solved.gap)
            self._mip_seconds.append(solved.seconds)
            out[q] = [shortlist[i] for i in solved.picked]
        return out

    def _final(self, queries: Mapping[str, str], picked: dict[str, list[str]]) -> dict[str, list[str]]:
        from rbench.llm.budget import clip
        from rbench.llm.config import Sampling
        from rbench.llm.listwise import numbered
        from rbench.llm.parse import parse_selection
        from rbench.llm.prompts import load_prompt

        p = self.params
        llm = self.llm(p.llm)
        prompt = load_prompt(p.select_prompt)
        sampling = Sampling(temperature=p.final_temperature, max_tokens=p.max_tokens)
        docs = {q: list(dict.fromkeys(self._doc_of[o] for o in picked[q])) for q in queries}
        asked, messages = [], []
        for q in queries:
            if not docs[q]:
                continue
            shown = []
            for doc in docs[q]:
                members = [o for o in picked[q] if self._doc_of[o] == doc]
                body = " | ".join(clip(self._texts[o], p.passage_chars) for o in members)
                shown.append(f"{self._title_of[members[0]]}: {body}")
            fitted, count = llm.fit(lambda texts, q=q: prompt.render(question=queries[q], k=str(len(texts)),
                                                                     documents=numbered(texts)),
                                    shown, sampling, f"the ARM selection prompt of query {q!r}")
            if count:
                docs[q] = docs[q][:count]
                asked.append(q)
                messages.append(fitted)
        answers = llm.chat(messages, sampling, samples=p.final_samples) if messages else []
        chosen = {q: [] for q in queries}
        for q, samples in zip(asked, answers):
            for answer in samples:
                parsed = parse_selection(answer, len(docs[q]), len(docs[q]))
                llm.accounting.parsed(parsed.status)
                chosen[q] += [docs[q][i] for i in parsed.items if docs[q][i] not in chosen[q]]
        return chosen

    def stats(self) -> dict[str, Any]:
        out = super().stats()
        if self._scorer is not None:
            out.update(self._scorer.stats())
        if self._queries:
            out.update({f"arm_seconds_{step}": round(s, 3) for step, s in self._seconds.items()})
            out.update({f"arm_mip_{status}": n for status, n in sorted(self._mip.items())})
            if self._mip_seconds:
                out["arm_mip_seconds_mean"] = round(float(np.mean(self._mip_seconds)), 4)
                finite = [g for g in self._mip_gap if np.isfinite(g)]
                out["arm_mip_gap_max"] = round(float(max(finite)), 4) if finite else None
        return out
