"""CUDA encoding through rbench's ``dense`` retriever against the CPU, measured in one run.

Encodes FeTaQA dev's whole prepared corpus (row granularity, as ``configs/default.yaml``)
with MiniLM-L6 through ``Dense.encode``: on the CPU in float32 (the reference, torch on every
core) and on CUDA in float32, float16 and bfloat16 (``encoding.dtype``). The corpus is cut
into blocks of --block passages and the encoders take turns on each block. Each encoder's
vectors are then searched exactly (inner product, numpy) by all dev questions, and
document-level recall@1/5/10 is computed. Prints the machine, the settings, passages/s,
the ratio to the CPU, the cosine agreement with the CPU's vectors, recall, and peak memory
(process RSS, and CUDA's allocator peak per encoder).

    python tests/benchmarks/gpu_encode.py --mirror ../shared/data
    python tests/benchmarks/gpu_encode.py --prepared DIR --model FOLDER   # corpus.parquet, queries.parquet

``--prepared`` reads an already prepared corpus (for a machine without polars, as the lent
GPU machine is); ``--model`` takes any model id or folder (a GPU machine that reaches no hub
gets the packaged weights as a folder).
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

ENCODERS = {"cpu float32": ("cpu", "float32"), "cuda float32": ("cuda", "float32"),
            "cuda float16": ("cuda", "float16"), "cuda bfloat16": ("cuda", "bfloat16")}


def recall(vectors: np.ndarray, qvectors: np.ndarray, docs: list[str], gold: list[list[str]]):
    """Document-level recall@1/5/10 of an exact inner-product search in numpy (no FAISS on the lent machine)."""
    from encoder_speed import ranked_recall

    return ranked_recall(np.argsort(-(qvectors @ vectors.T), axis=1, kind="stable")[:, :100], docs, gold)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mirror", type=Path, default=Path(os.environ.get("RBENCH_MIRROR", "../shared/data")))
    parser.add_argument("--prepared", type=Path, help="a folder with corpus.parquet and queries.parquet")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/rbench-gpu-encode"))
    parser.add_argument("--model", default="sentence-transformers/all-MiniLM-L6-v2")
    parser.add_argument("--block", type=int, default=2048)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--cuda-batch-size", type=int, default=256)
    args = parser.parse_args()

    import torch

    from rbench.retrievers.base import make_retriever

    if not torch.cuda.is_available():
        raise SystemExit("gpu_encode: torch sees no CUDA device")
    if args.prepared:
        corpus = pq.read_table(args.prepared / "corpus.parquet")
        queries = pq.read_table(args.prepared / "queries.parquet")
    else:
        from encoder_speed import prepare

        corpus, queries = prepare(args.mirror, args.workdir)
    texts, docs = corpus.column("text").to_pylist(), corpus.column("doc_id").to_pylist()
    questions, gold = queries.column("text").to_pylist(), queries.column("gold_doc_ids").to_pylist()
    dense = {name: make_retriever("dense", {"model": args.model, "device": device,
                                            "batch_size": args.batch_size if device == "cpu" else args.cuda_batch_size,
                                            "encoding": {"dtype": dtype}})
             for name, (device, dtype) in ENCODERS.items()}
    for d in dense.values():
        d.encode(texts[:8], "document")  # load and warm up outside the timing
    peaks = {}
    parts = {name: [] for name in ENCODERS}
    seconds = dict.fromkeys(ENCODERS, 0.0)
    for start in range(0, len(texts), args.block):
        block = texts[start:start + args.block]
        for name, (device, _) in ENCODERS.items():
            if device == "cuda":
                torch.cuda.synchronize()
                torch.cuda.reset_peak_memory_stats()
            t0 = time.perf_counter()
            parts[name].append(dense[name].encode(block, "document"))
            seconds[name] += time.perf_counter() - t0
            if device == "cuda":
                peaks[name] = max(peaks.get(name, 0), torch.cuda.max_memory_allocated())
    reference = np.concatenate(parts["cpu float32"])
    print(f"machine: {platform.node()}, {os.cpu_count()} cores, {torch.cuda.get_device_name(0)}, "
          f"torch {torch.__version__} ({torch.get_num_threads()} CPU threads), CUDA {torch.version.cuda}")
    print(f"FeTaQA dev (row granularity): {len(texts)} passages in blocks of {args.block} (encoders alternate per "
          f"block), batch size CPU {args.batch_size}, CUDA {args.cuda_batch_size}; {len(questions)} questions; "
          f"model {args.model}")
    print("| encoder | passages/s | x CPU | min / mean cosine to CPU | recall@1 | recall@5 | recall@10 | "
          "CUDA peak MiB |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for name in ENCODERS:
        vectors = np.concatenate(parts[name])
        cosine = np.einsum("ij,ij->i", vectors, reference)
        found = recall(vectors, dense[name].encode(questions, "query"), docs, gold)
        pps = len(texts) / seconds[name]
        peak = f"{peaks[name] / 2 ** 20:.0f}" if name in peaks else "-"
        print(f"| {name} | {pps:.0f} | {pps * seconds['cpu float32'] / len(texts):.1f} | "
              f"{cosine.min():.6f} / {cosine.mean():.6f} | {found[1]:.4f} | {found[5]:.4f} | {found[10]:.4f} | "
              f"{peak} |")
    print(f"peak RSS of the process: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2 ** 10:.0f} MiB")


if __name__ == "__main__":
    main()
