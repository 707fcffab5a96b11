"""Dense retrieval: sentence-transformers embeddings in a FAISS inner-product index."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Literal, Mapping

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import BaseModel, ConfigDict, Field, PositiveInt, field_validator

from rbench.errors import MissingExtraError
from retrievers.base import Retriever, Run, corpus_batches
from retrievers.models import canonical_id, load_encoder, resolve_model

log = logging.getLogger("rbench")


def import_faiss():
    """Import faiss (faiss-cpu or faiss-gpu, whichever is installed) with a clear error."""
    try:
        import faiss
    except ImportError:
        raise MissingExtraError("faiss-cpu", "dense", "dense retrieval") from None
    return faiss


class DenseParams(BaseModel):
    """``model``: registry id, alias, hub id or folder; ``index``: exact ``flat`` or ``hnsw``;
    ``min_score``: a cosine-similarity threshold in [0, 1] (RAGO's vector retriever), so a
    query may return fewer than k hits."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str = "sentence-transformers/all-MiniLM-L6-v2"
    index: Literal["flat", "hnsw"] = "flat"
    hnsw_m: PositiveInt = 32
    ef_construction: PositiveInt = 200
    ef_search: PositiveInt = 128
    batch_size: PositiveInt = 64
    device: str | None = Field(None, description="torch device; default: CUDA when available")
    min_score: float | None = Field(None, ge=0, le=1, description="keep hits with cosine similarity >= this")

    @field_validator("model")
    @classmethod
    def _known(cls, name: str) -> str:
        return resolve_model(canonical_id(name)).id


class Dense(Retriever):
    """Cosine similarity (normalised embeddings, inner product) over FAISS."""

    name = "dense"
    description = "sentence-transformers embeddings + FAISS (flat or HNSW; GPU with faiss-gpu)"
    Params = DenseParams
    index_fields = ("model", "index", "hnsw_m", "ef_construction")

    def _encoder(self):
        if getattr(self, "_model", None) is None:
            self._model = load_encoder(resolve_model(self.params.model), self.params.device)
        return self._model

    def encode(self, texts: list[str]) -> np.ndarray:
        """Unit-normalised float32 embeddings."""
        vectors = self._encoder().encode(
            texts, batch_size=self.params.batch_size, normalize_embeddings=True,
            convert_to_numpy=True, show_progress_bar=False,
        )
        return np.ascontiguousarray(vectors, dtype=np.float32)

    def _new_index(self, dim: int):
        faiss = import_faiss()
        if self.params.index == "hnsw":
            index = faiss.IndexHNSWFlat(dim, self.params.hnsw_m, faiss.METRIC_INNER_PRODUCT)
            index.hnsw.efConstruction = self.params.ef_construction
            return index
        return faiss.IndexFlatIP(dim)

    def index(self, corpus: Path, folder: Path) -> dict:
        faiss = import_faiss()
        total = pq.ParquetFile(corpus).metadata.num_rows
        index, ids, started, encode_seconds = None, [], time.perf_counter(), 0.0
        for batch_ids, texts in corpus_batches(corpus):
            t0 = time.perf_counter()
            vectors = self.encode(texts)
            encode_seconds += time.perf_counter() - t0
            if index is None:
                index = self._new_index(vectors.shape[1])
            index.add(vectors)
            ids.extend(batch_ids)
            log.info("dense: encoded %d/%d passages (%.0f/s)", len(ids), total, len(ids) / encode_seconds)
        faiss.write_index(index, str(folder / "index.faiss"))
        pq.write_table(pa.table({"object_id": ids}), folder / "ids.parquet")
        return {
            "indexed": len(ids), "dim": index.d, "encode_seconds": round(encode_seconds, 2),
            "passages_per_second": round(len(ids) / encode_seconds, 1),
            "total_seconds": round(time.perf_counter() - started, 2),
        }

    def load(self, folder: Path) -> None:
        faiss = import_faiss()
        index = faiss.read_index(str(folder / "index.faiss"))
        if self.params.index == "hnsw":
            index.hnsw.efSearch = self.params.ef_search
        elif hasattr(faiss, "StandardGpuResources") and faiss.get_num_gpus() > 0:
            index = faiss.index_cpu_to_all_gpus(index)
        self._index = index
        self._ids = pq.read_table(folder / "ids.parquet").column("object_id").to_pylist()
        self._encoder()

    def search(self, queries: Mapping[str, str], k: int) -> Run:
        qids = list(queries)
        if not qids:
            return {}
        scores, rows = self._index.search(self.encode([queries[q] for q in qids]), min(k, len(self._ids)))
        floor = -np.inf if self.params.min_score is None else self.params.min_score
        return {
            q: [(self._ids[r], float(s)) for r, s in zip(row, score) if r >= 0 and s >= floor]
            for q, row, score in zip(qids, rows, scores)
        }
