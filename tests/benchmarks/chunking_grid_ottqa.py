"""Build a Chroma-format chunking evaluation set from OTT-QA dev and run the full grid on it.

Each corpus is the linked passages of one OTT-QA table (``passages/<table>.json``) joined
into one text; each question whose ``answer-node`` names one of those passages gets that
passage's span as its reference. Then runs ``rbench chunking`` on it twice (cold, then
cached) and prints both wall times and the cost per combination.

    python tests/benchmarks/chunking_grid_ottqa.py --mirror ../shared/data --tables 6
"""

from __future__ import annotations

import argparse
import csv
import json
import subprocess
import sys
import time
from pathlib import Path

import yaml


def build_set(mirror: Path, out: Path, tables: int) -> tuple[int, int]:
    """Write ``out/corpora/*.md`` and ``out/questions_df.csv``; return (corpora, questions)."""
    questions = json.loads((mirror / "ottqa/released_data/dev.traced.json").read_text())
    by_table: dict[str, list[dict]] = {}
    for q in questions:
        if any(n[3] == "passage" for n in q["answer-node"]):
            by_table.setdefault(q["table_id"], []).append(q)
    chosen = sorted(by_table, key=lambda t: -len(by_table[t]))[:tables]
    (out / "corpora").mkdir(parents=True, exist_ok=True)
    rows = []
    for table in chosen:
        passages = json.loads((mirror / "ottqa/passages" / f"{table}.json").read_text())
        text, spans = "", {}
        for link, passage in sorted(passages.items()):
            spans[link] = (len(text), len(text) + len(passage))
            text += passage + "\n\n"
        (out / "corpora" / f"{table}.md").write_text(text, encoding="utf-8")
        for q in by_table[table]:
            links = sorted({n[2] for n in q["answer-node"] if n[3] == "passage" and n[2] in spans})
            refs = [{"content": text[spans[l][0]:spans[l][1]], "start_index": spans[l][0], "end_index": spans[l][1]}
                    for l in links]
            if refs:
                rows.append([q["question"], json.dumps(refs), table])
    with open(out / "questions_df.csv", "w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows([["question", "references", "corpus_id"], *rows])
    return len(chosen), len(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mirror", type=Path, default=Path("../shared/data"))
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/rbench-chunking"))
    parser.add_argument("--tables", type=int, default=6)
    parser.add_argument("--model", default="sentence-transformers/all-MiniLM-L6-v2")
    args = parser.parse_args()
    corpora, questions = build_set(args.mirror, args.workdir / "set", args.tables)
    config = args.workdir / "grid.yaml"
    config.write_text(yaml.safe_dump({"name": "chunking-ottqa", "data": str(args.workdir / "set"),
                                      "store": str(args.workdir / "store"), "model": args.model}))
    print(f"set: {corpora} corpora, {questions} questions (OTT-QA dev passages); model {args.model}")
    for attempt in ("cold", "cached"):
        started = time.perf_counter()
        out = subprocess.run([sys.executable, "-m", "rbench.cli", "chunking", str(config)],
                             check=True, capture_output=True, text=True).stdout
        seconds = time.perf_counter() - started
        print(f"{attempt}: {seconds:.1f}s for 125 combinations ({seconds / 125:.2f}s each)")
        print("\n".join(line for line in out.splitlines() if line.startswith(("best:", "stages:"))))
    print(out[out.index("| chunk_size"):out.index("best:")])


if __name__ == "__main__":
    main()
