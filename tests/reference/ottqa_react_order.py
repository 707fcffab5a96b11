"""Whether ARM's own ReAct returns the same ranking twice: ARM's ``_group_and_sort_by_source`` and final
selection (``tests/reference/arm_react_order.py``) over the same collected hits, each run in a process of its
own under ``PYTHONHASHSEED`` 0..N-1, on the OTT-QA dev slice of ``ottqa_drr.py``, with the packaged MiniLM for
bge-m3.

    python tests/reference/ottqa_react_order.py --arm-repo ARM_GIT_DIR [--seeds 5]

prints, per query, how many distinct rankings the seeds gave and the recall at 5 and 10 of the gold table under
each (ARM's document id ``page_title_source``), and the mean recall per seed. A measurement, not a test: ARM's
RetrievalResult hashes its object text (``src/retrieval/base.py``), and the hash of a string differs between
processes unless ``PYTHONHASHSEED`` is fixed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from tests.reference.ottqa_drr import ARM_COMMIT, build_slice, embedder_folder  # noqa: E402


def main() -> None:
    from tests.benchmarks.arm_protocol_cost import arm_sample
    from tests.conftest import ARM_PYTHON

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=str(REPO.parent / "shared" / "data"))
    parser.add_argument("--arm-repo", required=True, help="a clone or bare mirror of apostolhskouk/ARM")
    parser.add_argument("--queries", type=int, default=5)
    parser.add_argument("--tables", type=int, default=60)
    parser.add_argument("--seeds", type=int, default=5)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="ottqa-react-order-"))
    objects, queries = build_slice(Path(args.data), args.queries, args.tables)
    dev = json.loads((Path(args.data) / "ottqa" / "released_data" / "dev.json").read_text(encoding="utf-8"))
    gold = [f"{dev[i]['table_id']}_table_0" for i in arm_sample([q["question"] for q in dev])[:args.queries]]
    (work / "corpus.jsonl").write_text("".join(json.dumps(o, ensure_ascii=False) + "\n" for o in objects))
    (work / "spec.json").write_text(json.dumps({"commit": ARM_COMMIT, "corpus": str(work / "corpus.jsonl"),
                                                "queries": queries, "embedder": embedder_folder()}))
    answers = []
    for seed in range(args.seeds):
        out = work / f"seed{seed}.json"
        subprocess.run([str(ARM_PYTHON), str(REPO / "tests/reference/arm_react_order.py"), args.arm_repo,
                        str(work / "spec.json"), str(out)], check=True, env={**os.environ, "PYTHONHASHSEED": str(seed)},
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        answers.append(json.loads(out.read_text())["answers"])

    def recall(ranking: list[str], wanted: str, k: int) -> float:
        return float(wanted in list(dict.fromkeys(ranking))[:k])

    for q, question in enumerate(queries):
        rankings = {tuple(a[q]) for a in answers}
        at5 = [recall(a[q], gold[q], 5) for a in answers]
        at10 = [recall(a[q], gold[q], 10) for a in answers]
        print(f"query {q}: {len(answers[0][q])} hits, {len(rankings)} distinct rankings over {args.seeds} seeds; "
              f"R@5 {at5}, R@10 {at10}")
    for seed, a in enumerate(answers):
        r5 = sum(recall(a[q], gold[q], 5) for q in range(len(queries))) / len(queries)
        r10 = sum(recall(a[q], gold[q], 10) for q in range(len(queries))) / len(queries)
        print(f"PYTHONHASHSEED={seed}: mean R@5 {r5:.2f}, R@10 {r10:.2f}")


if __name__ == "__main__":
    main()
