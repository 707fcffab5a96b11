"""Run shapes: object-level runs to de-duplicated document rankings, qrels, TREC files."""

from __future__ import annotations

import math
from typing import Iterable, Iterator, Mapping
from urllib.parse import quote, unquote

DocRanking = dict[str, list[tuple[str, float]]]


def dedup_documents(rows: Iterable[tuple[str, str, int, float]]) -> DocRanking:
    """From ``(query_id, doc_id, rank, score)`` object hits, each query's documents in rank
    order, each kept at its first (best) occurrence with that object's score."""
    by_query: dict[str, list[tuple[int, str, float]]] = {}
    for qid, doc, rank, score in rows:
        by_query.setdefault(qid, []).append((rank, doc, score))
    ranking: DocRanking = {}
    for qid, hits in by_query.items():
        seen: set[str] = set()
        docs = []
        for _, doc, score in sorted(hits, key=lambda h: h[0]):
            if doc not in seen:
                seen.add(doc)
                docs.append((doc, score))
        ranking[qid] = docs
    return ranking


def trec_eval_order(ranking: DocRanking) -> DocRanking:
    """Each query's documents as trec_eval (and pytrec_eval, which runs its code) orders a run before
    scoring it: by score, highest first, and documents of exactly equal score by their id as the run
    file writes it, in descending byte order (``comp_sim_docno`` in trec_eval's ``form_res_rels.c``:
    ``strcmp(ptr2->docno, ptr1->docno)``). BEIR and MTEB score their dense runs this way."""
    out: DocRanking = {}
    for qid, docs in ranking.items():
        by_id = sorted(docs, key=lambda d: trec_id(d[0]).encode("utf-8"), reverse=True)
        out[qid] = sorted(by_id, key=lambda d: -d[1])  # stable: equal scores keep the id order
    return out


def drop_excluded(ranking: DocRanking, excluded: Mapping[str, Iterable[str]]) -> tuple[DocRanking, int]:
    """Each query's ranking without the documents excluded for it (BRIGHT's ``excluded_ids``),
    the rest keeping their order, and how many were removed in all."""
    kept: DocRanking = {}
    removed = 0
    for qid, docs in ranking.items():
        drop = set(excluded.get(qid, ()))
        kept[qid] = [(doc, score) for doc, score in docs if doc not in drop]
        removed += len(docs) - len(kept[qid])
    return kept, removed


def to_ranx_run(ranking: DocRanking) -> dict[str, dict[str, float]]:
    """``{qid: {doc: score}}`` with strictly decreasing scores by rank (``1 / rank``), so that
    ranx and trec_eval reproduce our order whatever the ties in the original scores."""
    return {q: {d: 1.0 / i for i, (d, _) in enumerate(docs, 1)} for q, docs in ranking.items()}


def to_qrels(gold: Mapping[str, Iterable[str]], grades: Mapping[str, Mapping[str, int]] | None = None,
             nonrelevant: Mapping[str, Iterable[str]] | None = None) -> dict[str, dict[str, int]]:
    """``{qid: {doc: grade}}`` from each query's gold document ids (grade 1 unless ``grades`` says)
    and the documents judged not relevant (``nonrelevant``, grade 0)."""
    return {q: {**{d: 0 for d in (nonrelevant or {}).get(q, ())},
                **{d: (grades or {}).get(q, {}).get(d, 1) for d in docs}} for q, docs in gold.items()}


def to_trec_qrels(qrels: Mapping[str, Mapping[str, int]]) -> str:
    """TREC qrels text: ``qid 0 docid grade`` per line; ids percent-encoded as in run files."""
    lines = [f"{trec_id(q)} 0 {trec_id(d)} {g}" for q, docs in qrels.items() for d, g in docs.items()]
    return "\n".join(lines) + ("\n" if lines else "")


def trec_id(doc_id: str) -> str:
    """A document id safe for whitespace-separated TREC files (spaces percent-encoded)."""
    return quote(doc_id, safe="")


def file_scores(scores: Iterable[float]) -> list[str]:
    """The score column of a run file, in rbench's order (rank 1 first): each score to 6
    decimals, lowered where needed by 0.000001 steps so that the column strictly decreases.

    rbench ranks by the retriever's rank column, so a tie in score keeps the order the
    retriever returned (Lucene's for BM25, as Pyserini writes it). trec_eval, pytrec_eval and
    ranx re-sort a run by score, each breaking ties its own way; with strictly decreasing scores
    every one of them reads rbench's order, and scores the run as rbench does. A score that is
    not finite becomes the next step down."""
    out: list[str] = []
    previous: int | None = None
    for score in scores:
        value = round(score * 1_000_000) if math.isfinite(score) else None
        if value is None or (previous is not None and value >= previous):
            value = 0 if previous is None else previous - 1
        previous = value
        sign = "-" if value < 0 else ""
        out.append(f"{sign}{abs(value) // 1_000_000}.{abs(value) % 1_000_000:06d}")
    return out


def to_trec(ranking: DocRanking, tag: str) -> str:
    """TREC run text: ``qid Q0 docid rank score tag`` per line, ids percent-encoded, scores as
    :func:`file_scores` writes them (any tool reads rbench's order from them)."""
    lines = [
        f"{trec_id(q)} Q0 {trec_id(d)} {i} {s} {trec_id(tag)}"
        for q, docs in ranking.items()
        for i, ((d, _), s) in enumerate(zip(docs, file_scores([score for _, score in docs])), 1)
    ]
    return "\n".join(lines) + ("\n" if lines else "")


def run_lines(text: str, source: str = "run file") -> Iterator[tuple[int, list[str], float]]:
    """``(line number, fields, score)`` of each line of a TREC run file's text; a malformed line
    is a ValueError naming ``source`` and the line."""
    for number, line in enumerate(text.splitlines(), 1):
        fields = line.split()
        if not fields:
            continue
        try:
            if len(fields) != 6:
                raise ValueError
            score = float(fields[4])
        except ValueError:
            raise ValueError(f"{source}:{number}: expected 'qid Q0 docid rank score tag', got {line[:200]!r}") from None
        yield number, fields, score


def retag_trec(text: str, tag: str, source: str = "run file") -> str:
    """A run file's text with ``tag`` in its last column and its scores rewritten by
    :func:`file_scores` in the file's order (a file written before rbench wrote strictly
    decreasing scores gets them); ``source`` names the file in the error for a malformed line."""
    rows: dict[str, list[list[str]]] = {}
    for _, fields, _ in run_lines(text, source):
        rows.setdefault(fields[0], []).append(fields)
    lines = []
    for fields in rows.values():
        for row, score in zip(fields, file_scores([float(f[4]) for f in fields])):
            lines.append(" ".join([*row[:4], score, trec_id(tag)]))
    return "\n".join(lines) + ("\n" if lines else "")


def read_trec_run(text: str, source: str = "run file") -> DocRanking:
    """A TREC run file (``qid Q0 docid rank score tag``) as each query's documents, best first:
    by score, ties in the file's order. Ids are percent-decoded (rbench's files encode them,
    :func:`trec_id`). A malformed line is a ValueError naming ``source`` and the line."""
    hits: dict[str, list[tuple[float, int, str]]] = {}
    for number, fields, score in run_lines(text, source):
        hits.setdefault(unquote(fields[0]), []).append((-score, number, unquote(fields[2])))
    ranking: DocRanking = {}
    for qid, found in hits.items():
        docs: dict[str, float] = {}
        for negative, _, doc in sorted(found):
            docs.setdefault(doc, -negative)  # a document listed twice keeps its best place
        ranking[qid] = list(docs.items())
    return ranking

