"""MiniLM's CPU encoding speed by batch size, on FeTaQA dev's rows, through rbench's ``embed``.

The batch sizes take turns on each block of --block rows (one process, one model), so drift on
a shared machine hits all alike; rows/s is the total over all blocks. Each size's vectors are
compared with the first size's (largest absolute difference), since a batch pads its texts to
its longest. Prints machine, threads, rows/s, the ratio to the first size and peak memory.

    python -m tests.benchmarks.encode_batch_size --mirror ../shared/data --threads 1 --sizes 64 32 16 8
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import time
from pathlib import Path

import numpy as np


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mirror", type=Path, default=Path(os.environ.get("RBENCH_MIRROR", "../shared/data")))
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/rbench-encoder-speed"))
    parser.add_argument("--rows", type=int, default=4096, help="encode the first N rows (0: all)")
    parser.add_argument("--block", type=int, default=1024, help="rows per turn (rbench's dense CHUNK)")
    parser.add_argument("--sizes", type=int, nargs="+", default=[64, 32, 16, 8])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--model", default="sentence-transformers/all-MiniLM-L6-v2")
    args = parser.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    from rbench.retrievers.models import Encoding, embed, load_encoder, resolve_model
    from tests.benchmarks.encoder_speed import prepare

    corpus, _ = prepare(args.mirror, args.workdir)
    texts = corpus.column("text").to_pylist()[: args.rows or None]
    encoding = Encoding()
    encoder = load_encoder(resolve_model(args.model), "cpu", encoding)
    embed(encoder, texts[:64], encoding, "document", 64)  # warm-up
    seconds = dict.fromkeys(args.sizes, 0.0)
    vectors: dict[int, list[np.ndarray]] = {size: [] for size in args.sizes}
    for start in range(0, len(texts), args.block):
        block = texts[start : start + args.block]
        for size in args.sizes:
            t0 = time.perf_counter()
            vectors[size].append(embed(encoder, block, encoding, "document", size))
            seconds[size] += time.perf_counter() - t0
    reference = np.concatenate(vectors[args.sizes[0]])
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores; torch threads "
          f"{args.threads}; {args.model}; {len(texts)} FeTaQA dev rows in blocks of {args.block}")
    print(f"{'batch':>6} {'rows/s':>8} {'ratio':>6} {'max |diff|':>11}")
    for size in args.sizes:
        diff = float(np.abs(np.concatenate(vectors[size]) - reference).max())
        rate = len(texts) / seconds[size]
        print(f"{size:>6} {rate:8.1f} {seconds[args.sizes[0]] / seconds[size]:6.2f} {diff:11.2e}")
    print(f"peak memory {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")


if __name__ == "__main__":
    main()
