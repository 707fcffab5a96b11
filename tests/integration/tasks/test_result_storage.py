"""Where Prefect's cache records go: a block on the server naming a folder in the store."""

from __future__ import annotations

import pytest

from rbench.core.store import Store
from rbench.tasks.orchestration import RESULTS_FOLDER, result_storage

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
    name = result_storage(Store(tmp_path / "store"))
    assert len(calls) == 2
    assert LocalFileSystem.load(name.split("/", 1)[1]).basepath == str((tmp_path / "store").resolve() / RESULTS_FOLDER)


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
    assert len(set(first)) == 1 and second != first[0]
    assert calls == [str((tmp_path / s).resolve() / RESULTS_FOLDER) for s in ("a", "b")]
