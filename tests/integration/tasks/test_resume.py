"""Stages that work through many items keep each finished item: a build that dies midway
resumes with the items it had not finished."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import rbench.retrievers.dense as dense_module
import rbench.tasks.retrieve as retrieve_module
from rbench.core.store import Artifact, Stage, Store
from rbench.retrievers.bm25_sparse import BM25s
from rbench.retrievers.dense import Dense
from rbench.tasks.index import ENCODE, INDEX, EncodeConfig, IndexConfig
from rbench.tasks.retrieve import RETRIEVE, RetrieveConfig
from tests.conftest import CORPUS, QUERIES


@pytest.fixture
def prepared(tmp_path) -> Artifact:
    """A prepared-stage artifact holding the tiny corpus and its queries."""
    def build(folder, inputs, config):
        pq.write_table(pa.table({
            "object_id": [f"o{i}" for i in range(len(CORPUS))], "text": [c["object"] for c in CORPUS],
            "doc_id": [f"{c['page_title']} :: {c['source']}" for c in CORPUS]}), folder / "corpus.parquet")
        pq.write_table(pa.table({"query_id": [q["query_id"] for q in QUERIES], "text": [q["query"] for q in QUERIES],
                                 "gold_doc_ids": [q["document_ids"] for q in QUERIES]}), folder / "queries.parquet")
        return {}

    return Stage("prepare", 1, build).run(Store(tmp_path / "store"), [], {})


def _failing_after(monkeypatch, cls, method: str, calls: int):
    original = getattr(cls, method)
    count = {"n": 0}

    def flaky(self, *args, **kwargs):
        count["n"] += 1
        if count["n"] > calls:
            raise KeyboardInterrupt("killed")
        return original(self, *args, **kwargs)

    monkeypatch.setattr(cls, method, flaky)
    return count


def test_encoding_resumes_with_the_unfinished_chunks(tmp_path, prepared, monkeypatch):
    monkeypatch.setattr(dense_module, "CHUNK", 2)
    store, config = Store(tmp_path / "store"), EncodeConfig(retriever="dense", version=dense_module.Dense.code_identity(1),
                                                            params={"model": "static-64d"}, start=0, stop=6)
    counter = _failing_after(monkeypatch, Dense, "encode", 2)
    with pytest.raises(KeyboardInterrupt):
        ENCODE.run(store, [prepared], config)
    assert counter["n"] == 3 and store.load("encode", ENCODE.key([prepared], config)) is None
    monkeypatch.undo()
    monkeypatch.setattr(dense_module, "CHUNK", 2)
    encoded = ENCODE.run(store, [prepared], config)
    assert encoded.info["chunks_resumed"] == 2 and encoded.info["encoded"] == 2 and encoded.info["rows"] == 6
    whole = Dense({"model": "static-64d"}).encode([c["object"] for c in CORPUS])
    np.testing.assert_allclose(np.load(encoded.file("embeddings.npy")), whole, rtol=1e-5, atol=1e-6)
    assert not (tmp_path / "store" / "encode" / f".partial-{encoded.key}").exists()


def test_retrieval_resumes_with_the_unsearched_batches(tmp_path, prepared, monkeypatch):
    monkeypatch.setattr(retrieve_module, "QUERY_BATCH", 2)
    store = Store(tmp_path / "store")
    leaf = IndexConfig(retriever="bm25s", version=BM25s.code_identity(BM25s.index_version), params=BM25s().index_params())
    index = INDEX.run(store, [prepared], leaf)
    config = RetrieveConfig(retriever="bm25s", params=BM25s().params.model_dump(), depth=3)
    _failing_after(monkeypatch, BM25s, "search", 2)
    with pytest.raises(KeyboardInterrupt):
        RETRIEVE.run(store, [prepared, prepared, index], config)
    monkeypatch.undo()
    monkeypatch.setattr(retrieve_module, "QUERY_BATCH", 2)
    resumed = RETRIEVE.run(store, [prepared, prepared, index], config)
    assert resumed.info["batches_resumed"] == 2 and resumed.info["queries"] == 5
    fresh = RETRIEVE.run(Store(tmp_path / "other"), [prepared, prepared, index], config)
    assert pq.read_table(resumed.file("run.parquet")).equals(pq.read_table(fresh.file("run.parquet")))
