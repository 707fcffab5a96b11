"""Existing indexes as inputs: bm25 over a Lucene index folder and dense over a FAISS index with
its id map (rbench's layout and Pyserini's) search as the indexes built here do, are keyed by
the index's fingerprint, skip the encode shards, and refuse what does not match."""

from __future__ import annotations

import shutil

import faiss
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from rbench.core.errors import DataError
from rbench.retrievers.base import make_retriever
from rbench.tasks.index import IndexConfig

QUERIES = {"q1": "Which award did Andy Karl win?", "q2": "Where do flightless penguins live?"}


@pytest.fixture()
def corpus(corpus_file):
    return corpus_file


def _built(name: str, params: dict, corpus, folder):
    retriever = make_retriever(name, params)
    folder.mkdir(parents=True)
    info = retriever.index(corpus, folder)
    retriever.load(folder)
    return retriever, info


def test_bm25_searches_an_existing_lucene_index(tmp_path, corpus):
    own, _ = _built("bm25", {}, corpus, tmp_path / "own")
    elsewhere = shutil.copytree(tmp_path / "own" / "lucene", tmp_path / "elsewhere")
    prebuilt, info = _built("bm25", {"prebuilt": str(elsewhere)}, corpus, tmp_path / "stage")
    assert not (tmp_path / "stage" / "lucene").exists() and info["indexed"] == info["corpus_objects"]
    assert prebuilt.search(QUERIES, 3) == own.search(QUERIES, 3)
    (key,) = prebuilt.model_identities()
    (elsewhere / "extra.txt").write_text("a change")
    assert make_retriever("bm25", {"prebuilt": str(elsewhere)}).model_identities() != [key]
    with pytest.raises(DataError, match="changed .*since this experiment keyed it"):
        make_retriever("bm25", {"prebuilt": str(elsewhere)}).load(tmp_path / "stage")
    with pytest.raises(ValueError, match=r"has none of \['segments_\*'\]"):
        make_retriever("bm25", {"prebuilt": str(tmp_path)})


def test_dense_searches_an_existing_faiss_index_in_either_layout(tmp_path, corpus):
    own, _ = _built("dense", {"model": "static-64d"}, corpus, tmp_path / "own")
    expected = own.search(QUERIES, 3)
    prebuilt, info = _built("dense", {"model": "static-64d", "prebuilt": str(tmp_path / "own")}, corpus,
                            tmp_path / "stage")
    assert prebuilt.search(QUERIES, 3) == expected and info["indexed"] == info["corpus_objects"]
    assert not prebuilt.sharded() and IndexConfig(
        retriever="dense", version="v", params=prebuilt.index_params()).shards(1000, 100) == []

    pyserini = tmp_path / "pyserini"
    pyserini.mkdir()
    shutil.copy(tmp_path / "own" / "index.faiss", pyserini / "index")
    ids = pq.read_table(tmp_path / "own" / "ids.parquet").column("object_id").to_pylist()
    (pyserini / "docid").write_text("\n".join(ids) + "\n")
    other, _ = _built("dense", {"model": "static-64d", "prebuilt": str(pyserini)}, corpus, tmp_path / "stage2")
    assert other.search(QUERIES, 3) == expected

    (pyserini / "docid").write_text("\n".join(ids[:-1]) + "\n")
    with pytest.raises(DataError, match=f"holds {len(ids)} vectors but its id map .* has {len(ids) - 1} ids"):
        _built("dense", {"model": "static-64d", "prebuilt": str(pyserini)}, corpus, tmp_path / "stage3")
    wrong = tmp_path / "wrong"
    wrong.mkdir()
    index = faiss.IndexFlatIP(32)
    index.add(np.eye(32, dtype=np.float32)[:len(ids)])
    faiss.write_index(index, str(wrong / "index.faiss"))
    pq.write_table(pa.table({"object_id": ids}), wrong / "ids.parquet")
    with pytest.raises(DataError, match="holds 32-d vectors but model .*static-64d encodes 64-d queries"):
        _built("dense", {"model": "static-64d", "prebuilt": str(wrong)}, corpus, tmp_path / "stage4")
    with pytest.raises(ValueError, match="needs index.faiss with ids.parquet"):
        (wrong / "ids.parquet").unlink()
        make_retriever("dense", {"model": "static-64d", "prebuilt": str(wrong)})
