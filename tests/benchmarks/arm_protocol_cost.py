"""The ARM report's BM25 cells on OTT-QA two ways: a plain Pyserini script of ARM's protocol, and
rbench's cell (``rbench run`` of the study), cold, alternating, each a fresh process.

The plain script follows apostolhskouk/ARM at 5a6cb92 as its code reads: ARM's query sample
(``src/utils/sample_queries.py``: ``TfidfVectorizer()``, ``KMeans(n_clusters=100,
random_state=42)``, per centroid the nearest query of all), TARGET's OTT-QA rows serialized by
``scripts/target/serialize_tables.py``, a Pyserini ``JsonCollection`` index with
``DefaultLuceneDocumentGenerator`` and documents ``doc_<line>`` in corpus order
(``src/retrieval/bm25.py``), the default searcher, 30 hits, and the evaluator of
``src/utils/evaluator.py`` (first n unique tables, precision over the tables kept). TARGET's
corpus order is not in the raw files: the tables are taken in file-name order.

Prints, per variant, the median wall time and peak RSS (wait4's, of the command's process and
its waited-for children) and the ratio rbench / plain against the target of at most 1.25 (issue 67); then
the plain script's cells, rbench's, and the knife edges: queries whose first n unique tables
change when hits that Lucene scores alike (within ``--tie`` of each other before Anserini's
tie-breaker, which orders them by document id) are reordered, with the gold's best and worst
outcome. Machine and settings are printed with the numbers.

    python tests/benchmarks/arm_protocol_cost.py --data ../shared/data --rounds 3
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
CUTS = (1, 3, 5, 10)


def arm_sample(questions: list[str], k: int = 100) -> list[int]:
    """``subsample_json`` of ARM's ``src/utils/sample_queries.py`` (every OTT-QA question has gold)."""
    from sklearn.cluster import KMeans
    from sklearn.feature_extraction.text import TfidfVectorizer

    tfidf = TfidfVectorizer().fit_transform(questions)
    distances = KMeans(n_clusters=k, random_state=42).fit(tfidf).transform(tfidf)
    return [int(distances[:, j].argmin()) for j in range(k)]


def arm_rows(data: Path) -> list[tuple[str, str]]:
    """``(table id, object text)`` of every row, as ``scripts/target/serialize_tables.py`` writes it
    from TARGET's OTT-QA context (``section_title``)."""
    records = []
    for path in sorted(glob.glob(str(data / "ottqa" / "tables" / "*.json"))):
        table = json.loads(Path(path).read_text(encoding="utf-8"))
        headers = [h[0] for h in table["header"]]
        name = table.get("section_title")
        for row in table["data"]:
            values = [cell[0] for cell in row]
            if len(values) != len(headers):
                continue
            cells = " , ".join(f"[H] {h}: {v}" for h, v in zip(headers, values))
            records.append((table["uid"], f"{name} [SEP] {cells}" if name else cells))
    return records


def unique_tables(hits: list[tuple[str, float]]) -> list[str]:
    """The hits' tables de-duplicated in rank order."""
    return list(dict.fromkeys(table for table, _ in hits))


def scores(hits: list[tuple[str, float]], gold: str) -> dict[str, float]:
    """ARM's evaluator for one query with one gold table: P, R, F1, PR at each n."""
    out, tables = {}, unique_tables(hits)
    for n in CUTS:
        kept = tables[:n]
        found = float(gold in kept)
        p = found / len(kept) if kept else 0.0
        f1 = 2 * p * found / (p + found) if p + found else 0.0
        out.update({f"precision@{n}": p, f"recall@{n}": found, f"f1@{n}": f1, f"perfect_recall@{n}": found})
    return out


def tie_groups(hits: list[tuple[str, float]], tie: float) -> list[list[tuple[str, float]]]:
    """Runs of consecutive hits whose scores lie within ``tie`` of the run's first."""
    groups: list[list[tuple[str, float]]] = []
    for hit in hits:
        if groups and groups[-1][0][1] - hit[1] <= tie:
            groups[-1].append(hit)
        else:
            groups.append([hit])
    return groups


def outcome_range(hits: list[tuple[str, float]], gold: str, n: int, tie: float) -> tuple[float, float]:
    """The gold's recall@n with its tied hits put last, and put first, within each tie group."""
    worst = [h for g in tie_groups(hits, tie) for h in sorted(g, key=lambda h: h[0] == gold)]
    best = [h for g in tie_groups(hits, tie) for h in sorted(g, key=lambda h: h[0] != gold)]
    return scores(worst, gold)[f"recall@{n}"], scores(best, gold)[f"recall@{n}"]


def plain(data: Path, out: Path) -> None:
    """The plain Pyserini script: sample, serialize, index, search, evaluate; writes ``out`` (JSON)."""
    from rbench.retrievers.java import start_pyserini

    questions = json.loads((data / "ottqa" / "released_data" / "dev.json").read_text(encoding="utf-8"))
    picks = arm_sample([q["question"] for q in questions])
    rows = arm_rows(data)
    work = Path(tempfile.mkdtemp(prefix="arm-plain-"))
    (work / "docs").mkdir()
    with open(work / "docs" / "prepared_data.jsonl", "w", encoding="utf-8") as f:
        for i, (_, text) in enumerate(rows):
            f.write(json.dumps({"id": f"doc_{i}", "contents": text}, ensure_ascii=False) + "\n")
    start_pyserini()
    from jnius import autoclass
    from pyserini.search.lucene import LuceneSearcher

    autoclass("io.anserini.index.IndexCollection").main([
        "-collection", "JsonCollection", "-input", str(work / "docs"), "-index", str(work / "index"),
        "-generator", "DefaultLuceneDocumentGenerator", "-threads", str(os.cpu_count() or 1),
        "-storePositions", "-storeDocvectors", "-storeRaw"])
    searcher = LuceneSearcher(str(work / "index"))
    texts = [questions[i]["question"] for i in picks]
    found = searcher.batch_search(texts, [f"q{i}" for i in range(len(texts))], k=30, threads=os.cpu_count() or 1)
    runs = {questions[i]["question_id"]: [(rows[int(h.docid[4:])][0], float(h.score)) for h in found[f"q{j}"]]
            for j, i in enumerate(picks)}
    gold = {questions[i]["question_id"]: questions[i]["table_id"] for i in picks}
    out.write_text(json.dumps({"runs": runs, "gold": gold}), encoding="utf-8")


