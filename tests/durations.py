"""Per-file test durations from a pytest JUnit XML report, longest first, so that each round can
plan the suite's time from the last CI run instead of guessing.

    python -m tests.durations test-results/junit.xml [--out test-results/durations-by-file.txt]

Each test case's time (setup, call and teardown, pytest's default ``junit_duration_report``) is
added to its file; the table lists seconds, tests and the share of the total per file.
"""

from __future__ import annotations

import argparse
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path


def by_file(report: Path) -> list[tuple[str, float, int]]:
    """``(test file, seconds, tests)`` per file of a JUnit XML report, longest first."""
    try:
        root = ET.parse(report).getroot()
    except (OSError, ET.ParseError) as e:
        raise SystemExit(f"{report} is not a readable JUnit XML report ({e}); run pytest with --junitxml={report}")
    seconds: dict[str, float] = defaultdict(float)
    tests: dict[str, int] = defaultdict(int)
    for case in root.iter("testcase"):
        parts = case.get("classname", "").split(".")
        module = [p for p in parts if not p[:1].isupper()]  # drop a test class name
        name = "/".join(module) + ".py" if module else "(unknown)"
        seconds[name] += float(case.get("time", 0) or 0)
        tests[name] += 1
    return sorted(((f, seconds[f], tests[f]) for f in seconds), key=lambda row: (-row[1], row[0]))


def table(rows: list[tuple[str, float, int]]) -> str:
    """The rows as aligned text with a total line."""
    total = sum(s for _, s, _ in rows) or 1.0
    lines = [f"{'seconds':>9} {'tests':>6} {'share':>6}  file"]
    lines += [f"{s:9.1f} {n:6d} {100 * s / total:5.1f}%  {f}" for f, s, n in rows]
    lines.append(f"{sum(s for _, s, _ in rows):9.1f} {sum(n for *_, n in rows):6d} 100.0%  (all)")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("report", type=Path, help="a pytest --junitxml report")
    parser.add_argument("--out", type=Path, help="also write the table here")
    args = parser.parse_args()
    text = table(by_file(args.report))
    print(text, end="")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
