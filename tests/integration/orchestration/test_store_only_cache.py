"""The store is the only cache (issue 67, item 2): stage tasks run with no Prefect cache and no
result persistence, and each asks the store."""

from __future__ import annotations

import shutil

import pytest

from rbench.core.store import Stage

pytestmark = pytest.mark.usefixtures("prefect_server")


def _write(folder, inputs, config, **options):
    (folder / "out.txt").write_text(str(config["x"]))
    return {}


def test_the_store_alone_says_ran_or_cached_and_prefect_keeps_no_records(tmp_path, monkeypatch):
    """On the main of 6e8e733 Prefect kept a second cache of records in ``<store>/_prefect-results``
    (a block saved on the server), kept in step with the store by a cache policy."""
    from prefect import flow
    from prefect.filesystems import LocalFileSystem

    from rbench.orchestration.runner import call_stage

    saved = []
    monkeypatch.setattr(LocalFileSystem, "save", lambda self, *a, **k: saved.append(self))
    stage, store = Stage("tiny-write", 1, _write), tmp_path / "store"

    @flow
    def three_stages():
        report: list[dict] = []
        artifacts = [call_stage(stage, str(store), [], {"x": x}, f"x={x}", report) for x in (1, 2, 2)]
        return report, artifacts

    report, artifacts = three_stages()
    assert [r.status for r in report] == ["ran", "ran", "cached"]
    assert [(a.path / "out.txt").read_text() for a in artifacts] == ["1", "2", "2"]
    shutil.rmtree(artifacts[0].path)  # gone from the store: the next run builds it, whatever Prefect saw
    report, _ = three_stages()
    assert [r.status for r in report] == ["ran", "cached", "cached"]
    assert saved == [] and sorted(p.name for p in store.iterdir()) == ["tiny-write"]


def test_a_stage_task_run_carries_no_tags_so_it_asks_the_server_for_no_concurrency_slot(tmp_path, monkeypatch):
    """On main 5aabe61 every stage's task run carried the flow's ``rbench`` tag, and Prefect's task
    engine asked the server for a ``tag:rbench`` slot before each stage: one request per stage, which a
    server busy with six runs answered 503 (issue 81, item 2)."""
    import prefect.task_engine
    from prefect import flow, tags
    from prefect.client.orchestration import get_client
    from prefect.runtime import flow_run

    from rbench.config import ExecutionConfig
    from rbench.orchestration.runner import Submitter

    asked: list[list[str]] = []
    real = prefect.task_engine._concurrency
    monkeypatch.setattr(prefect.task_engine, "_concurrency", lambda names, **k: asked.append(names) or real(names, **k))
    stage = Stage("tiny-write", 1, _write)

    @flow
    def tagged_flow():
        future = Submitter(str(tmp_path / "store"), ExecutionConfig()).submit(stage, [], {"x": 1}, "x=1")
        future.result()
        return future.task_run_id, flow_run.id

    with tags("rbench"):
        task_run_id, flow_run_id = tagged_flow()
    with get_client(sync_client=True) as client:
        assert client.read_flow_run(flow_run_id).tags == ["rbench"]
        assert client.read_task_run(task_run_id).tags == []
    assert asked == [[]]
