"""Per-test and per-file durations from a pytest JUnit XML report, and each file's time budget.

    python -m tests.durations test-results/junit.xml [--out test-results/durations-by-file.txt]
        [--budgets tests/budgets.json] [--record tests/durations.json [--whole-suite]]

Each test case's time (setup, call and teardown, pytest's default ``junit_duration_report``) is
added to its file; the table lists seconds, tests, the share of the total and the file's budget.
With ``--budgets`` the command fails when a file ran more than ``tolerance`` (0.5: half) over its
budget and by more than ``slack`` seconds (60: a file of seconds can wait that long for a busy
worker's first imports), or has no budget: raise the budget in the same commit that makes the file
slower, and the check passes again. Where the budgets file names the suite's ``total`` seconds in the
run they were measured from, and this run's total is larger (a slower or busier machine, measured in this same run),
each budget is scaled by that ratio first: a file fails for growing slower than the rest, not for the
machine. ``--record`` writes the per-test times that order the next parallel run
(longest first, see ``tests/conftest.py``) into the record, over the times it held; with
``--whole-suite`` (the report is of every test, as ``make test``'s is) the record holds this run's
tests only, so a test removed or renamed leaves no time behind.
"""

from __future__ import annotations

import argparse
import json
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path


def by_test(report: Path) -> dict[str, float]:
    """Seconds per test node id (``tests/unit/test_a.py::test_one[x]``) of a JUnit XML report;
    the ``@group`` suffix pytest-xdist adds under ``--dist loadgroup`` is dropped."""
    try:
        root = ET.parse(report).getroot()
    except (OSError, ET.ParseError) as e:
        raise SystemExit(f"{report} is not a readable JUnit XML report ({e}); run pytest with --junitxml={report}")
    seconds: dict[str, float] = defaultdict(float)
    for case in root.iter("testcase"):
        parts = case.get("classname", "").split(".")
        module = [p for p in parts if not p[:1].isupper()]
        classes = parts[len(module):]
        path = "/".join(module) + ".py" if module else "(unknown)"
        name = case.get("name", "")
        if name.rfind("@") > name.rfind("]"):
            name = name[:name.rfind("@")]
        seconds["::".join([path, *classes, name])] += float(case.get("time", 0) or 0)
    return dict(seconds)


def by_file(report: Path) -> list[tuple[str, float, int]]:
    """``(test file, seconds, tests)`` per file of a JUnit XML report, longest first."""
    seconds: dict[str, float] = defaultdict(float)
    tests: dict[str, int] = defaultdict(int)
    for nodeid, s in by_test(report).items():
        name = nodeid.split("::", 1)[0]
        seconds[name] += s
        tests[name] += 1
    return sorted(((f, seconds[f], tests[f]) for f in seconds), key=lambda row: (-row[1], row[0]))


def load_budgets(path: Path) -> tuple[dict[str, float], float, float | None, float]:
    """``(seconds per test file, tolerance, the suite's total seconds they were measured in or None,
    slack seconds)`` from a budgets file, checked."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        files, tolerance = data["files"], float(data["tolerance"])
        total = None if data.get("total") is None else float(data["total"])
        slack = float(data.get("slack", 0))
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise SystemExit(f"{path}: not a budgets file ({e}); it holds {{\"tolerance\": 0.5, \"total\": 9000, "
                         "\"slack\": 60, \"files\": {\"tests/unit/test_a.py\": 12, ...}} (total and slack optional)")
    bad = {f: s for f, s in files.items() if not isinstance(s, (int, float)) or s <= 0}
    if bad or tolerance < 0 or slack < 0 or (total is not None and total <= 0):
        raise SystemExit(f"{path}: budgets and the total are positive seconds, the tolerance and the slack >= 0 "
                         f"(got {bad or (tolerance if tolerance < 0 else slack if slack < 0 else total)})")
    return {f: float(s) for f, s in files.items()}, tolerance, total, slack


def over_budget(rows: list[tuple[str, float, int]], budgets: dict[str, float], tolerance: float,
                total: float | None = None, slack: float = 0.0) -> list[str]:
    """One line per file that ran past ``budget * (1 + tolerance) + slack`` or has no budget; with the
    ``total`` the budgets were measured in, each budget is first scaled by this run's total over it
    where that ratio is above 1."""
    speed = max(1.0, sum(s for _, s, _ in rows) / total) if total else 1.0
    scaled = f" ({speed:.2f} x the file's: the whole suite ran {speed:.2f} x its measured total)" if speed > 1 else ""
    problems = []
    for name, seconds, _ in rows:
        budget = budgets.get(name)
        if budget is None:
            problems.append(f"{name}: {seconds:.0f} s and no budget; add it to the budgets file")
        elif seconds > budget * speed * (1 + tolerance) + slack:
            over = f"{tolerance:.0%}" + (f" and {slack:.0f} s" if slack else "")
            problems.append(f"{name}: {seconds:.0f} s, over its budget of {budget * speed:.0f} s{scaled} by more "
                            f"than {over}; make it faster, or raise its budget in the same commit")
    return problems


def table(rows: list[tuple[str, float, int]], budgets: dict[str, float] | None = None) -> str:
    """The rows as aligned text with a total line (and each file's budget, where given)."""
    total = sum(s for _, s, _ in rows) or 1.0
    lines = [f"{'seconds':>9} {'tests':>6} {'share':>6}{' budget' if budgets is not None else ''}  file"]
    for f, s, n in rows:
        budget = "" if budgets is None else f" {budgets[f]:6.0f}" if f in budgets else "      -"
        lines.append(f"{s:9.1f} {n:6d} {100 * s / total:5.1f}%{budget}  {f}")
    lines.append(f"{sum(s for _, s, _ in rows):9.1f} {sum(n for *_, n in rows):6d} 100.0%"
                 f"{'       ' if budgets is not None else ''}  (all)")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Print the table; write it, the per-test record, and check the budgets where asked."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("report", type=Path, help="a pytest --junitxml report")
    parser.add_argument("--out", type=Path, help="also write the table here")
    parser.add_argument("--budgets", type=Path, help="fail when a file runs past its budget here (tests/budgets.json)")
    parser.add_argument("--record", type=Path, help="update the per-test seconds here (tests/durations.json)")
    parser.add_argument("--whole-suite", action="store_true",
                        help="the report ran every test: the record keeps no time of a test it lacks")
    args = parser.parse_args(argv)
    rows = by_file(args.report)
    budgets, tolerance, total, slack = load_budgets(args.budgets) if args.budgets else (None, 0.0, None, 0.0)
    text = table(rows, budgets)
    print(text, end="")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text, encoding="utf-8")
    if args.record:
        kept = json.loads(args.record.read_text())["tests"] if args.record.is_file() and not args.whole_suite else {}
        tests = dict(sorted({**kept, **{k: round(v, 1) for k, v in by_test(args.report).items()}}.items()))
        args.record.write_text(json.dumps({"source": str(args.report), "tests": tests}, indent=1) + "\n",
                               encoding="utf-8")
    problems = over_budget(rows, budgets, tolerance, total, slack) if budgets is not None else []
    for line in problems:
        print(f"budget: {line}")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
