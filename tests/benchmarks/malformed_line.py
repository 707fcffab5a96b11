"""How fast a malformed last line of a large JSON-lines corpus is named, against a clean pass.

Writes a corpus of ``--lines`` lines (default 10^6) twice: clean, and with its last line cut
short. Then, in one process and alternating, for ``--rounds`` rounds: the prepare stage's
columnar read of the clean file (``jsonl`` adapter, :meth:`object_batches`), the same read of
the bad file until its DataError (which must name the last line), and, as the reference of
what it replaced, the row reader from line 1 until the same error. Prints medians, the ratio
bad / clean (target: at most 1.2) and the peak RSS of the process.

    .venv/bin/python -m tests.benchmarks.malformed_line --lines 1000000
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import tempfile
import time
from pathlib import Path

WORDS = "alpha beta gamma delta epsilon zeta theta kappa lambda sigma omega table row value season".split()


def write_corpus(path: Path, lines: int, bad_last: bool) -> None:
    """``lines`` JSON objects of about 60 bytes; with ``bad_last`` the last one lacks its brace."""
    with open(path, "w", encoding="utf-8") as f:
        for i in range(lines - 1):
            f.write(json.dumps({"doc": f"d{i // 4}", "text": " ".join(WORDS[(i + j) % 15] for j in range(6))}) + "\n")
        last = json.dumps({"doc": "last", "text": "the end"})
        f.write((last[:-1] if bad_last else last) + "\n")


def params_for(corpus: Path):
    from rbench.dataset_adapters.jsonl import JsonlParams

    return JsonlParams.model_validate({"corpus": str(corpus), "queries": str(corpus), "text_field": "text",
                                       "doc_id_fields": ["doc"]})


def columnar(folder: Path) -> tuple[float, str]:
    """Seconds of the columnar read of ``folder``'s corpus, and its error (empty when clean)."""
    from rbench.core.errors import DataError
    from rbench.dataset_adapters.jsonl import Jsonl

    started = time.perf_counter()
    try:
        for _ in Jsonl().object_batches(folder, params_for(folder / "corpus.jsonl")):
            pass
    except DataError as e:
        return time.perf_counter() - started, str(e)
    return time.perf_counter() - started, ""


def rows(folder: Path) -> tuple[float, str]:
    """Seconds of the row reader from line 1 until its error (the path taken before)."""
    from rbench.core.errors import DataError
    from rbench.dataset_adapters.base import read_jsonl

    started = time.perf_counter()
    try:
        for _ in read_jsonl(folder / "corpus.jsonl", shown=folder / "corpus.jsonl"):
            pass
    except DataError as e:
        return time.perf_counter() - started, str(e)
    return time.perf_counter() - started, ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lines", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        clean, bad = Path(tmp, "clean"), Path(tmp, "bad")
        for folder, broken in ((clean, False), (bad, True)):
            folder.mkdir()
            write_corpus(folder / "corpus.jsonl", args.lines, broken)
        size = (bad / "corpus.jsonl").stat().st_size
        times: dict[str, list[float]] = {"clean columnar": [], "bad columnar": [], "bad row reader (before)": []}
        for _ in range(args.rounds):
            seconds, error = columnar(clean)
            assert not error, error
            times["clean columnar"].append(seconds)
            seconds, error = columnar(bad)
            assert f"corpus.jsonl:{args.lines} is not valid JSON" in error, error
            times["bad columnar"].append(seconds)
            seconds, error = rows(bad)
            assert f"corpus.jsonl:{args.lines} is not valid JSON" in error, error
            times["bad row reader (before)"].append(seconds)
    medians = {name: statistics.median(values) for name, values in times.items()}
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; "
          f"{args.lines:,} lines, {size / 1e6:.0f} MB; {args.rounds} rounds alternating, medians")
    for name, value in medians.items():
        print(f"  {name:<26} {value:7.2f} s  ({value / medians['clean columnar']:.2f}x the clean columnar pass)")
    print(f"  peak RSS of the process: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")
    met = medians['bad columnar'] <= 1.2 * medians['clean columnar']
    print(f"target: bad / clean <= 1.2: {'met' if met else 'NOT met'}")


if __name__ == "__main__":
    main()
