"""The "your own corpus" tutorial runs as shown: its files are written into an empty folder, its
command runs there, and the run prints the table the page shows (one `rbench run`: bm25s and
MiniLM on six objects, about 30 s of CPU), and so does the Python page's notebook on the same
files (cached: a few seconds)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

PAGE = REPO / "docs" / "own-corpus.md"
pytestmark = pytest.mark.slow


def marked_blocks(text: str, marker: str) -> list[tuple[str, str]]:
    """``(argument, body)`` of each fenced block right after ``<!-- marker[: argument] -->``."""
    pattern = rf"<!-- {marker}(?:: (\S+))? -->\n```\w*\n(.*?)^```"
    return [(m.group(1) or "", m.group(2)) for m in re.finditer(pattern, text, flags=re.S | re.M)]


def test_the_own_corpus_tutorial_runs_and_prints_the_table_it_shows(tmp_path):
    text = PAGE.read_text()
    files = marked_blocks(text, "file")
    assert [name for name, _ in files] == ["corpus.jsonl", "queries.jsonl", "my-corpus.yaml"]
    for name, body in files:
        (tmp_path / name).write_text(body)
    ((_, command),) = marked_blocks(text, "run")
    ((_, shown),) = marked_blocks(text, "output")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    for name in ("RBENCH_STORE", "RBENCH_MIRROR", "MLFLOW_TRACKING_URI", "PREFECT_API_URL"):
        env.pop(name, None)
    done = subprocess.run(command, shell=True, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    out = done.stdout + done.stderr
    assert done.returncode == 0 and "Traceback" not in out, out[-4000:]
    assert (tmp_path / ".rbench" / "mlflow.db").is_file()  # the store the page names
    assert not re.search(r"^\S+ INFO \S+\s+\S+\s+cached ", out, flags=re.M), out[-3000:]  # an empty store: all ran
    assert re.search(r"stages: \d+ ran, 0 cached", out), out[-3000:]
    lines = [line.strip() for line in shown.splitlines() if line.strip()]
    assert lines and all(line in out for line in lines), (lines, out[-3000:])

    # the Python page's notebook on the same files: every stage cached and logged, its table as shown
    python_page = (REPO / "docs" / "python.md").read_text()
    first = python_page.split("```text\n", 1)[1].split("```", 1)[0]
    script = ("import rbench\nresults = rbench.run('my-corpus.yaml')\nprint(results.table())\n"
              "print(rbench.compare(results, measures=['recall@3', 'ndcg@3'], baseline='bm25s'))\n")
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    table = [line.strip() for line in first.splitlines()[1:] if line.strip()]
    compared = python_page.split("table = rbench.compare(", 1)[1].split("```text\n", 1)[1].split("```", 1)[0]
    assert table and all(line in done.stdout for line in table), done.stdout
    assert all(line.strip() in done.stdout for line in compared.splitlines() if line.strip()), done.stdout
