"""The per-file durations table that each CI run prints from its JUnit report."""

from __future__ import annotations

import pytest

from tests.durations import by_file, table

REPORT = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest" tests="4">
<testcase classname="tests.unit.test_a" name="test_one" time="1.5" />
<testcase classname="tests.unit.test_a" name="test_two" time="0.5" />
<testcase classname="tests.system.test_b.TestGroup" name="test_three" time="6.0" />
<testcase classname="tests.system.test_b" name="test_four" time="2.0"><skipped /></testcase>
</testsuite></testsuites>"""


def test_durations_are_summed_per_file_longest_first(tmp_path):
    report = tmp_path / "junit.xml"
    report.write_text(REPORT)
    rows = by_file(report)
    assert rows == [("tests/system/test_b.py", 8.0, 2), ("tests/unit/test_a.py", 2.0, 2)]
    text = table(rows)
    assert "      8.0      2  80.0%  tests/system/test_b.py" in text and text.rstrip().endswith("10.0      4 100.0%  (all)")


def test_a_missing_report_says_how_to_make_one(tmp_path):
    with pytest.raises(SystemExit, match="--junitxml="):
        by_file(tmp_path / "none.xml")
