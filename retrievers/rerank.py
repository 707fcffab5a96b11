"""Two-stage retrieval: any first-stage retriever, then a cross-encoder rescoring its candidates."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Mapping, Sequence

from pydantic import BaseModel, ConfigDict, Field, PositiveInt, field_validator

from rbench.core.configfile import PathOrName
from rbench.core.errors import MissingExtraError
from rbench.core.imports import one_load_at_a_time
from rbench.retrievers.base import RETRIEVERS, FirstStage, RetrieverSpec, Run
from rbench.retrievers.corpus import CorpusRows


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


class CrossEncoderParams(BaseModel):
    """A cross-encoder rescoring step: the model and how it runs."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    model: PathOrName
    """The cross-encoder: a hub id (``org/name``) or a local folder."""
    batch_size: PositiveInt = 32
    """(query, passage) pairs scored per batch."""
    max_length: PositiveInt = 512
    """Pairs are cut to this many of the model's tokens."""
    device: str | None = Field(None, description="torch device; default: CUDA when available")

    @field_validator("model")
    @classmethod
    def _exists(cls, model: str) -> str:
        return check_model_location(model)


class CrossEncoderScorer:
    """A sentence-transformers ``CrossEncoder`` that rescores candidates against a query text."""

    def __init__(self, params: CrossEncoderParams):
        self.params = params
        self.pairs, self.seconds = 0, 0.0
        self._encoder = None

    @one_load_at_a_time
    def load(self) -> None:
        """Load the model (once)."""
        if self._encoder is not None:
            return
        try:
            from sentence_transformers import CrossEncoder
        except ImportError:
            raise MissingExtraError("sentence-transformers", "dense", "cross-encoder reranking") from None
        p = self.params
        self._encoder = CrossEncoder(p.model, device=p.device, max_length=p.max_length)

    def rescore(self, candidates: Mapping[str, tuple[str, Sequence[str]]], texts: Mapping[str, str]) -> Run:
        """Per query id, its candidates ``(object_id, score)`` best first, scored against its text."""
        self.load()
        pairs = [(text, texts[oid]) for text, oids in candidates.values() for oid in oids]
        started = time.perf_counter()
        scores = self._encoder.predict(pairs, batch_size=self.params.batch_size, show_progress_bar=False) if pairs else []
        self.seconds += time.perf_counter() - started
        self.pairs += len(pairs)
        run, i = {}, 0
        for q, (_, oids) in candidates.items():
            run[q] = sorted(((oid, float(scores[i + j])) for j, oid in enumerate(oids)), key=lambda h: -h[1])
            i += len(oids)
        return run

    def stats(self) -> dict[str, Any]:
        """Pairs scored and throughput."""
        return {"pairs_scored": self.pairs,
                "pairs_per_second": round(self.pairs / self.seconds, 1) if self.seconds else None}


class RerankParams(CrossEncoderParams):
    """Retrieve ``k * k_multiplier`` candidates with ``first_stage``, rescore with ``model``."""

    first_stage: RetrieverSpec = Field(default_factory=lambda: RetrieverSpec(name="dense"))
    """The retriever whose candidates are rescored."""
    k_multiplier: PositiveInt = 3
    """Candidates rescored per query: k times this."""


@RETRIEVERS.register
class Rerank(FirstStage):
    """Cross-encoder reranking (sentence-transformers ``CrossEncoder``) of a first stage's hits."""

    name = "rerank"
    description = "first stage (any retriever) + cross-encoder rescoring of k x k_multiplier candidates"
    conformance = {"": {"model": "$TINY_CROSS_ENCODER", "first_stage": {"name": "dense", "params": {"model": "static-64d"}}}}
    Params = RerankParams
    uses_model = True
    native = True

    def __init__(self, params=None):
        super().__init__(params)
        self._scorer = CrossEncoderScorer(self.params)

    def model(self) -> str:
        return self.params.model

    def model_identities(self) -> list[str]:
        from rbench.retrievers.models import model_identity

        return [model_identity(self.params.model), *super().model_identities()]

    def open(self, folders: Sequence[Path], corpus: Path) -> None:
        super().open(folders, corpus)
        self._rows = CorpusRows(corpus, ["text"])
        self._texts = self._rows.view("text")
        self._scorer.load()

    def search(self, queries: Mapping[str, str], k: int) -> Run:
        candidates = self._first.search(queries, k * self.params.k_multiplier)
        self._rows.load_runs(candidates)
        run = self._scorer.rescore({q: (queries[q], [oid for oid, _ in hits]) for q, hits in candidates.items()},
                                   self._texts)
        return {q: hits[:k] for q, hits in run.items()}

    def stats(self) -> dict[str, Any]:
        return self._scorer.stats()
