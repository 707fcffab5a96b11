"""Overhead of rbench's retrievers against the libraries they wrap, measured in one run.

Prepares FeTaQA dev from a mirror (cached in --workdir), then times, on the same data:
BM25 search through rbench vs Pyserini's own ``batch_search`` on the same index (with and without reading the hits'
docid and score out of Java); bm25s vs
Pyserini; dense encoding through rbench vs plain ``SentenceTransformer.encode`` (same model
and batch size); dense search through rbench vs plain encode + ``faiss.Index.search``.
Each pair is timed alternately, best of --repeats after a warm-up call. Prints each ratio
(rbench / reference; 1.10 = 10% overhead).

    python tests/benchmarks/retrieval_speed.py --mirror ../shared/data
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from pathlib import Path

import pyarrow.parquet as pq


def compare(repeats: int, ours, ref) -> tuple[float, float]:
    """Best wall times of ``ours`` and ``ref``, timed alternately after one untimed warm-up
    call each (JIT, caches), so that drift on a shared machine hits both alike."""
    ours(), ref()
    times: tuple[list[float], list[float]] = ([], [])
    for _ in range(repeats):
        for fn, bucket in ((ours, times[0]), (ref, times[1])):
            started = time.perf_counter()
            fn()
            bucket.append(time.perf_counter() - started)
    return min(times[0]), min(times[1])


def prepare(mirror: Path, workdir: Path, queries: int):
    """The FeTaQA corpus Parquet file and ``{qid: text}`` of a subsample, via rbench's stages."""
    from rbench.config import DatasetConfig, SubsampleConfig
    from rbench.core.store import Store
    from rbench.tasks.download import DOWNLOAD, DownloadConfig
    from rbench.tasks.prepare import PREPARE
    from rbench.tasks.subsample import SUBSAMPLE

    store, ds = Store(workdir / "store"), DatasetConfig(name="fetaqa")
    raw = DOWNLOAD.run(store, [], DownloadConfig.of(ds), mirror=mirror)
    prepared = PREPARE.run(store, [raw], ds)
    subset = SUBSAMPLE.run(store, [prepared], SubsampleConfig(size=queries))
    table = pq.read_table(subset.file("queries.parquet"))
    texts = dict(zip(table.column("query_id").to_pylist(), table.column("text").to_pylist()))
    return prepared.file("corpus.parquet"), texts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mirror", type=Path, default=Path(os.environ.get("RBENCH_MIRROR", "../shared/data")))
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/rbench-speed"))
    parser.add_argument("--queries", type=int, default=500)
    parser.add_argument("--k", type=int, default=100)
    parser.add_argument("--encode-passages", type=int, default=2000)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    from rbench.retrievers.base import make_retriever

    corpus, queries = prepare(args.mirror, args.workdir, args.queries)
    qids, texts = list(queries), list(queries.values())
    threads = os.cpu_count() or 1
    print(f"machine: {platform.platform()}, {threads} cores, Python {platform.python_version()}")
    print(f"data: FeTaQA dev corpus {pq.ParquetFile(corpus).metadata.num_rows} objects, {len(qids)} queries, "
          f"k={args.k}, best of {args.repeats}")
    rows = []

    bm25 = make_retriever("bm25")
    folder = args.workdir / "bm25"
    if not (folder / "lucene").exists():
        folder.mkdir(parents=True, exist_ok=True)
        bm25.index(corpus, folder)
    bm25.load(folder)
    lucene = bm25._searcher
    def raw_hits():
        return lucene.batch_search(texts, qids, k=args.k, threads=threads)

    def read_hits():
        hits = raw_hits()
        return {q: [(h.docid, h.score) for h in hits[q]] for q in qids}

    rows.append(("BM25 search: rbench vs Pyserini batch_search (hits left in Java)",
                 *compare(args.repeats, lambda: bm25.search(queries, args.k), raw_hits)))
    rows.append(("BM25 search: rbench vs Pyserini batch_search + reading docid, score",
                 *compare(args.repeats, lambda: bm25.search(queries, args.k), read_hits)))

    sparse = make_retriever("bm25s")
    folder = args.workdir / "bm25s"
    if not (folder / "ids.json").exists():
        folder.mkdir(parents=True, exist_ok=True)
        sparse.index(corpus, folder)
    sparse.load(folder)
    rows.append(("BM25 search: bm25s vs Pyserini batch_search + reading docid, score",
                 *compare(args.repeats, lambda: sparse.search(queries, args.k), read_hits)))

    import faiss

    dense = make_retriever("dense", {"batch_size": args.batch_size})
    passages = pq.read_table(corpus, columns=["text"]).column(0).to_pylist()[: args.encode_passages]
    plain = dense._encoder()
    rows.append((f"dense encode {len(passages)} passages: rbench vs SentenceTransformer.encode", *compare(
        args.repeats, lambda: dense.encode(passages),
        lambda: plain.encode(passages, batch_size=args.batch_size, normalize_embeddings=True,
                             convert_to_numpy=True, show_progress_bar=False))))

    folder = args.workdir / "dense"
    if not (folder / "index.faiss").exists():
        folder.mkdir(parents=True, exist_ok=True)
        dense.index(corpus, folder)
    dense.load(folder)
    index = faiss.read_index(str(folder / "index.faiss"))
    rows.append(("dense search (encode + FAISS): rbench vs plain faiss", *compare(
        args.repeats, lambda: dense.search(queries, args.k),
        lambda: index.search(plain.encode(texts, batch_size=args.batch_size, normalize_embeddings=True,
                                          convert_to_numpy=True, show_progress_bar=False), args.k))))

    print(f"{'comparison':<72} {'rbench s':>9} {'ref s':>8} {'ratio':>6}")
    for name, ours, ref in rows:
        print(f"{name:<72} {ours:>9.3f} {ref:>8.3f} {ours / ref:>6.2f}")


if __name__ == "__main__":
    main()
