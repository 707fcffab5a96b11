"""Pyserini's own indexing and search commands run in the project's environment, through
``rbench-pyserini`` (Pyserini's ``python -m pyserini...`` asks the JVM for a module that the
packaged Java runtime lacks)."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib

import pytest

from tests.conftest import REPO, need

pytestmark = pytest.mark.slow
DOCS = [("d1", "the eiffel tower is in paris"), ("d2", "lucene is a java search library"),
        ("d3", "penguins cannot fly but they swim")]


def tool(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rbench.pyserini_tools", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=600)


def test_pyserini_indexes_and_searches_with_its_own_commands(tmp_path):
    need("pyserini")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "docs.jsonl").write_text("".join(json.dumps({"id": i, "contents": t}) + "\n" for i, t in DOCS))
    (tmp_path / "topics.tsv").write_text("q1\twhere is the eiffel tower\nq2\tcan penguins swim\n")
    built = tool("pyserini.index.lucene", "--collection", "JsonCollection", "--input", str(tmp_path / "docs"),
                 "--index", str(tmp_path / "index"), "--generator", "DefaultLuceneDocumentGenerator",
                 "--threads", "1", "--storePositions", "--storeDocvectors", "--storeRaw")
    assert built.returncode == 0, built.stderr[-3000:]
    assert "Total 3 documents indexed" in built.stdout + built.stderr
    searched = tool("pyserini.search.lucene", "--index", str(tmp_path / "index"), "--topics",
                    str(tmp_path / "topics.tsv"), "--output", str(tmp_path / "run.txt"), "--bm25", "--hits", "2")
    assert searched.returncode == 0, searched.stderr[-3000:]
    top = {line.split()[0]: line.split()[2] for line in (tmp_path / "run.txt").read_text().splitlines()
           if line.split()[3] == "1"}
    assert top == {"q1": "d1", "q2": "d3"}


def test_the_launcher_is_a_command_and_says_how_to_use_it():
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["rbench-pyserini"] == "rbench.pyserini_tools:main"
    bare = tool()
    assert bare.returncode == 2 and "usage: rbench-pyserini MODULE" in bare.stderr
    assert tool("--help").returncode == 0


def test_an_index_built_by_pyserini_from_the_exported_corpus_is_reused_with_the_same_rankings(tmp_path, tiny_files):
    """The documented route to reuse an index: export the prepared corpus as Pyserini's
    JsonCollection, index it with Pyserini's own command, name it in ``prebuilt:``; BM25 then
    ranks exactly as over the index rbench builds itself."""
    need("pyserini")
    import polars as pl

    from rbench.config import DatasetConfig
    from rbench.core.store import Store
    from rbench.retrievers.base import make_retriever
    from rbench.tasks.download import DOWNLOAD, DownloadConfig
    from rbench.tasks.prepare import PREPARE
    from tests.conftest import QUERIES, tiny_dataset

    cfg = DatasetConfig.model_validate(tiny_dataset(*tiny_files))
    store = Store(tmp_path / "store")
    corpus = PREPARE.run(store, [DOWNLOAD.run(store, [], DownloadConfig.of(cfg))], cfg).file("corpus.parquet")
    (tmp_path / "docs").mkdir()
    pl.read_parquet(corpus, columns=["object_id", "text"]).rename({"object_id": "id", "text": "contents"}).write_ndjson(
        tmp_path / "docs" / "corpus.jsonl")
    built = tool("pyserini.index.lucene", "--collection", "JsonCollection", "--input", str(tmp_path / "docs"),
                 "--index", str(tmp_path / "pyserini-index"), "--generator", "DefaultLuceneDocumentGenerator",
                 "--threads", "1", "--storeRaw")
    assert built.returncode == 0, built.stderr[-3000:]
    queries = {q["query_id"]: q["query"] for q in QUERIES}
    runs = []
    for name, params in (("own", {}), ("prebuilt", {"prebuilt": str(tmp_path / "pyserini-index")})):
        bm25, folder = make_retriever("bm25", params), tmp_path / name
        folder.mkdir()
        bm25.index(corpus, folder)
        bm25.load(folder)
        runs.append(bm25.search(queries, 5))
    own, prebuilt = runs
    assert own and all(own[q] for q in own)
    assert {q: [d for d, _ in hits] for q, hits in prebuilt.items()} == {q: [d for d, _ in hits] for q, hits in own.items()}
    assert all(abs(a[1] - b[1]) < 1e-4 for q in own for a, b in zip(own[q], prebuilt[q]))
