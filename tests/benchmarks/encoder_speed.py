"""Encoder speed and quality of the ONNX backends and of a static model against MiniLM on
torch, measured in one run.

Prepares FeTaQA dev from a mirror (cached in --workdir) and encodes its whole corpus through
rbench's ``dense`` retriever: MiniLM (packaged weights) under each backend, ``torch`` (the
reference), ``onnx`` (fp32, ONNX Runtime) and ``onnx_int8`` (int8 weights), and the packaged
static model2vec model ``static-64d`` (the encoder for large corpora on CPUs; its batch size
is --static-batch-size). The corpus is cut into blocks of --block passages and the encoders
take turns on each block, so drift on a shared machine hits all alike; passages/s is the
total over all blocks. Each encoder's vectors then go into a flat FAISS index, and
document-level recall@1/5/10 is computed over all FeTaQA dev questions. Prints a table and
each encoder's speed ratio to torch with its recall@5 difference.

    python tests/benchmarks/encoder_speed.py --mirror ../shared/data
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

BACKENDS = ("torch", "onnx", "onnx_int8")  # MiniLM under each
ENCODERS = (*BACKENDS, "static-64d")


def prepare(mirror: Path, workdir: Path):
    """FeTaQA dev's corpus table and its queries table, via rbench's stages."""
    from rbench.config import DatasetConfig
    from rbench.core.store import Store
    from rbench.tasks.download import DOWNLOAD, DownloadConfig
    from rbench.tasks.prepare import PREPARE

    store, ds = Store(workdir / "store"), DatasetConfig(name="fetaqa")
    prepared = PREPARE.run(store, [DOWNLOAD.run(store, [], DownloadConfig.of(ds), mirror=mirror)], ds)
    return pq.read_table(prepared.file("corpus.parquet")), pq.read_table(prepared.file("queries.parquet"))


def recall(vectors: np.ndarray, qvectors: np.ndarray, docs: list[str], gold: list[list[str]], ks=(1, 5, 10)):
    """Document-level recall@k of a flat inner-product search (hits de-duplicated by document)."""
    import faiss

    index = faiss.IndexFlatIP(vectors.shape[1])
    index.add(vectors)
    _, rows = index.search(qvectors, 100)
    return ranked_recall(rows, docs, gold, ks)


def ranked_recall(rows: np.ndarray, docs: list[str], gold: list[list[str]], ks=(1, 5, 10)) -> dict[int, float]:
    """Document-level recall@k of ranked passage rows per question (-1: an empty slot), each ranking
    de-duplicated by document."""
    found = {k: [] for k in ks}
    for row, relevant in zip(rows, gold):
        ranked = list(dict.fromkeys(docs[r] for r in row if r >= 0))
        for k in ks:
            found[k].append(len(set(ranked[:k]) & set(relevant)) / len(relevant))
    return {k: float(np.mean(v)) for k, v in found.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mirror", type=Path, default=Path(os.environ.get("RBENCH_MIRROR", "../shared/data")))
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/rbench-encoder-speed"))
    parser.add_argument("--passages", type=int, default=0, help="encode only the first N passages (0: all)")
    parser.add_argument("--block", type=int, default=512)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--static-batch-size", type=int, default=1024)
    parser.add_argument("--threads", type=int, default=1, help="torch and ONNX Runtime threads")
    args = parser.parse_args()

    import torch

    from rbench.retrievers.base import make_retriever

    torch.set_num_threads(args.threads)
    corpus, queries = prepare(args.mirror, args.workdir)
    texts = corpus.column("text").to_pylist()[: args.passages or None]
    docs = corpus.column("doc_id").to_pylist()[: len(texts)]
    present = set(docs)
    kept = [(t, g) for t, g in zip(queries.column("text").to_pylist(), queries.column("gold_doc_ids").to_pylist())
            if set(g) <= present]
    dense = {b: make_retriever("dense", {"model": "minilm", "batch_size": args.batch_size,
                                         "encoding": {"backend": b}}) for b in BACKENDS}
    dense["static-64d"] = make_retriever("dense", {"model": "static-64d", "batch_size": args.static_batch_size})
    for d in dense.values():
        d.encode(texts[:8], "document")  # load, export and warm up outside the timing
    parts = {b: [] for b in ENCODERS}
    seconds = dict.fromkeys(ENCODERS, 0.0)
    for start in range(0, len(texts), args.block):
        block = texts[start:start + args.block]
        for b in ENCODERS:
            t0 = time.perf_counter()
            parts[b].append(dense[b].encode(block, "document"))
            seconds[b] += time.perf_counter() - t0
    results = {}
    for b in ENCODERS:
        vectors = np.concatenate(parts[b])
        qvectors = dense[b].encode([t for t, _ in kept], "query")
        results[b] = {"pps": len(texts) / seconds[b], **recall(vectors, qvectors, docs, [g for _, g in kept])}
    print(f"machine: {platform.node()} {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"torch {torch.__version__}, threads {args.threads}")
    print(f"FeTaQA dev: {len(texts)} passages in blocks of {args.block} (encoders alternate per block), "
          f"batch size {args.batch_size} (static-64d: {args.static_batch_size}); {len(kept)} questions; "
          "MiniLM-L6 (packaged weights) per backend, static-64d (model2vec, packaged)")
    print("| encoder | passages/s | x torch | recall@1 | recall@5 | recall@10 | recall@5 - torch |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    ref = results["torch"]
    for b, r in results.items():
        print(f"| {b} | {r['pps']:.1f} | {r['pps'] / ref['pps']:.2f} | {r[1]:.4f} | {r[5]:.4f} | {r[10]:.4f} | "
              f"{r[5] - ref[5]:+.4f} |")


if __name__ == "__main__":
    main()
