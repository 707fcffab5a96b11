"""Subsample stage: TF-IDF k-means over the queries, keeping the query nearest each centroid."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from rbench.config import SubsampleConfig
from rbench.core.errors import DataError
from rbench.core.imports import torch_before_scipy
from rbench.core.store import Artifact, Stage

REPEAT = "#"
"""Joins a query id and its pick number when the ``arm`` method picks a query twice (``q7#2``)."""


def select_queries(texts: list[str], size: int, seed: int) -> list[int]:
    """Indices (ascending) of ``min(size, len(texts))`` representative queries.

    Fits k-means with k = size on sublinear TF-IDF vectors and keeps, per cluster, the member
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


def select_queries_arm(texts: list[str], size: int, seed: int = 42) -> list[int]:
    """The ARM reproduction's sample, in centroid order: ``subsample_json`` of
    ``src/utils/sample_queries.py`` (apostolhskouk/ARM at 5a6cb92): ``TfidfVectorizer()`` with its
    defaults (line 32), ``KMeans(n_clusters=size, random_state=seed)`` with scikit-learn's default
    starts (line 33; ``random_state=42`` there), and for each centroid ``j`` the query nearest it
    among all queries (``distances[:, j].argmin()``, line 35), so one query can be picked for two
    centroids. Every query, in order, when there are at most ``size`` (``if n_items > k``)."""
    if len(texts) <= size:
        return list(range(len(texts)))
    torch_before_scipy()
    from sklearn.cluster import KMeans
    from sklearn.feature_extraction.text import TfidfVectorizer

    vectors = TfidfVectorizer().fit_transform(texts)
    distances = KMeans(n_clusters=size, random_state=seed).fit(vectors).transform(vectors)
    return [int(distances[:, j].argmin()) for j in range(size)]


def _arm_sample(queries: pa.Table, config: SubsampleConfig) -> tuple[pa.Table, dict]:
    """ARM's sample of ``queries``: those with gold documents (``skip_field="document_ids"``,
    ``scripts/run_benchmark_subsampling.py`` line 13; dropped at ``sample_queries.py`` lines 20-24),
    then :func:`select_queries_arm`; a second pick of one query is kept as ``<id>#2`` (then ``#3``),
    so that it counts twice in every mean, as in ARM's evaluation."""
    with_gold = queries.filter(pc.greater(pc.list_value_length(queries.column("gold_doc_ids")), 0))
    picks = select_queries_arm(with_gold.column("text").to_pylist(), config.count(with_gold.num_rows), config.seed)
    chosen = with_gold.take(picks)
    ids, seen, taken = [], {}, set(queries.column("query_id").to_pylist())
    for qid in chosen.column("query_id").to_pylist():
        seen[qid] = seen.get(qid, 0) + 1
        ids.append(qid if seen[qid] == 1 else f"{qid}{REPEAT}{seen[qid]}")
        if seen[qid] > 1 and ids[-1] in taken:
            raise DataError(f"query {qid!r} is picked twice, and its repeat's id {ids[-1]!r} is another query's; "
                            f"rename that query")
    chosen = chosen.set_column(chosen.schema.get_field_index("query_id"), "query_id", pa.array(ids, pa.string()))
    return chosen, {"without_gold": queries.num_rows - with_gold.num_rows, "repeated": len(picks) - len(set(picks))}


def build_subsample(folder: Path, inputs: list[Artifact], config: SubsampleConfig) -> dict:
    """Write the selected rows of the prepared queries to ``queries.parquet``."""
    (prepared,) = inputs
    queries = pq.read_table(prepared.file("queries.parquet"))
    if config.method == "arm":
        chosen, counts = _arm_sample(queries, config)
    else:
        size = config.count(queries.num_rows)
        chosen, counts = queries.take(select_queries(queries.column("text").to_pylist(), size, config.seed)), {}
    pq.write_table(chosen, folder / "queries.parquet")
    return {"queries": chosen.num_rows, "of": queries.num_rows, **counts}


def _key_view(config: SubsampleConfig) -> dict:
    """The settings that shape the sample; the default method is left out, so that samples drawn
    before methods existed keep their keys."""
    view = config.model_dump(mode="json")
    if config.method == "members":
        del view["method"]
    return view


SUBSAMPLE = Stage("subsample", 1, build_subsample, input_parts=(("prepare", "queries"),), key_view=_key_view)
