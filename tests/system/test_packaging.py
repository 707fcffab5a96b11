"""``pip install`` puts one top-level package in site-packages, with its data files."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile

from tests.conftest import REPO


def test_the_wheel_holds_one_top_level_package_and_its_data(tmp_path):
    source = tmp_path / "src"  # a copy: pip builds in the source folder and would leave build/ there
    shutil.copytree(REPO, source, ignore=shutil.ignore_patterns(".git", ".venv*", ".rbench", "build", "*.egg-info",
                                                                "__pycache__", "report"))
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-v", str(source), "-w",
                           str(tmp_path / "dist")], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    warned = [line for line in (done.stdout + done.stderr).splitlines()
              if "Warning:" in line and ("setuptools" in line or "pyproject" in line)]
    assert not warned, warned  # the project's packaging is clean: an SPDX license, every packaged folder listed
    (wheel,) = (tmp_path / "dist").glob("rbench-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")} == {"rbench"}
    for expected in ("rbench/flows/benchmark.py", "rbench/tasks/prepare.py", "rbench/retrievers/dense.py",
                     "rbench/evaluation/metrics/recall.py", "rbench/core/store.py", "rbench/llm/client.py",
                     "rbench/dataset_adapters/manifests/fetaqa.json", "rbench/retrievers/encodings.yaml",
                     "rbench/retrievers/jvm-logging.properties", "rbench/evaluation/published/pyserini-beir-bm25.yaml",
                     "rbench/prompts/decompose.yaml", "rbench/evaluation/published/anserini-bright-bm25.yaml"):
        assert expected in names, expected
