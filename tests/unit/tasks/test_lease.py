"""Leases and the store under many writers: one builder per key, dead builders' leftovers cleaned."""

from __future__ import annotations

import multiprocessing as mp
import os
import threading
import time
from pathlib import Path

import pytest

from rbench.core import lease
from rbench.core.lease import Lease, LeaseLost, Stopping
from rbench.core.session import RunSession, bound
from rbench.core.store import MANIFEST, Stage, Store


def _slow_build(folder, inputs, config, **options):
    marker = Path(config["log"])
    with open(marker, "a") as f:
        f.write(f"{os.getpid()}\n")
    time.sleep(1.0)
    (folder / "out.txt").write_text("done")
    return {}


def _worker(root: str, log: str, queue) -> None:
    artifact = Stage("slow", 1, _slow_build).run(Store(root), [], {"log": log})
    queue.put((os.getpid(), str(artifact.path), (artifact.path / "out.txt").read_text()))


def test_two_processes_building_one_key_build_it_once(tmp_path):
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    log = tmp_path / "builds.log"
    procs = [ctx.Process(target=_worker, args=(str(tmp_path / "store"), str(log), queue)) for _ in range(3)]
    for p in procs:
        p.start()
    results = [queue.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    assert len(log.read_text().split()) == 1  # one build, the others waited and reused it
    assert {r[1] for r in results} == {str(tmp_path / "store" / "slow" / results[0][1].rsplit("/", 1)[1])}
    assert {r[2] for r in results} == {"done"}


@pytest.mark.timing
def test_a_lease_whose_process_died_is_broken_at_once(tmp_path):
    ctx = mp.get_context("spawn")
    path = tmp_path / "k.lease"
    holder = ctx.Process(target=_hold_forever, args=(str(path),))
    holder.start()
    while not path.exists():
        time.sleep(0.05)
    holder.kill()
    holder.join()
    started = time.monotonic()
    with Lease(path, ttl=60):
        assert time.monotonic() - started < 5


def _hold_forever(path: str) -> None:
    Lease(Path(path), ttl=60).acquire()
    time.sleep(600)


@pytest.mark.timing
def test_a_lease_without_heartbeat_is_broken_after_the_ttl(tmp_path):
    path = tmp_path / "k.lease"
    path.write_text('{"owner": "other-node:1:x"}')  # a holder on another host that stopped beating
    started = time.monotonic()
    with Lease(path, ttl=1.0, poll=0.05) as lease:
        assert 1.0 <= time.monotonic() - started < 10
        assert lease.holder() == lease.token


def test_a_live_lease_is_kept_alive_and_waited_for(tmp_path):
    path = tmp_path / "k.lease"
    first = Lease(path, ttl=1.0)
    assert first.try_acquire()
    second = Lease(path, ttl=1.0, poll=0.05)
    with pytest.raises(TimeoutError):
        second.acquire(timeout=3.0)  # the heartbeat keeps it fresh for longer than the ttl
    first.release()
    assert second.try_acquire()
    second.release()


def test_a_stop_between_registering_a_lease_and_starting_its_heartbeat_releases_it(tmp_path):
    """A stop (the session's ``release_leases``, from a signal handler on the taking thread) that
    comes after the lease is registered and before its heartbeat runs: the lease is released and
    the taker told to stop. Seen once as ``cannot join thread before it is started`` on a
    cancelled deployed run."""

    class StopOnAdd(set):
        def add(self, item):
            super().add(item)
            session.release_leases()

    session = RunSession()
    session.leases = StopOnAdd()
    errors: list[BaseException] = []

    def take():
        try:
            with bound(session):
                Lease(tmp_path / "k.lease").try_acquire()
        except BaseException as e:
            errors.append(e)

    taker = threading.Thread(target=take, daemon=True)
    taker.start()
    taker.join(10)
    assert not taker.is_alive(), "taking the lease deadlocked with the stop"
    assert [type(e) for e in errors] == [Stopping], errors
    assert not (tmp_path / "k.lease").exists()


def test_a_run_session_holds_its_own_leases_and_a_stop_releases_only_them(tmp_path):
    """Two runs in one process (a notebook's): a stop of one releases its leases and refuses it new
    ones, while the other's stay held and it takes new ones; a lease taken outside any run
    belongs to none. Hand count: two leases in the stopped run, one in the other."""
    stopped, going = RunSession(), RunSession()
    outside = Lease(tmp_path / "outside.lease")
    assert outside.try_acquire()
    held = {}
    for name, session, keys in (("stopped", stopped, ["a", "b"]), ("going", going, ["c"])):
        with bound(session):
            held[name] = [Lease(tmp_path / f"{key}.lease") for key in keys]
            assert all(taken.try_acquire() for taken in held[name])
    assert stopped.leases == set(held["stopped"]) and going.leases == set(held["going"])
    assert stopped.release_leases() == 2
    assert not (tmp_path / "a.lease").exists() and not (tmp_path / "b.lease").exists()
    assert (tmp_path / "c.lease").exists() and (tmp_path / "outside.lease").exists()
    with bound(stopped), pytest.raises(Stopping, match="this run is stopping"):
        Lease(tmp_path / "d.lease").try_acquire()
    with bound(going):
        again = Lease(tmp_path / "d.lease")
        assert again.try_acquire() and again in going.leases
    again.release()
    assert again not in going.leases and not (tmp_path / "d.lease").exists()
    assert going.release_leases() == 1 and not (tmp_path / "c.lease").exists()
    outside.release()
    assert not (tmp_path / "outside.lease").exists()


def test_a_builder_whose_lease_was_taken_publishes_nothing(tmp_path):
    store = Store(tmp_path)

    def build(folder, inputs, config, **options):
        (folder / "out.txt").write_text("late")
        lease_file = tmp_path / "demo" / ".locks" / Stage("demo", 1, build).key([], {})
        lease_file.write_text('{"owner": "someone-else"}')  # as a waiter that broke our lease
        return {}

    with pytest.raises(LeaseLost):
        Stage("demo", 1, build).run(store, [], {})
    assert not [p for p in (tmp_path / "demo").iterdir() if not p.name.startswith(".")]


def _taken_over(tmp_path: Path, key: str) -> None:
    """What a waiter that broke our lease does: take the lease, clear our temporaries, publish
    (which removes the checkpoint folder)."""
    import shutil

    (tmp_path / "demo" / ".locks" / key).write_text('{"owner": "someone-else"}')
    for folder in (tmp_path / "demo").glob(".tmp-*"):
        shutil.rmtree(folder)
    shutil.rmtree(tmp_path / "demo" / f".partial-{key}", ignore_errors=True)


def test_a_builder_whose_lease_was_broken_stops_with_lease_lost_and_leaves_no_chunks(tmp_path):
    import pyarrow as pa

    store = Store(tmp_path)

    def resumable(folder, inputs, config, checkpoint, **options):
        checkpoint.write_parquet("batch-0.parquet", pa.table({"x": [1]}))
        _taken_over(tmp_path, Stage("demo", 1, resumable, resumable=True).key([], {}))
        checkpoint.write_parquet("batch-1.parquet", pa.table({"x": [2]}))  # must not be written
        return {}

    with pytest.raises(LeaseLost):
        Stage("demo", 1, resumable, resumable=True).run(store, [], {})
    assert not any((tmp_path / "demo").glob(".partial-*"))

    def writes_into_its_folder(folder, inputs, config, **options):
        _taken_over(tmp_path, Stage("demo", 2, writes_into_its_folder).key([], {}))
        (folder / "out.txt").write_text("late")  # the folder is gone: FileNotFoundError underneath
        return {}

    with pytest.raises(LeaseLost, match="FileNotFoundError"):
        Stage("demo", 2, writes_into_its_folder).run(store, [], {})


def test_checkpoints_of_published_artifacts_are_cleaned(tmp_path):
    store = Store(tmp_path)
    artifact = Stage("demo", 1, lambda folder, inputs, config: (folder / "o").write_text("x") and {}).run(
        store, [], {})
    orphan = tmp_path / "demo" / f".partial-{artifact.key}"
    orphan.mkdir()
    (orphan / "batch-9.parquet").write_bytes(b"late")
    unfinished = tmp_path / "demo" / ".partial-0123"
    unfinished.mkdir()
    assert store.clean_temporaries() == 1
    assert not orphan.exists() and unfinished.exists()


def test_temporaries_of_dead_builds_are_removed_but_not_of_live_ones(tmp_path):
    store = Store(tmp_path)
    dead = tmp_path / "index" / ".tmp-deadbeef-1234abcd"
    live = tmp_path / "index" / ".tmp-cafe-5678abcd"
    for folder in (dead, live):
        folder.mkdir(parents=True)
        (folder / "part.bin").write_bytes(b"x")
    holder = store.lease("index", "cafe")
    assert holder.try_acquire()
    try:
        assert store.clean_temporaries() == 1
    finally:
        holder.release()
    assert not dead.exists() and live.exists()


def test_a_healthy_artifact_is_never_replaced(tmp_path):
    store = Store(tmp_path)
    calls = []

    def build(folder, inputs, config, **options):
        calls.append(1)
        (folder / "out.txt").write_text("v")
        return {}

    first = Stage("demo", 1, build).run(store, [], {})
    inode = (first.path / MANIFEST).stat().st_ino
    store.build("demo", first.key, lambda folder, checkpoint: pytest.fail("rebuilt a healthy artifact"))
    assert (first.path / MANIFEST).stat().st_ino == inode and calls == [1]


def _batches(folder, inputs, config, checkpoint, **options):
    import pyarrow as pa

    for i in range(3):
        name = f"batch-{i:09d}.parquet"
        if not checkpoint.done(name):
            checkpoint.write_parquet(name, pa.table({"x": [i]}))
    total = sum(checkpoint.read_parquet(f"batch-{i:09d}.parquet").column("x")[0].as_py() for i in range(3))
    (folder / "total.txt").write_text(str(total))
    return {"redone": checkpoint.redone}


def test_a_damaged_checkpoint_item_is_redone_and_counted_and_verify_finds_it(tmp_path):
    import pyarrow as pa

    from rbench.core.store import Checkpoint

    store = Store(tmp_path)
    stage = Stage("retrieve", 1, _batches, resumable=True)
    key = stage.key([], {})
    partial = Checkpoint(tmp_path / "retrieve" / f".partial-{key}")
    partial.write_parquet("batch-000000001.parquet", pa.table({"x": [1]}))
    partial.write_parquet("batch-000000002.parquet", pa.table({"x": [2]}))
    partial.path("batch-000000000.parquet").write_bytes(b"junk")  # no record: a 4-byte junk item
    partial.path("batch-000000002.parquet").write_bytes(b"PAR1" + bytes(20))  # record no longer matches
    assert sorted(store.verify_checkpoints()) == [("retrieve", key, "batch-000000000.parquet"),
                                                  ("retrieve", key, "batch-000000002.parquet")]
    artifact = stage.run(store, [], {})
    assert artifact.info["redone"] == 2 and (artifact.path / "total.txt").read_text() == "3"
    assert store.verify_checkpoints() == []


def _full(*args, **kwargs):
    import errno

    raise OSError(errno.ENOSPC, "No space left on device")


def test_a_lease_whose_owner_cannot_be_written_leaves_no_file(tmp_path, monkeypatch):
    """On a full disk the lease file was created empty and left: no owner, so nobody released it
    and every other run waited out its ttl (issue 60)."""
    monkeypatch.setattr(lease.json, "dump", _full)
    held = Lease(tmp_path / ".locks" / "key")
    with pytest.raises(OSError, match="No space left"):
        held.try_acquire()
    assert not held.path.exists() and held._session is None


def test_a_full_disk_mid_build_is_one_error_naming_the_store_and_the_rerun_builds_it(tmp_path):
    """A build that fills the disk (ENOSPC from the builder's write) ends with one RbenchError that
    names the store, what it had written and what is free, keeps nothing half-written, releases the
    lease and keeps the build's finished items; the rerun after space was freed resumes from them."""
    import errno

    import numpy as np

    from rbench.core.errors import DiskFull

    store = Store(tmp_path / "store")

    def fills_the_disk(folder: Path, checkpoint) -> dict:
        checkpoint.write_array("chunk-0.npy", np.zeros(4, dtype=np.float32))
        (folder / "part.bin").write_bytes(b"x" * 2_500_000)
        raise OSError(errno.ENOSPC, "No space left on device", str(folder / "more.bin"))

    with pytest.raises(DiskFull) as raised:
        store.build("index", "k1", fills_the_disk)
    message = str(raised.value)
    assert message.startswith(f"the disk holding the store {store.root} is full (No space left on device (")
    assert "while building index k1; it had written 2.5 MB of it; " in message and " MB free now. " in message
    assert "--store DIR" in message and "resumes" in message
    assert not list((store.root / "index").glob(".tmp-*"))
    assert not [p for p in (store.root / "index" / ".locks").glob("*") if p.is_file()]

    def resumes(folder: Path, checkpoint) -> dict:
        assert checkpoint.done("chunk-0.npy")  # the item finished before the disk filled
        (folder / "part.bin").write_bytes(b"x")
        return {}

    artifact, built = store.build("index", "k1", resumes)
    assert built and artifact.file("part.bin").read_bytes() == b"x"


def test_a_full_disk_when_the_lease_is_taken_is_the_same_error(tmp_path, monkeypatch):
    monkeypatch.setattr(lease.json, "dump", _full)
    from rbench.core.errors import DiskFull

    store = Store(tmp_path / "store")
    with pytest.raises(DiskFull, match=f"the disk holding the store {store.root} is full"):
        store.build("index", "k1", lambda folder, checkpoint: {})
    assert not [p for p in (store.root / "index" / ".locks").glob("*") if p.is_file()]
