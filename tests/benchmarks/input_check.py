"""What the input check costs: before a build reads a stored artifact, :meth:`Store.read_inputs`
re-hashes every byte of it against its manifest (issue 68). Measured on artifacts with the files
and sizes of a 10^7-object index, against reading the same files once (what any search of the index
costs at least), alternately, best of --repeats, with the page cache warm (both read from memory),
and the cache hit's own check (:meth:`Store.load`: sizes, fast fingerprints, input manifests).

Sizes (10^7 objects): ``bm25s``, a bm25s index of 30 distinct terms per object (3x10^8
postings: float32 scores and int32 term ids, 2.4 GB, plus the object ids, 0.1 GB);
``flat-minilm``, a flat FAISS index of 384-d float32 vectors (15.4 GB, needs that much free disk;
``--indexes bm25s`` leaves it out).

    python tests/benchmarks/input_check.py --workdir /tmp/input-check [--indexes bm25s,flat-minilm]
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import shutil
import time
from pathlib import Path

from rbench.core.store import Store

OBJECTS = 10_000_000
INDEXES = {
    "bm25s": {"data.csc.index.npy": OBJECTS * 30 * 4, "data.csc.indices.npy": OBJECTS * 30 * 4,
              "ids.parquet": OBJECTS * 10},
    "flat-minilm": {"index.faiss": OBJECTS * 384 * 4, "ids.parquet": OBJECTS * 10},
}
BLOCK = 64 << 20


def write(folder: Path, files: dict[str, int]) -> None:
    """Files of the given sizes, of bytes that do not compress or repeat."""
    block = os.urandom(BLOCK)
    for name, size in files.items():
        with open(folder / name, "wb") as f:
            left = size
            while left:
                f.write(block[:min(left, BLOCK)])
                left -= min(left, BLOCK)


def read_once(folder: Path) -> int:
    """Read every file of the artifact once, as a search that loads the index does at least."""
    total = 0
    for path in sorted(folder.iterdir()):
        with open(path, "rb", buffering=0) as f:
            while chunk := f.read(BLOCK):
                total += len(chunk)
    return total


def best(repeats: int, *calls):
    """Best wall time of each call, the calls alternating."""
    times = [[] for _ in calls]
    for _ in range(repeats):
        for i, call in enumerate(calls):
            started = time.perf_counter()
            call()
            times[i].append(time.perf_counter() - started)
    return [min(t) for t in times]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", default="/tmp/rbench-input-check")
    parser.add_argument("--indexes", default="bm25s,flat-minilm")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print(f"machine: {platform.node()}, {os.cpu_count()} cores, Python {platform.python_version()}; "
          f"{args.repeats} alternating repeats, best of; page cache warm")
    for name in args.indexes.split(","):
        root = Path(args.workdir) / name
        shutil.rmtree(root, ignore_errors=True)
        store = Store(root)
        started = time.perf_counter()
        artifact, _ = store.build("index", "k", lambda folder, checkpoint: write(folder, INDEXES[name]) or {})
        built = time.perf_counter() - started
        size = sum(INDEXES[name].values())
        check, read, hit = best(args.repeats, lambda: store.read_inputs([artifact]),
                                lambda: read_once(artifact.path), lambda: store.load("index", "k"))
        print(f"  {name:12s} {size / 1e9:5.1f} GB  input check {check:6.2f} s ({size / check / 1e9:.2f} GB/s)  "
              f"read once {read:6.2f} s  check / read {check / read:.2f}  cache hit {hit * 1000:.1f} ms  "
              f"(written and hashed at publish in {built:.0f} s)")
        shutil.rmtree(root, ignore_errors=True)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS {peak:.0f} MiB")


if __name__ == "__main__":
    main()
