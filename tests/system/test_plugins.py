"""A retriever from another installed package, found through the ``rbench.retrievers``
entry-point group and run in the benchmark flow like a built-in one."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
import yaml

from tests.conftest import REPO, tiny_dataset

PLUGIN = '''
"""An out-of-tree retriever: word overlap between query and object."""

import json
from pathlib import Path

import pyarrow.parquet as pq
from pydantic import BaseModel, ConfigDict

from rbench.retrievers.base import Retriever


class OverlapParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    lowercase: bool = True


class Overlap(Retriever):
    name = "overlap"
    description = "number of shared words (a plugin)"
    Params = OverlapParams

    def _words(self, text):
        return set((text.lower() if self.params.lowercase else text).split())

    def index(self, corpus, folder):
        table = pq.read_table(corpus, columns=["object_id", "text"])
        rows = dict(zip(table.column(0).to_pylist(), table.column(1).to_pylist()))
        (Path(folder) / "objects.json").write_text(json.dumps(rows))
        return {"indexed": len(rows)}

    def load(self, folder):
        self._objects = {o: self._words(t) for o, t in json.loads((Path(folder) / "objects.json").read_text()).items()}

    def search(self, queries, k):
        Path(__file__).with_name("searched").write_text("yes")
        out = {}
        for qid, text in queries.items():
            words = self._words(text)
            scored = sorted(((len(words & w), o) for o, w in self._objects.items()), key=lambda s: (-s[0], s[1]))
            out[qid] = [(o, float(s)) for s, o in scored[:k] if s > 0]
        return out
'''


@pytest.fixture
def plugin_site(tmp_path):
    """A folder on PYTHONPATH holding the plugin module and its distribution's entry point,
    which is how an installed package looks to importlib.metadata."""
    site = tmp_path / "site"
    (site / "rbench_overlap").mkdir(parents=True)
    (site / "rbench_overlap" / "__init__.py").write_text(textwrap.dedent(PLUGIN))
    info = site / "rbench_overlap-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: rbench-overlap\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[rbench.retrievers]\noverlap = rbench_overlap:Overlap\n")
    return site


def test_an_entry_point_retriever_runs_in_the_flow(tmp_path, tiny_files, plugin_site, prefect_server):
    from prefect.settings import PREFECT_API_URL

    from rbench.tracking.read import load_results

    corpus, queries = tiny_files
    config = tmp_path / "exp.yaml"
    config.write_text(yaml.safe_dump({
        "name": "plugin", "store": str(tmp_path / "store"), "depth": 5, "subsample": {"size": 5},
        "metrics": {"k": [1, 5]}, "execution": {"runner": "sequential"},
        "datasets": [tiny_dataset(corpus, queries)],
        "retrievers": [{"name": "overlap"}, {"name": "bm25s"}],
    }))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(plugin_site), str(REPO)]),
           "PREFECT_API_URL": str(PREFECT_API_URL.value())}
    listed = subprocess.run([sys.executable, "-m", "rbench.cli", "list", "retrievers"], env=env, cwd=tmp_path,
                            capture_output=True, text=True, timeout=120)
    assert listed.returncode == 0 and "overlap" in listed.stdout, listed.stderr
    done = subprocess.run([sys.executable, "-m", "rbench.cli", "run", str(config)], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert (plugin_site / "rbench_overlap" / "searched").read_text() == "yes"
    _, rows, _ = load_results(f"sqlite:///{tmp_path / 'store' / 'mlflow.db'}", ["latest"])
    recall = {r["retriever"]: r["value"] for r in rows if r["metric"] == "recall" and r["k"] == 5}
    assert set(recall) == {"overlap", "bm25s"} and recall["overlap"] > 0
