"""The "your own corpus" tutorial runs as shown: its files are written into an empty folder, its
command runs there, and the run prints the table the page shows (one `rbench run`: bm25s and
MiniLM on six objects, about 30 s of CPU); and the Python page runs as a notebook in a Jupyter
kernel on the same files in another empty folder, cold (about 40 s), printing what it shows."""

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


def _notebook_of(page: str) -> list[tuple[str, str]]:
    """``(code, shown output)`` of each ``python`` block of ``page`` and the block right after it."""
    blocks = re.findall(r"^```(\w+)\n(.*?)^```", page, flags=re.S | re.M)
    return [(code, blocks[i + 1][1] if i + 1 < len(blocks) and blocks[i + 1][0] != "python" else "")
            for i, (kind, code) in enumerate(blocks) if kind == "python"]


def test_the_python_page_runs_as_a_notebook_from_a_cold_start(tmp_path):
    """``docs/python.md`` cell by cell in a Jupyter kernel (a running event loop), on the tutorial's
    files and no store yet: every cell runs, each prints what the page shows (store keys and the
    folder aside),
    and Prefect's own records stay out of the cells' output. In a kernel ``rbench.run`` of a new
    experiment failed with "the flow ended Completed: None" (Prefect handed back a coroutine)."""
    import nbformat
    from nbclient import NotebookClient

    for name, body in marked_blocks(PAGE.read_text(), "file"):
        (tmp_path / name).write_text(body)
    cells = _notebook_of((REPO / "docs" / "python.md").read_text())
    assert len(cells) >= 5
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(code) for code, _ in cells])
    keep = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", str(tmp_path))}
    env = {**keep, "PREFECT_HOME": str(tmp_path / "prefect-home"), "PYTHONNOUSERSITE": "1"}
    NotebookClient(notebook, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}},
                   env=env).execute()
    assert (tmp_path / ".rbench" / "mlflow.db").is_file()
    for (code, shown), cell in zip(cells, notebook.cells):
        printed = "".join(o.get("text", "") or o.get("data", {}).get("text/plain", "") for o in cell.outputs)
        printed = printed.replace(str(tmp_path), "/home/me/my-corpus")  # the page's folder
        assert "prefect" not in printed.lower() and "Traceback" not in printed, (code, printed[-2000:])
        hashes = re.compile(r"[0-9a-f]{32}")
        lines = [hashes.sub("KEY", line.strip()) for line in shown.splitlines() if line.strip()]
        assert all(line in hashes.sub("KEY", printed) for line in lines), (code, lines, printed[-2000:])
