"""Two-stage retrieval: any first-stage retriever, then a cross-encoder rescoring its candidates."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Mapping, Sequence

import pyarrow.parquet as pq
from pydantic import BaseModel, ConfigDict, Field, PositiveInt, field_validator

from rbench.errors import MissingExtraError
from retrievers.base import Composite, Retriever, RetrieverSpec, Run


def check_model_location(model: str) -> str:
    """Accept an existing local folder or a hub id ``org/name``; reject a missing path."""
    if Path(model).expanduser().exists():
        return str(Path(model).expanduser().resolve())
    if model.startswith(("/", ".", "~")) or model.count("/") != 1:
        raise ValueError(
            f"reranker model {model!r} is neither an existing folder nor a hub id 'org/name': "
            "check the path, or give a hub id such as 'mixedbread-ai/mxbai-rerank-large-v2'"
        )
    return model


class RerankParams(BaseModel):
    """Retrieve ``k * k_multiplier`` candidates with ``first_stage``, rescore with ``model``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str
    first_stage: RetrieverSpec = Field(default_factory=lambda: RetrieverSpec(name="dense"))
    k_multiplier: PositiveInt = 3
    batch_size: PositiveInt = 32
    max_length: PositiveInt = 512
    device: str | None = Field(None, description="torch device; default: CUDA when available")

    @field_validator("model")
    @classmethod
    def _exists(cls, model: str) -> str:
        return check_model_location(model)


class Rerank(Composite):
    """Cross-encoder reranking (sentence-transformers ``CrossEncoder``) of a first stage's hits."""

    name = "rerank"
    description = "first stage (any retriever) + cross-encoder rescoring of k x k_multiplier candidates"
    Params = RerankParams
    uses_model = True

    def __init__(self, params=None):
        super().__init__(params)
        self._first = self.params.first_stage.build()
        self._pairs, self._seconds = 0, 0.0

    def components(self) -> list[Retriever]:
        return [self._first]

    def model_identities(self) -> list[str]:
        from retrievers.models import model_identity

        return [model_identity(self.params.model), *super().model_identities()]

    def open(self, folders: Sequence[Path], corpus: Path) -> None:
        super().open(folders, corpus)
        table = pq.read_table(corpus, columns=["object_id", "text"])
        self._texts = dict(zip(table.column(0).to_pylist(), table.column(1).to_pylist()))
        try:
            from sentence_transformers import CrossEncoder
        except ImportError:
            raise MissingExtraError("sentence-transformers", "dense", "cross-encoder reranking") from None
        self._encoder = CrossEncoder(self.params.model, device=self.params.device, max_length=self.params.max_length)

    def search(self, queries: Mapping[str, str], k: int) -> Run:
        candidates = self._first.search(queries, k * self.params.k_multiplier)
        pairs = [(queries[q], self._texts[oid]) for q, hits in candidates.items() for oid, _ in hits]
        started = time.perf_counter()
        scores = self._encoder.predict(pairs, batch_size=self.params.batch_size, show_progress_bar=False) if pairs else []
        self._seconds += time.perf_counter() - started
        self._pairs += len(pairs)
        run, i = {}, 0
        for q, hits in candidates.items():
            rescored = [(oid, float(scores[i + j])) for j, (oid, _) in enumerate(hits)]
            i += len(hits)
            run[q] = sorted(rescored, key=lambda h: -h[1])[:k]
        return run

    def stats(self) -> dict[str, Any]:
        return {"pairs_scored": self._pairs,
                "pairs_per_second": round(self._pairs / self._seconds, 1) if self._seconds else None}
