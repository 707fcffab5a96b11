"""N ``rbench run`` commands started at once on one machine: one user, one new ``PREFECT_HOME``, one store
(issue 81, item 2). Each runs a small BM25 experiment of its own name on one generated corpus, so they
share the store's download, prepare and index stages (built once, under their leases) and each logs its
own MLflow run. Prints per N the failures (goal: 0), the wall time of the whole batch and its slowest
command, the peak RSS of the largest command, the machine and the settings.

    python tests/benchmarks/runs_together.py --counts 6 12
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def corpus(folder: Path, documents: int = 400) -> tuple[Path, Path]:
    """A generated corpus.jsonl and queries.jsonl (each query names one document's words)."""
    words = ["lava", "ash", "fjord", "river", "capital", "glacier", "delta", "basalt", "moraine", "estuary"]
    docs = [{"doc_id": f"d{i}", "text": " ".join(words[(i * 7 + j) % len(words)] + str(i % 13) for j in range(12))}
            for i in range(documents)]
    queries = [{"query_id": f"q{i}", "text": docs[i * 5]["text"][:40], "gold_doc_ids": [f"d{i * 5}"]}
               for i in range(documents // 5)]
    paths = folder / "corpus.jsonl", folder / "queries.jsonl"
    for path, rows in zip(paths, (docs, queries)):
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return paths


def batch(count: int, root: Path) -> dict:
    """Start ``count`` runs at once on a new Prefect home and one store; wait for all."""
    docs, queries = corpus(root)
    home, store = root / f"prefect-{count}", root / f"store-{count}"
    env = {**{k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "RBENCH_", "MLFLOW_"))},
           "PREFECT_HOME": str(home), "RBENCH_STORE": str(store), "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    commands = []
    for i in range(count):
        config = root / f"run-{count}-{i}.yaml"
        config.write_text(json.dumps({
            "name": f"together-{i}", "depth": 10, "subsample": {"size": "all"}, "metrics": {"k": [1, 5]},
            "datasets": [{"name": "gen", "adapter": "jsonl", "params": {"corpus": str(docs), "queries": str(queries)}}],
            "retrievers": [{"name": "bm25s"}]}))
        commands.append([str(Path(sys.executable).parent / "rbench"), "run", str(config)])
    started = time.perf_counter()
    procs = [(subprocess.Popen(c, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT), time.perf_counter())
             for c in commands]
    results = []
    for proc, begun in procs:
        _, status, usage = os.wait4(proc.pid, 0)
        output = proc.stdout.read().decode(errors="replace")
        results.append((os.waitstatus_to_exitcode(status), time.perf_counter() - begun, usage.ru_maxrss / 1024,
                        output))
    wall = time.perf_counter() - started
    failed = [(rc, out.strip().splitlines()[-3:]) for rc, _, _, out in results if rc != 0]
    return {"count": count, "failures": len(failed), "wall": wall, "slowest": max(r[1] for r in results),
            "rss": max(r[2] for r in results), "failed": failed}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--counts", type=int, nargs="+", default=[6, 12])
    args = parser.parse_args()
    print(f"machine: {platform.node()} {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; "
          "each command: rbench run of BM25s (bm25s) on a generated 400-document corpus, 80 queries, one store, "
          "a new PREFECT_HOME per batch")
    worst = 0
    with tempfile.TemporaryDirectory() as tmp:
        for count in args.counts:
            found = batch(count, Path(tmp))
            worst = max(worst, found["failures"])
            print(f"{count} at once: {found['failures']} failed (goal 0); batch wall {found['wall']:.1f} s, slowest "
                  f"command {found['slowest']:.1f} s, peak RSS of the largest {found['rss']:.0f} MiB")
            for rc, tail in found["failed"]:
                print(f"  exit {rc}: {' | '.join(tail)}")
    return 1 if worst else 0


if __name__ == "__main__":
    sys.exit(main())
