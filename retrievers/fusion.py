"""Hybrid fusion of two or more retrievers: Reciprocal Rank Fusion or a weighted sum of
normalised scores, optionally collapsing objects to their document first (as the MS MARCO
hybrid pipeline does, so that many segments of one document do not dominate)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal, Mapping, Sequence

from pydantic import BaseModel, ConfigDict, Field, PositiveInt, model_validator

from rbench.evaluation.runs_fusion import fuse_ranking
from rbench.retrievers.base import RETRIEVERS, Composite, Hits, Retriever, RetrieverSpec, Run
from rbench.retrievers.corpus import CorpusRows


class FusionParams(BaseModel):
    """Two or more retrievers fused by ``rrf`` (constant ``rrf_k``) or ``weighted`` sum of
    ``normalization``-rescaled scores; each component retrieves ``candidates`` objects."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    retrievers: list[RetrieverSpec]
    """The retrievers fused, two or more."""
    method: Literal["rrf", "weighted"] = "rrf"
    """``rrf`` (reciprocal rank fusion) or ``weighted`` (a weighted sum of rescaled scores)."""
    rrf_k: float = Field(60, ge=0)
    """The RRF constant: a hit at rank r scores 1 / (rrf_k + r)."""
    normalization: Literal["minmax", "zscore"] = "minmax"
    """``weighted``: how each run's scores are rescaled first, per query, as ranx does (``minmax`` to [0, 1],
    all-equal scores to 0; or ``zscore``); a run that missed an object adds 0 for it (ranx's ``wsum``)."""
    weights: list[float] | None = None
    """One weight per retriever, in order; default: equal."""
    collapse_documents: bool = False
    """Fuse documents, not objects: each run keeps a document's best object only."""
    candidates: PositiveInt = 100
    """Hits each retriever returns for fusion (at least k)."""

    @model_validator(mode="after")
    def _check(self) -> "FusionParams":
        if len(self.retrievers) < 2:
            raise ValueError(
                f"fusion needs two or more retrievers, got {len(self.retrievers)}: "
                "list them under params.retrievers"
            )
        if self.weights is not None and len(self.weights) != len(self.retrievers):
            raise ValueError(f"weights has {len(self.weights)} values for {len(self.retrievers)} retrievers")
        return self


@RETRIEVERS.register
class Fusion(Composite):
    """Hybrid retrieval: several retrievers' runs fused into one."""

    name = "fusion"
    description = "hybrid fusion of 2+ retrievers: RRF or weighted normalised scores; optional doc collapse"
    conformance = {"": {"retrievers": [{"name": "bm25s"}, {"name": "dense", "params": {"model": "static-64d"}}]}}
    Params = FusionParams
    version = 2  # ranx's conventions (issue 67): all-equal scores min-max to 0, a missed object adds 0

    def __init__(self, params=None):
        super().__init__(params)
        self._components = [spec.build() for spec in self.params.retrievers]

    def components(self) -> list[Retriever]:
        return self._components

    def open(self, folders: Sequence[Path], corpus: Path) -> None:
        super().open(folders, corpus)
        if self.params.collapse_documents:
            self._rows = CorpusRows(corpus, ["doc_id"])
            self._doc_of = self._rows.view("doc_id")

    def _collapse(self, hits: Hits) -> tuple[Hits, dict[str, str]]:
        seen, docs, representative = set(), [], {}
        for oid, score in hits:
            doc = self._doc_of[oid]
            if doc not in seen:
                seen.add(doc)
                docs.append((doc, score))
                representative[doc] = oid
        return docs, representative

    def search(self, queries: Mapping[str, str], k: int) -> Run:
        depth = max(k, self.params.candidates)
        component_runs = [c.search(queries, depth) for c in self._components]
        if self.params.collapse_documents:
            self._rows.load_runs(*component_runs)
        weights = self.params.weights or [1.0] * len(self._components)
        run: Run = {}
        for q in queries:
            runs = [r.get(q, []) for r in component_runs]
            best: dict[str, str] = {}
            if self.params.collapse_documents:
                collapsed = [self._collapse(h) for h in runs]
                runs = [h for h, _ in collapsed]
                for _, rep in reversed(collapsed):
                    best.update(rep)
            norm = "min-max" if self.params.normalization == "minmax" else "zmuv"
            fused = fuse_ranking(runs, "rrf" if self.params.method == "rrf" else "wsum", self.params.rrf_k,
                                 weights, norm)
            run[q] = [(best.get(i, i), s) for i, s in fused[:k]]
        return run
