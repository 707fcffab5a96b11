"""BM25 with the ``bm25s`` engine: a sparse score matrix in NumPy, no Java.

Tokenisation is explicit: lower-casing, the regex ``\\b\\w\\w+\\b``, English stopwords
(optional) and a Snowball stemmer (``porter`` is closest to Lucene's). With
``query_weighting: tf`` a term repeated in a long query counts once per occurrence, as
Lucene's bag-of-words query does; ``unique`` counts each query term once.
"""

from __future__ import annotations

import os
from itertools import chain
from pathlib import Path
from typing import Literal, Mapping

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import BaseModel, ConfigDict, Field

from rbench.core.errors import DataError, MissingExtraError
from rbench.retrievers.base import RETRIEVERS, Retriever, Run

IDS = pa.schema([("object_id", pa.string())])
BATCH = 65_536


def _import():
    try:
        import bm25s
        import Stemmer
        from bm25s.tokenization import Tokenizer
    except ImportError:
        raise MissingExtraError("bm25s", "bm25s", "BM25 with the bm25s engine") from None
    return bm25s, Stemmer, Tokenizer


NONOCCURRENCE = ("bm25l", "bm25+")
"""The variants whose score subtracts, per term, the score of a document without it (bm25s 0.3.16,
``scoring.py`` lines 76-112 and 297-298)."""


def idf_weights(method: str, df: np.ndarray, n_docs: int) -> np.ndarray:
    """Each term's idf under a BM25 variant, 0 where its document frequency is 0, as bm25s 0.3.16 computes
    it (``bm25s/scoring.py`` lines 60-73 and 178-219; the variants of Kamphuis et al., ECIR 2020), in float64:

    - ``robertson``: log(max((N - df + 0.5) / (df + 0.5), 1))
    - ``lucene``: log(1 + (N - df + 0.5) / (df + 0.5))
    - ``atire``: log(N / df)
    - ``bm25l``: log((N + 1) / (df + 0.5))
    - ``bm25+``: log((N + 1) / df)
    """
    d = np.asarray(df, dtype=np.float64)
    seen = d > 0
    d = np.where(seen, d, 1.0)
    if method == "robertson":
        weights = np.log(np.maximum((n_docs - d + 0.5) / (d + 0.5), 1))
    elif method == "lucene":
        weights = np.log(1 + (n_docs - d + 0.5) / (d + 0.5))
    elif method == "atire":
        weights = np.log(n_docs / d)
    elif method == "bm25l":
        weights = np.log((n_docs + 1) / (d + 0.5))
    elif method == "bm25+":
        weights = np.log((n_docs + 1) / d)
    else:
        raise ValueError(f"unknown BM25 variant {method!r}")
    return np.where(seen, weights, 0.0)


def tf_component(method: str, tf, doc_len, avg_len, k1: float, b: float, delta: float):
    """The term-frequency factor of a BM25 variant, as bm25s 0.3.16 computes it (``bm25s/scoring.py``
    lines 115-159), with the length norm L = 1 - b + b * doc_len / avg_len:

    - ``robertson``, ``lucene``: tf / (k1 * L + tf)
    - ``atire``: tf * (k1 + 1) / (tf + k1 * L)
    - ``bm25l``: with c = tf / L, (k1 + 1) * (c + delta) / (k1 + c + delta)
    - ``bm25+``: (k1 + 1) * tf / (k1 * L + tf) + delta
    """
    if method in ("robertson", "lucene"):
        return tf / (k1 * ((1 - b) + b * doc_len / avg_len) + tf)
    if method == "atire":
        return (tf * (k1 + 1)) / (tf + k1 * (1 - b + b * doc_len / avg_len))
    if method == "bm25l":
        c = tf / (1 - b + b * doc_len / avg_len)
        return ((k1 + 1) * (c + delta)) / (k1 + c + delta)
    if method == "bm25+":
        return ((k1 + 1) * tf) / (k1 * (1 - b + b * doc_len / avg_len) + tf) + delta
    raise ValueError(f"unknown BM25 variant {method!r}")