def timed(command: list[str]) -> tuple[float, float]:
    """Wall seconds and peak RSS (MiB) of one process; it must succeed."""
    started = time.perf_counter()
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(command)} failed: {proc.stderr.read().decode()[-2000:]}")
    return wall, usage.ru_maxrss / 1024


def means(per_query: dict[str, dict[str, float]]) -> dict[str, float]:
    names = next(iter(per_query.values()))
    return {m: round(statistics.fmean(q[m] for q in per_query.values()), 4) for m in names}


def rbench_cells(store: Path) -> tuple[dict[str, float], dict[str, list[tuple[str, float]]], dict[str, str]]:
    """rbench's cells, runs (tables per query) and gold from the newest run in ``store``."""
    import pyarrow.parquet as pq

    (run,) = glob.glob(str(store / "retrieve" / "*" / "run.parquet"))
    (queries,) = glob.glob(str(store / "subsample" / "*" / "queries.parquet"))
    runs: dict[str, list[tuple[str, float]]] = {}
    for r in sorted(pq.read_table(run).to_pylist(), key=lambda r: (r["query_id"], r["rank"])):
        runs.setdefault(r["query_id"], []).append((r["doc_id"].split(" :: ", 1)[1], r["score"]))
    gold = {q["query_id"]: q["gold_doc_ids"][0].split(" :: ", 1)[1] for q in pq.read_table(queries).to_pylist()}
    return means({q: scores(runs.get(q, []), g) for q, g in gold.items()}), runs, gold


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    parser.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tie", type=float, default=1e-4, help="scores this close count as tied (default 1e-4)")
    parser.add_argument("--plain-out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    data = args.data.resolve()
    if args.plain_out:
        plain(data, args.plain_out)
        return
    work = Path(tempfile.mkdtemp(prefix="arm-cost-"))
    study = yaml.safe_load((REPO / "configs" / "studies" / "arm-table6-cpu.yaml").read_text())
    study["retrievers"] = [r for r in study["retrievers"] if r["name"] == "bm25"]
    config = work / "arm-bm25.yaml"
    config.write_text(yaml.safe_dump(study))
    rbench = str(Path(sys.executable).parent / "rbench")
    times: dict[str, list[tuple[float, float]]] = {"plain": [], "rbench": []}
    for i in range(args.rounds):
        order = ("plain", "rbench") if i % 2 == 0 else ("rbench", "plain")
        for variant in order:
            if variant == "plain":
                times["plain"].append(timed([sys.executable, __file__, "--data", str(data),
                                             "--plain-out", str(work / "plain.json")]))
            else:
                store = work / f"store-{i}"
                times["rbench"].append(timed([rbench, "run", str(config), "--mirror", str(data),
                                              "--store", str(store)]))
    print(f"machine: {platform.node()}, {os.cpu_count()} cores, Python {platform.python_version()}; "
          f"{args.rounds} cold rounds, alternating; BM25 on OTT-QA dev, ARM's protocol")
    median = {v: (statistics.median(w for w, _ in t), max(m for _, m in t)) for v, t in times.items()}
    for variant, (wall, rss) in median.items():
        print(f"  {variant:7s} median {wall:6.1f} s, peak RSS {rss:7.0f} MiB")
    ratio = median["rbench"][0] / median["plain"][0]
    print(f"  rbench / plain: {ratio:.2f} (target <= 1.25: {'met' if ratio <= 1.25 else 'NOT met'})")

    found = json.loads((work / "plain.json").read_text())
    plain_runs, plain_gold = found["runs"], found["gold"]
    ours, runs, gold = rbench_cells(work / "store-0")
    theirs = means({q: scores([tuple(h) for h in plain_runs[q]], g) for q, g in plain_gold.items()})
    print("cells (plain | rbench):")
    for n in CUTS:
        print(f"  @{n:<2d} " + "  ".join(f"{m.split('@')[0]} {theirs[f'{m}']:.4f} | {ours[f'{m}']:.4f}"
                                         for m in (f"precision@{n}", f"recall@{n}", f"f1@{n}", f"perfect_recall@{n}")))
    print(f"knife edges (recall@n moves when hits within {args.tie} are reordered):")
    for name, edge_runs in (("plain", {q: [tuple(h) for h in r] for q, r in plain_runs.items()}), ("rbench", runs)):
        for q, g in (plain_gold if name == "plain" else gold).items():
            for n in (1, 3, 5):
                low, high = outcome_range(edge_runs.get(q, []), g, n, args.tie)
                if low != high:
                    now = scores(edge_runs.get(q, []), g)[f"recall@{n}"]
                    print(f"  {name}: query {q} @{n}: gold {g} found {now:.0f} now, "
                          f"{low:.0f}..{high:.0f} over its ties")


if __name__ == "__main__":
    main()
