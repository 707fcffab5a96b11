"""The chunking grid flow on a small set in Chroma's format: results, caching, figures."""

from __future__ import annotations

import pytest
import yaml

from rbench.core.errors import DamagedArtifact
from rbench.flows.chunking_grid import chunking_grid
from tests.unit.tasks.test_chunking_eval import make_eval_set

pytestmark = pytest.mark.usefixtures("prefect_server")  # one Prefect test server per session


def _config(tmp_path, **overrides):
    cfg = {"store": str(tmp_path / "store"), "data": str(make_eval_set(tmp_path / "set") if not (tmp_path / "set").exists()
                                                       else tmp_path / "set"),
           "model": "static-64d", "chunk_sizes": [20, 40], "overlaps": [0.0, 0.25], "n": [1, 2], **overrides}
    path = tmp_path / f"grid-{len(cfg['n'])}-{cfg.get('scope', 'corpus')}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return str(path)


def test_grid_runs_caches_and_reuses_chunks_for_new_n(tmp_path):
    first = chunking_grid(_config(tmp_path))
    assert len(first.results) == 2 * 2 * 2
    ran = [s.stage for s in first.stages if s.status == "ran"]
    assert ran.count("chunk_embed") == 4 and ran.count("chunk_eval") == 8
    for r in first.results:
        s = r["summary"]
        assert all(0 <= s[m]["mean"] <= 1 for m in ("recall", "precision", "f1", "iou", "precision_omega"))
    bigger_n = {r["chunk_size"]: r["summary"]["recall"]["mean"] for r in first.results if r["n"] == 2 and r["overlap"] == 0}
    smaller_n = {r["chunk_size"]: r["summary"]["recall"]["mean"] for r in first.results if r["n"] == 1 and r["overlap"] == 0}
    assert all(bigger_n[s] >= smaller_n[s] for s in bigger_n)  # retrieving more never lowers recall

    again = chunking_grid(_config(tmp_path))
    assert {s.status for s in again.stages} == {"cached"}

    more_n = chunking_grid(_config(tmp_path, n=[1, 2, 3]))
    ran = [(s.stage, s.label) for s in more_n.stages if s.status == "ran"]
    assert ran and all(stage == "chunk_eval" and label.endswith("N=3") for stage, label in ran)

    pooled = chunking_grid(_config(tmp_path, n=[1, 2, 3], scope="pooled", units="cl100k_tokens"))
    ran = {s.stage for s in pooled.stages if s.status == "ran"}
    assert ran == {"chunk_eval"}  # chunks and embeddings are shared with the per-corpus runs
    assert all(0 <= r["summary"][m]["mean"] <= 1 for r in pooled.results for m in r["summary"])

    folder = tmp_path / "store" / "reports"
    names = {p.name for report in folder.iterdir() for p in report.iterdir()}
    assert {"grid.csv", "grid.md", "best_boxplots.png", "references_per_question.png",
            "reference_length_tokens.png"} <= names

    one = chunking_grid(_config(tmp_path, n=[1], corpora=["finance"]))
    assert {s.stage for s in one.stages if s.status == "ran"} == {"chunk_embed", "chunk_eval"}
    table = (tmp_path / one.report_folder / "grid.md").read_text()
    assert "over 2 questions of finance" in table  # the two finance questions only

    from rbench.tracking.read import load_chunking_table

    uri = f"sqlite:///{tmp_path / 'store' / 'mlflow.db'}"
    run, shown = load_chunking_table(uri, one.mlflow_run_id, "rbench-chunking")
    assert shown == table and run.info.run_id == one.mlflow_run_id
    assert {"rbench.config_sha256", "rbench.device", "rbench.python"} <= set(run.data.tags)  # every writer tags
    assert load_chunking_table(uri, "latest", "rbench-chunking")[1] == table
    (copy,) = (tmp_path / "store").rglob(f"{one.mlflow_run_id}/artifacts/*/grid.md")
    copy.write_text(copy.read_text().replace("finance", "fInance", 1))  # MLflow's copy, one byte, size kept
    with pytest.raises(DamagedArtifact, match=r"MLflow's copy of .*/grid.md in run \w+ \(.*\) is not the file "
                                              r"rbench logged .* Rerun `rbench chunking`"):
        load_chunking_table(uri, one.mlflow_run_id, "rbench-chunking")


def test_chunking_search_finds_a_best_setting_and_reuses_trials(tmp_path):
    from rbench.flows.chunking_grid import chunking_search

    search = {"space": {"chunk_size": {"low": 20, "high": 40, "integer": True}, "n": {"low": 1, "high": 3, "integer": True}},
              "strategy": "random", "budget": 3, "seed": 0, "metric": "f1"}
    first = chunking_search(_config(tmp_path, search=search))
    assert len(first.trials) == 3 and first.best["value"] == max(t["value"] for t in first.trials)
    again = chunking_search(_config(tmp_path, search=search))
    assert [t["params"] for t in again.trials] == [t["params"] for t in first.trials]
    assert all(s.status == "cached" for s in again.stages)
    from mlflow.tracking import MlflowClient  # logged like every run flow (on main of 6e8e733 it logged nothing)

    client = MlflowClient(first.tracking_uri)
    parent = client.get_run(first.mlflow_run_id)
    assert parent.data.tags["rbench.kind"] == "chunking-search"
    assert parent.data.metrics["best_f1_mean"] == first.best["value"]
    children = client.search_runs([parent.info.experiment_id],
                                  filter_string=f"tags.mlflow.parentRunId = '{first.mlflow_run_id}'")
    assert sorted(c.data.metrics["f1_mean"] for c in children) == sorted(t["value"] for t in first.trials)
    assert sum(c.data.metrics["stages_ran"] for c in children) == sum(s.status == "ran" for s in first.stages) - 1
