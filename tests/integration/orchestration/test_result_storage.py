"""Where Prefect's cache records go: a block on the server naming a folder in the store."""

from __future__ import annotations

import inspect

import pytest

from rbench.core.store import Stage, Store
from rbench.orchestration.runner import RESULTS_FOLDER, call_stage, result_storage

pytestmark = pytest.mark.usefixtures("prefect_server")


def test_a_block_save_that_fails_as_a_lost_race_does_is_retried(tmp_path, monkeypatch):
    """On a Postgres server, clients that save their first block at the same moment race to register
    the block type, and the losers' saves fail with ObjectNotFound (reproduced with three processes on
    a fresh server; see tests/benchmarks/server_database.py); the save is retried."""
    from prefect.exceptions import ObjectNotFound
    from prefect.filesystems import LocalFileSystem

    real, calls = LocalFileSystem.save, []

    def lose_the_first_race(self, *args, **kwargs):
        calls.append(args)
        if len(calls) == 1:
            raise ObjectNotFound(None)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(LocalFileSystem, "save", lose_the_first_race)
    block = result_storage(Store(tmp_path / "store"))
    assert len(calls) == 2
    saved = LocalFileSystem.load(block._block_document_name)
    assert saved.basepath == block.basepath == str((tmp_path / "store").resolve() / RESULTS_FOLDER)


def test_a_store_block_is_saved_once_per_server_by_a_process(tmp_path, monkeypatch):
    """A grid calls one stage at a time, each through a new Submitter: the store's block is saved on
    the first call only (each save is a request the server answers), and a second store gets its own."""
    from prefect.filesystems import LocalFileSystem

    real, calls = LocalFileSystem.save, []

    def counted(self, *args, **kwargs):
        calls.append(self.basepath)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(LocalFileSystem, "save", counted)
    first = [result_storage(Store(tmp_path / "a")) for _ in range(3)]
    second = result_storage(Store(tmp_path / "b"))
    assert all(b is first[0] for b in first) and second.basepath != first[0].basepath
    assert calls == [str((tmp_path / s).resolve() / RESULTS_FOLDER) for s in ("a", "b")]


def _write(folder, inputs, config, **options):
    (folder / "out.txt").write_text(str(config["x"]))
    return {}


def test_a_stage_gets_its_store_block_without_a_lookup_on_the_server(tmp_path, monkeypatch):
    """Each stage task is handed the saved block itself: given its name, Prefect looked the block up
    on the server twice per task (about 50 ms of CPU each, 302 lookups in the seed grid)."""
    from prefect import flow
    from prefect.client.orchestration import PrefectClient, SyncPrefectClient

    lookups = []

    def counted(real):
        if inspect.iscoroutinefunction(real):
            async def lookup(client, name, *args, **kwargs):
                lookups.append(name)
                return await real(client, name, *args, **kwargs)
            return lookup

        def lookup(client, name, *args, **kwargs):
            lookups.append(name)
            return real(client, name, *args, **kwargs)
        return lookup

    for client in (PrefectClient, SyncPrefectClient):
        monkeypatch.setattr(client, "read_block_document_by_name", counted(client.read_block_document_by_name))
    stage, store = Stage("tiny-write", 1, _write), str(tmp_path / "store")

    @flow
    def three_stages():
        report: list[dict] = []
        artifacts = [call_stage(stage, store, [], {"x": x}, f"x={x}", report) for x in (1, 2, 2)]
        return report, artifacts

    report, artifacts = three_stages()
    assert [r["status"] for r in report] == ["ran", "ran", "cached"]
    assert [(a.path / "out.txt").read_text() for a in artifacts] == ["1", "2", "2"]
    assert lookups == []


ATTEMPTS: list[str] = []


def _fails_once_then_builds(folder, inputs, config):
    ATTEMPTS.append(config["error"])
    if len(ATTEMPTS) == 1 or config["error"] == "DataError":
        from rbench.core import errors

        raise getattr(errors, config["error"])(f"attempt {len(ATTEMPTS)}")
    (folder / "out.txt").write_text("built")
    return {"attempts": len(ATTEMPTS)}


@pytest.mark.parametrize("error, attempts", [("Unreachable", 2), ("DataError", 1)])
def test_a_stage_that_fails_with_a_transient_error_is_retried_by_prefect(tmp_path, error, attempts):
    """A stage declares its retries and the errors worth them (the download stage: ``Unreachable``);
    Prefect retries its task on those only: an unreachable source once more, a bad file never."""
    from prefect import flow

    from rbench.core.errors import DataError, Unreachable

    stage = Stage("flaky", 1, _fails_once_then_builds, retries=1, retry_delays=(0.0,), transient=(Unreachable,))
    ATTEMPTS.clear()

    @flow
    def one_stage(root: str):
        return call_stage(stage, root, [], {"error": error}, "flaky", [])

    if error == "DataError":
        with pytest.raises(DataError, match="attempt 1"):
            one_stage(str(tmp_path / "store"))
    else:
        assert (one_stage(str(tmp_path / "store")).path / "out.txt").read_text() == "built"
    assert ATTEMPTS == [error] * attempts
