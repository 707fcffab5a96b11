"""Subsample stage: TF-IDF k-means over the queries, keeping the query nearest each centroid."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from rbench.config import SubsampleConfig
from rbench.core.imports import torch_before_scipy
from rbench.core.store import Artifact, Stage


def select_queries(texts: list[str], size: int, seed: int) -> list[int]:
    """Indices (ascending) of ``min(size, len(texts))`` representative queries.

    Fits k-means with k = size on TF-IDF vectors and keeps, per cluster, the member
    closest to its centroid. Deterministic for a given seed.
    """
    if size >= len(texts):
        return list(range(len(texts)))
    torch_before_scipy()
    from sklearn.cluster import KMeans
    from sklearn.feature_extraction.text import TfidfVectorizer

    vectors = TfidfVectorizer(sublinear_tf=True).fit_transform(texts)
    km = KMeans(n_clusters=size, random_state=seed, n_init=1).fit(vectors)
    distances = km.transform(vectors)
    chosen = []
    for cluster in range(size):
        members = np.flatnonzero(km.labels_ == cluster)
        if len(members):
            chosen.append(int(members[np.argmin(distances[members, cluster])]))
    return sorted(chosen)


def build_subsample(folder: Path, inputs: list[Artifact], config: SubsampleConfig) -> dict:
    """Write the selected rows of the prepared queries to ``queries.parquet``."""
    (prepared,) = inputs
    queries = pq.read_table(prepared.file("queries.parquet"))
    keep = select_queries(queries.column("text").to_pylist(), config.size, config.seed)
    pq.write_table(queries.take(keep), folder / "queries.parquet")
    return {"queries": len(keep), "of": queries.num_rows}


SUBSAMPLE = Stage("subsample", 1, build_subsample, input_parts=(("prepare", "queries"),))
