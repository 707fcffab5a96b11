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


def test_indexes_keyed_by_segment_ids_built_by_pyserini_and_faiss_give_rbenchs_own_metrics(tmp_path):
    """MS MARCO v2.1 as users index it: Pyserini's own command over the segments, keyed by their
    segment ids, and a FAISS index written by FAISS in Pyserini's layout (``index`` + ``docid``).
    rbench finds that their ids are ``metadata.segment_id``, maps hits to its objects, and the
    runs and metrics equal those over the indexes rbench builds itself."""
    need("pyserini")
    faiss = need("faiss")
    import pyarrow.parquet as pq

    from rbench.config import DatasetConfig, MetricsConfig, RetrieverConfig
    from rbench.core.store import Store
    from rbench.retrievers.dense import Dense
    from rbench.tasks.download import DOWNLOAD, DownloadConfig
    from rbench.tasks.evaluate import EVALUATE
    from rbench.tasks.index import INDEX, IndexConfig
    from rbench.tasks.prepare import PREPARE
    from rbench.tasks.retrieve import RETRIEVE, RetrieveConfig
    from tests.unit.datasets.test_msmarco_v21 import write_msmarco

    mirror = write_msmarco(tmp_path / "mirror")
    cfg = DatasetConfig.model_validate({"name": "rag24", "adapter": "msmarco_v21", "params": {"shards": [0, 1]}})
    store = Store(tmp_path / "store")
    prepared = PREPARE.run(store, [DOWNLOAD.run(store, [], DownloadConfig.of(cfg, mirror), mirror=mirror)], cfg)
    rows = pq.read_table(prepared.file("corpus.parquet"), columns=["text", "metadata"]).to_pylist()
    segments = [(json.loads(r["metadata"])["segment_id"], r["text"]) for r in rows]

    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "segments.jsonl").write_text(
        "".join(json.dumps({"id": s, "contents": t}) + "\n" for s, t in segments))
    built = tool("pyserini.index.lucene", "--collection", "JsonCollection", "--input", str(tmp_path / "docs"),
                 "--index", str(tmp_path / "lucene"), "--generator", "DefaultLuceneDocumentGenerator",
                 "--threads", "1", "--storeRaw")
    assert built.returncode == 0, built.stderr[-3000:]
    (tmp_path / "faiss").mkdir()
    vectors = Dense({"model": "static-64d"}).encode([t for _, t in segments], "document")
    flat = faiss.IndexFlatIP(vectors.shape[1])
    flat.add(vectors)
    faiss.write_index(flat, str(tmp_path / "faiss" / "index"))
    (tmp_path / "faiss" / "docid").write_text("".join(f"{s}\n" for s, _ in segments))

    def evaluated(name: str, params: dict):
        retriever = RetrieverConfig.model_validate({"name": name, "params": params})
        indexes = [INDEX.run(store, [prepared], c) for c in IndexConfig.all_of(retriever)]
        run = RETRIEVE.run(store, [prepared, prepared, *indexes], RetrieveConfig.of(retriever, 10))
        metrics = EVALUATE.run(store, [prepared, run], MetricsConfig(k=[1, 3, 10]))
        ranking = pq.read_table(run.file("run.parquet"), columns=["query_id", "object_id", "rank"]).to_pylist()
        per_query = sorted(pq.read_table(metrics.file("per_query.parquet")).to_pylist(),
                           key=lambda r: (r["query_id"], r["metric"], r["k"]))
        return indexes[0].info, ranking, per_query

    for name, own, prebuilt in (("bm25", {}, {"prebuilt": str(tmp_path / "lucene")}),
                                ("dense", {"model": "static-64d"},
                                 {"model": "static-64d", "prebuilt": str(tmp_path / "faiss")})):
        own_info, own_ranking, own_metrics = evaluated(name, own)
        info, ranking, metrics = evaluated(name, prebuilt)
        assert info["ids"] == "metadata.segment_id" and info["indexed"] == len(segments) == 5, (name, info)
        assert own_ranking and ranking == own_ranking, name
        assert metrics == own_metrics and any(r["value"] > 0 for r in metrics), name


TIED = [  # BEIR documents, several with the very same text: equal BM25 scores, ordered by Anserini's id tie-breaker
    ("zeta", "Penguins", "penguins swim in cold water"), ("alpha", "Penguins", "penguins swim in cold water"),
    ("mu", "Penguins", "penguins swim in cold water"), ("beta", "Towers", "the eiffel tower stands in paris"),
    ("omega", "Towers", "the eiffel tower stands in paris"), ("delta", "Java", "lucene is a java search library"),
    ("d10", "Penguins", "penguins swim in cold water"), ("d9", "Penguins", "penguins swim in cold water"),
]


