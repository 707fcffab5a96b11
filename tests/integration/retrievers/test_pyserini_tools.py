"""Pyserini's own indexing and search commands run in the project's environment, through
``rbench-pyserini`` (Pyserini's ``python -m pyserini...`` asks the JVM for a module that the
packaged Java runtime lacks)."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib

import pytest

from tests.conftest import REPO, need

pytestmark = pytest.mark.slow
DOCS = [("d1", "the eiffel tower is in paris"), ("d2", "lucene is a java search library"),
        ("d3", "penguins cannot fly but they swim")]


def tool(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rbench.pyserini_tools", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=600)


def test_pyserini_indexes_and_searches_with_its_own_commands(tmp_path):
    need("pyserini")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "docs.jsonl").write_text("".join(json.dumps({"id": i, "contents": t}) + "\n" for i, t in DOCS))
    (tmp_path / "topics.tsv").write_text("q1\twhere is the eiffel tower\nq2\tcan penguins swim\n")
    built = tool("pyserini.index.lucene", "--collection", "JsonCollection", "--input", str(tmp_path / "docs"),
                 "--index", str(tmp_path / "index"), "--generator", "DefaultLuceneDocumentGenerator",
                 "--threads", "1", "--storePositions", "--storeDocvectors", "--storeRaw")
    assert built.returncode == 0, built.stderr[-3000:]
    assert "Total 3 documents indexed" in built.stdout + built.stderr
    searched = tool("pyserini.search.lucene", "--index", str(tmp_path / "index"), "--topics",
                    str(tmp_path / "topics.tsv"), "--output", str(tmp_path / "run.txt"), "--bm25", "--hits", "2")
    assert searched.returncode == 0, searched.stderr[-3000:]
    top = {line.split()[0]: line.split()[2] for line in (tmp_path / "run.txt").read_text().splitlines()
           if line.split()[3] == "1"}
    assert top == {"q1": "d1", "q2": "d3"}


def test_the_launcher_is_a_command_and_says_how_to_use_it():
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["rbench-pyserini"] == "rbench.pyserini_tools:main"
    bare = tool()
    assert bare.returncode == 2 and "usage: rbench-pyserini MODULE" in bare.stderr
    assert tool("--help").returncode == 0
