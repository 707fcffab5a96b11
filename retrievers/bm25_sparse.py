"""BM25 with the ``bm25s`` engine: a sparse score matrix in NumPy, no Java.

Tokenisation is explicit: lower-casing, the regex ``\\b\\w\\w+\\b``, English stopwords
(optional) and a Snowball stemmer (``porter`` is closest to Lucene's). With
``query_weighting: tf`` a term repeated in a long query counts once per occurrence, as
Lucene's bag-of-words query does; ``unique`` counts each query term once.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal, Mapping

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from rbench.core.errors import MissingExtraError
from rbench.retrievers.base import RETRIEVERS, Retriever, Run, corpus_batches


def _import():
    try:
        import bm25s
        import Stemmer
        from bm25s.tokenization import Tokenizer
    except ImportError:
        raise MissingExtraError("bm25s", "bm25s", "BM25 with the bm25s engine") from None
    return bm25s, Stemmer, Tokenizer


class BM25sParams(BaseModel):
    """BM25 parameters (fixed at index time in bm25s) and the tokenisation choices."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    k1: float = Field(0.9, gt=0)
    b: float = Field(0.4, ge=0, le=1)
    method: Literal["lucene", "robertson", "atire", "bm25l", "bm25+"] = "lucene"
    stemmer: Literal["porter", "english", "none"] = "porter"
    stopwords: Literal["english", "none"] = "english"
    query_weighting: Literal["unique", "tf"] = "unique"


@RETRIEVERS.register
class BM25s(Retriever):
    """bm25s: the same BM25 family as Pyserini, computed as a precomputed sparse matrix."""

    name = "bm25s"
    description = "BM25 with bm25s (sparse matrices, no Java); explicit tokenisation; query-term weighting"
    Params = BM25sParams
    index_fields = ("k1", "b", "method", "stemmer", "stopwords")
    index_version = 2
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
        bm25s, _, _ = _import()
        tokenizer, ids, tokens = self._tokenizer(), [], []
        for batch_ids, texts in corpus_batches(corpus):
            ids.extend(batch_ids)
            tokens.extend(self._tokens(tokenizer, texts))
        engine = bm25s.BM25(k1=self.params.k1, b=self.params.b, method=self.params.method)
        engine.index(tokens, show_progress=False)
        engine.save(str(folder / "bm25s"), show_progress=False)
        (folder / "ids.json").write_text(json.dumps(ids))
        return {"indexed": len(ids), "vocabulary": len(engine.vocab_dict)}

    def load(self, folder: Path) -> None:
        bm25s, _, _ = _import()
        self._engine = bm25s.BM25.load(str(folder / "bm25s"), show_progress=False)
        self._ids = json.loads((folder / "ids.json").read_text())
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
            top = np.argsort(-scores, kind="stable")[: min(k, len(scores))]
            run[qid] = [(self._ids[i], float(scores[i])) for i in top if scores[i] > 0]
        return run