def test_bm25_breaks_ties_as_pyserinis_own_cli_under_the_corpus_ids_and_arms_doc_n_ids(tmp_path):
    """Pyserini's documented BEIR recipe (JsonCollection of ``title + " " + text`` under the corpus's
    ids, ``--bm25``) and ARM's (``doc_<line>`` ids over its serialized file, ``src/retrieval/bm25.py``
    line 60) give the same ranked lists, ties included, as rbench's BM25 with ``lucene_ids: auto``
    (a BEIR corpus: one object per document, so its ids) and ``lucene_ids: position``; rbench's
    hashed object ids order the tied documents otherwise."""
    need("pyserini")
    import pyarrow.parquet as pq

    from rbench.config import DatasetConfig
    from rbench.core.store import Store
    from rbench.retrievers.base import make_retriever
    from rbench.tasks.download import DOWNLOAD, DownloadConfig
    from rbench.tasks.prepare import PREPARE

    beir = tmp_path / "beir"
    (beir / "qrels").mkdir(parents=True)
    (beir / "corpus.jsonl").write_text("".join(json.dumps({"_id": i, "title": t, "text": x}) + "\n"
                                               for i, t, x in TIED))
    queries = {"q1": "do penguins swim", "q2": "eiffel tower paris", "q3": "penguins tower"}
    (beir / "queries.jsonl").write_text("".join(json.dumps({"_id": q, "text": t}) + "\n" for q, t in queries.items()))
    (beir / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\talpha\t1\nq2\tbeta\t1\nq3\tmu\t1\n")
    cfg = DatasetConfig.model_validate({"name": "tied", "adapter": "beir", "params": {"path": str(beir)}})
    store = Store(tmp_path / "store")
    corpus = PREPARE.run(store, [DOWNLOAD.run(store, [], DownloadConfig.of(cfg))], cfg).file("corpus.parquet")
    rows = pq.read_table(corpus, columns=["object_id", "doc_id", "text"]).to_pylist()
    (tmp_path / "topics.tsv").write_text("".join(f"{q}\t{t}\n" for q, t in queries.items()))

    def pyserini(name: str, ids: list[str]) -> dict[str, list[str]]:
        (tmp_path / name).mkdir()
        (tmp_path / name / "docs.jsonl").write_text(
            "".join(json.dumps({"id": i, "contents": r["text"]}) + "\n" for i, r in zip(ids, rows)))
        built = tool("pyserini.index.lucene", "--collection", "JsonCollection", "--input", str(tmp_path / name),
                     "--index", str(tmp_path / f"{name}-index"), "--generator", "DefaultLuceneDocumentGenerator",
                     "--threads", "1")
        assert built.returncode == 0, built.stderr[-3000:]
        searched = tool("pyserini.search.lucene", "--index", str(tmp_path / f"{name}-index"), "--topics",
                        str(tmp_path / "topics.tsv"), "--output", str(tmp_path / f"{name}.txt"), "--bm25",
                        "--hits", "8")
        assert searched.returncode == 0, searched.stderr[-3000:]
        run: dict[str, list[str]] = {}
        for line in (tmp_path / f"{name}.txt").read_text().splitlines():
            run.setdefault(line.split()[0], []).append(line.split()[2])
        return run

    def rbench(lucene_ids: str) -> dict[str, list[str]]:
        bm25, folder = make_retriever("bm25", {"lucene_ids": lucene_ids}), tmp_path / f"rbench-{lucene_ids}"
        folder.mkdir()
        bm25.index(corpus, folder)
        bm25.open([folder], corpus)
        return {q: [d for d, _ in hits] for q, hits in bm25.search(queries, 8).items()}

    object_of = {r["doc_id"]: r["object_id"] for r in rows}
    by_id = pyserini("by-corpus-id", [r["doc_id"] for r in rows])
    beir_run = {q: [object_of[d] for d in docs] for q, docs in by_id.items()}
    assert [r["doc_id"] for r in rows] == [i for i, _, _ in TIED]  # the corpus keeps the file's order
    assert beir_run["q1"][:5] == [object_of[d] for d in ("alpha", "d10", "d9", "mu", "zeta")]  # ids as text
    assert rbench("auto") == beir_run
    arm_run = pyserini("by-position", [f"doc_{n}" for n in range(len(rows))])
    assert rbench("position") == {q: [rows[int(d[4:])]["object_id"] for d in docs] for q, docs in arm_run.items()}
    assert rbench("object_id") != beir_run  # the hashed ids order the five tied penguin documents otherwise
