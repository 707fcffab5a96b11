"""Streaming benchmark of the prepare stage: peak memory and throughput vs corpus size.

Generates ARM-release-format corpora (``object``, ``page_title``, ``source``; 50 rows per
table) of the requested sizes, prepares each in a fresh subprocess and prints its peak
RSS and MB/s. Memory that does not grow with the corpus shows as equal peaks.

    python tests/benchmarks/prepare_scale.py --sizes-mb 250 1024 --workdir /tmp/rbench-scale
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

WORDS = ("alpha beta gamma delta epsilon zeta theta kappa lambda sigma omega table row value "
         "season team player goals score year city country river population").split()


def generate(folder: Path, size_mb: int, seed: int = 0) -> Path:
    """Write an ARM-format ``feverous.jsonl`` of about ``size_mb`` MB and its benchmark file."""
    rng = random.Random(seed)
    data = folder / "assets/all_data/serialized_data/feverous.jsonl"
    data.parent.mkdir(parents=True, exist_ok=True)
    target, written, line_no = size_mb * 1_000_000, 0, 0
    with open(data, "w", encoding="utf-8") as f:
        while written < target:
            page = f"Page {line_no // 50}"
            cells = " , ".join(f"[H] {rng.choice(WORDS)} : {rng.randint(0, 10**6)}" for _ in range(12))
            line = json.dumps({"object": f"{page} [SEP] {cells}", "page_title": page, "source": "table_0"}) + "\n"
            f.write(line)
            written += len(line)
            line_no += 1
    pages = (line_no + 49) // 50  # a query per page, up to 1,000: every gold document exists at any size
    queries = [{"query": f"query {i}", "document_ids": [f"Page {i}_table_0"]} for i in range(min(1000, pages))]
    bench = folder / "assets/all_data/benchmarks/feverous.json"
    bench.parent.mkdir(parents=True, exist_ok=True)
    bench.write_text(json.dumps(queries))
    return data


def prepare_once(raw: Path, store: Path) -> None:
    """Run the prepare stage on ``raw`` (child process) and print a JSON line of measurements."""
    from rbench.config import DatasetConfig
    from rbench.core.store import Artifact, Store
    from rbench.tasks.prepare import PREPARE

    cfg = DatasetConfig.model_validate({"name": "bench", "adapter": "arm", "params": {"benchmark": "feverous"}})
    started = time.perf_counter()
    artifact = PREPARE.run(Store(store), [Artifact("download", "scale", raw)], cfg)
    seconds = time.perf_counter() - started
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"seconds": seconds, "peak_rss_mb": peak_mb, "objects": artifact.info["objects"]}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes-mb", type=int, nargs="+", default=[250, 1024])
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/rbench-scale"))
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        prepare_once(args.child, args.workdir / "store")
        return
    print(f"machine: {platform.platform()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    print(f"{'size MB':>8} {'objects':>10} {'seconds':>8} {'MB/s':>7} {'peak RSS MB':>12}")
    for size in args.sizes_mb:
        raw = args.workdir / f"raw-{size}"
        data = raw / "assets/all_data/serialized_data/feverous.jsonl"
        if not data.exists():
            generate(raw, size)
        actual_mb = data.stat().st_size / 1e6
        with tempfile.TemporaryDirectory(dir=args.workdir) as store:  # a fresh store: never a cache hit
            done = subprocess.run([sys.executable, __file__, "--child", str(raw), "--workdir", store],
                                  capture_output=True, text=True)
        if done.returncode != 0:
            sys.exit(f"prepare of the {size} MB corpus failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
        m = json.loads(done.stdout.strip().splitlines()[-1])
        print(f"{actual_mb:>8.0f} {m['objects']:>10} {m['seconds']:>8.1f} {actual_mb / m['seconds']:>7.1f} "
              f"{m['peak_rss_mb']:>12.0f}")


if __name__ == "__main__":
    main()