class BM25sParams(BaseModel):
    """BM25 parameters (fixed at index time in bm25s) and the tokenisation choices."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    k1: float = Field(0.9, gt=0)
    """Term-frequency saturation."""
    b: float = Field(0.4, ge=0, le=1)
    """Length normalisation, from 0 (none) to 1 (full)."""
    method: Literal["lucene", "robertson", "atire", "bm25l", "bm25+"] = "lucene"
    """bm25s's BM25 variant; ``lucene`` scores as Lucene (and Pyserini) do."""
    stemmer: Literal["porter", "english", "none"] = "porter"
    """PyStemmer's Snowball stemmer (``porter`` is closest to Lucene's) or ``none``."""
    stopwords: Literal["english", "none"] = "english"
    """Drop English stopwords (bm25s's list) from texts and queries, or ``none``."""
    query_weighting: Literal["unique", "tf"] = "unique"
    """``unique``: each query term counts once; ``tf``: a repeated term counts once per occurrence, as Lucene's bag-of-
    words query does."""


@RETRIEVERS.register
class BM25s(Retriever):
    """bm25s: the same BM25 family as Pyserini, computed as a precomputed sparse matrix."""

    name = "bm25s"
    description = "BM25 with bm25s (sparse matrices, no Java); explicit tokenisation; query-term weighting"
    Params = BM25sParams
    index_fields = ("k1", "b", "method", "stemmer", "stopwords")
    search_fields = ("query_weighting",)
    index_version = 3
    version = 2

    def _tokenizer(self):
        _, Stemmer, Tokenizer = _import()
        stem = None if self.params.stemmer == "none" else Stemmer.Stemmer(self.params.stemmer).stemWord
        stopwords = [] if self.params.stopwords == "none" else "english"
        return Tokenizer(lower=True, stopwords=stopwords, stemmer=stem)

    @staticmethod
    def _tokens(tokenizer, texts: list[str]) -> list[list[str]]:
        # update_vocab=True: by default bm25s drops tokens unseen in the first call's texts
        return tokenizer.tokenize(texts, update_vocab=True, return_as="string", show_progress=False)

    def index(self, corpus: Path, folder: Path) -> dict:
        """Tokenise the corpus batch by batch and build bm25s's score matrix without holding
        every token list: each batch's (document, term, tf) postings go to a side file, and the
        matrix's columns are filled from them by counting sort, straight into the files bm25s
        loads. Scores are bm25s's formulas (:func:`idf_weights`, :func:`tf_component`), so the index equals
        what ``bm25s.BM25.index`` builds from the same tokens, up to the order of columns (a test
        compares every term's scores for each method)."""
        bm25s, _, _ = _import()
        tokenizer = self._tokenizer()
        engine = bm25s.BM25(k1=self.params.k1, b=self.params.b, method=self.params.method)
        postings = folder / "_postings"
        postings.mkdir()
        lengths, df, parts = [], np.zeros(0, dtype=np.int64), []
        with pq.ParquetWriter(folder / "ids.parquet", IDS) as ids:
            for batch in pq.ParquetFile(corpus).iter_batches(batch_size=BATCH, columns=["object_id", "text"]):
                ids.write_batch(pa.record_batch([batch.column(0)], schema=IDS))
                docs = tokenizer.tokenize(batch.column(1).to_pylist(), update_vocab=True, return_as="ids",
                                          show_progress=False)
                size = np.fromiter(map(len, docs), dtype=np.int64, count=len(docs))
                flat = np.fromiter(chain.from_iterable(docs), dtype=np.int64, count=int(size.sum()))
                keys, tf = np.unique((np.repeat(np.arange(len(docs), dtype=np.int64), size) << 32) | flat,
                                     return_counts=True)
                term = (keys & 0xFFFFFFFF).astype(np.int32)
                part = postings / f"{len(parts):06d}.npz"
                np.savez(part, term=term, doc=(keys >> 32).astype(np.int32) + sum(map(len, lengths)),
                         tf=tf.astype(np.float32))
                parts.append(part)
                vocabulary = len(tokenizer.get_vocab_dict())
                df = np.concatenate([df, np.zeros(vocabulary - len(df), dtype=np.int64)])
                df += np.bincount(term, minlength=vocabulary)
                lengths.append(size.astype(np.int32))
        vocab = dict(tokenizer.get_vocab_dict())
        df = np.concatenate([df, np.zeros(len(vocab) - len(df), dtype=np.int64)])
        doc_len = np.concatenate(lengths) if lengths else np.zeros(0, dtype=np.int32)
        if not len(doc_len):
            raise DataError(f"bm25s: corpus {corpus} has no objects to index")
        n_docs, avg = len(doc_len), doc_len.mean()
        exact_idf = idf_weights(engine.idf_method, df, n_docs)
        idf = exact_idf.astype(engine.dtype)
        nonoccurrence = None
        if engine.method in NONOCCURRENCE:
            absent = tf_component(engine.method, 0, avg, avg, engine.k1, engine.b, engine.delta)
            nonoccurrence = (exact_idf * absent).astype(engine.dtype)
        indptr = np.concatenate([[0], np.cumsum(df)])
        data = np.lib.format.open_memmap(postings / "data.npy", mode="w+", dtype=engine.dtype, shape=(int(indptr[-1]),))
        rows = np.lib.format.open_memmap(postings / "indices.npy", mode="w+", dtype=engine.int_dtype,
                                         shape=(int(indptr[-1]),))
        cursor = indptr[:-1].copy()
        for part in parts:
            with np.load(part) as p:
                term, doc, tf = p["term"], p["doc"], p["tf"]
            scores = idf[term] * tf_component(engine.method, tf, doc_len[doc], avg, engine.k1, engine.b,
                                              engine.delta)
            if nonoccurrence is not None:
                scores -= nonoccurrence[term]
            order = np.argsort(term, kind="stable")  # within a term, documents stay in corpus order
            term = term[order]
            first = np.flatnonzero(np.r_[True, term[1:] != term[:-1]])
            rank = np.arange(len(term)) - np.repeat(first, np.diff(np.r_[first, len(term)]))
            data[cursor[term] + rank] = scores[order]
            rows[cursor[term] + rank] = doc[order]
            cursor += np.bincount(term, minlength=len(vocab))
            part.unlink()
        data.flush()
        rows.flush()
        del data, rows
        engine.scores = {"data": np.zeros(0, dtype=engine.dtype), "indices": np.zeros(0, dtype=engine.int_dtype),
                         "indptr": indptr, "num_docs": n_docs}
        engine.vocab_dict, engine.nonoccurrence_array = vocab, nonoccurrence
        engine.save(str(folder / "bm25s"), show_progress=False)
        os.replace(postings / "data.npy", folder / "bm25s" / "data.csc.index.npy")
        os.replace(postings / "indices.npy", folder / "bm25s" / "indices.csc.index.npy")
        postings.rmdir()
        return {"indexed": n_docs, "vocabulary": len(vocab), "postings": int(indptr[-1])}

    def load(self, folder: Path) -> None:
        bm25s, _, _ = _import()
        self._engine = bm25s.BM25.load(str(folder / "bm25s"), mmap=True, show_progress=False)
        self._ids = pq.read_table(folder / "ids.parquet", columns=["object_id"]).column(0).combine_chunks()
        self._tokenizer_ = self._tokenizer()

    def _scores(self, terms: list[str]) -> np.ndarray:
        vocab = self._engine.vocab_dict
        counts: dict[str, int] = {}
        for t in terms:
            if t and t in vocab:  # bm25s keeps "" in its vocabulary (a query of stopwords alone) but not in the index
                counts[t] = counts.get(t, 0) + 1
        scores = np.zeros(len(self._ids), dtype=np.float32)
        if self.params.query_weighting == "unique":
            return self._engine.get_scores(list(counts)) if counts else scores
        for term, count in counts.items():
            scores += count * self._engine.get_scores([term])
        return scores

    def search(self, queries: Mapping[str, str], k: int) -> Run:
        run: Run = {}
        qids = list(queries)
        tokens = self._tokens(self._tokenizer_, [queries[q] for q in qids])
        for qid, terms in zip(qids, tokens):
            scores = self._scores(terms)
            matched = np.flatnonzero(scores > 0)  # sort only the documents a query term matched
            top = matched[np.argsort(-scores[matched], kind="stable")[:k]]
            run[qid] = list(zip(self._ids.take(pa.array(top)).to_pylist(), scores[top].tolist()))
        return run
