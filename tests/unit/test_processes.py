"""Stage processes: a call runs in a pooled spawned child, its errors and log records come back,
a child that dies is named, and a build's lease reaches it as a check of the same token."""

from __future__ import annotations

import logging
import os
import signal

import pytest

from rbench.core.errors import DataError
from rbench.core.lease import Lease, LeaseLost
from rbench.core.processes import STAGE_PROCESSES, Pool, StageProcess, StageProcessError, call_in_process
from rbench.core.store import Checkpoint


def pid_and_log(value: int) -> tuple[int, int]:
    logging.getLogger("rbench").info("working on %d", value)
    logging.getLogger("rbench").debug("not shown")
    return os.getpid(), value * 2


def refuse() -> None:
    raise DataError("corpus.jsonl:3 is not valid JSON")


def divide() -> float:
    return 1 / 0


def die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def variable(name: str) -> str | None:
    return os.environ.get(name)


def progress_bar() -> int:
    from tqdm import tqdm

    return sum(tqdm(range(3)))


def write_item(checkpoint: Checkpoint) -> str:
    checkpoint.write_parquet("batch-0.parquet", __import__("pyarrow").table({"a": [1]}))
    return "written"


def test_a_call_runs_in_a_reused_child_and_its_log_records_reach_the_caller(caplog):
    caplog.set_level(logging.INFO, logger="rbench")
    first, doubled = call_in_process(pid_and_log, 21)
    second, _ = call_in_process(pid_and_log, 1)
    assert doubled == 42 and first != os.getpid() and second == first
    assert [r.getMessage() for r in caplog.records if r.name == "rbench"] == ["working on 21", "working on 1"]
    assert first in {w.pid for w in STAGE_PROCESSES.idle}


def test_a_call_logs_at_the_levels_set_when_the_call_is_made(caplog):
    """A pooled child made while rbench logged warnings only still sends its info records
    once the caller asks for them (a worker keeps its stage process across tests and runs)."""
    STAGE_PROCESSES.close_idle()
    caplog.set_level(logging.WARNING, logger="rbench")
    first, _ = call_in_process(pid_and_log, 2)
    caplog.set_level(logging.INFO, logger="rbench")
    second, _ = call_in_process(pid_and_log, 3)
    assert second == first
    assert [r.getMessage() for r in caplog.records if r.name == "rbench"] == ["working on 3"]


def test_a_call_sees_the_environment_as_it_is_when_the_call_is_made(monkeypatch):
    monkeypatch.delenv("RBENCH_TEST_KEY", raising=False)
    assert call_in_process(variable, "RBENCH_TEST_KEY") is None  # a child is pooled
    monkeypatch.setenv("RBENCH_TEST_KEY", "k1")
    assert call_in_process(variable, "RBENCH_TEST_KEY") == "k1"
    monkeypatch.delenv("RBENCH_TEST_KEY")
    assert call_in_process(variable, "RBENCH_TEST_KEY") is None


def test_errors_come_back_as_they_are_or_named_with_the_childs_traceback():
    with pytest.raises(DataError, match="corpus.jsonl:3 is not valid JSON"):
        call_in_process(refuse)
    with pytest.raises(StageProcessError) as e:
        call_in_process(divide)
    assert "ZeroDivisionError: division by zero" in str(e.value) and "in divide" in str(e.value)


def test_a_child_that_dies_is_named_and_not_reused():
    worker = StageProcess()
    pid = worker.pid
    with pytest.raises(StageProcessError, match=rf"stage process \(pid {pid}\) ended during die with exit code -9"):
        worker.call(die)
    assert not worker.alive()
    STAGE_PROCESSES.put(worker)
    assert pid not in {w.pid for w in STAGE_PROCESSES.idle}


def test_a_checkpoint_in_a_child_writes_only_while_the_parent_holds_the_lease(tmp_path):
    lease = Lease(tmp_path / ".locks" / "key")
    with lease:
        assert call_in_process(write_item, Checkpoint(tmp_path / "partial", lease)) == "written"
    assert (tmp_path / "partial" / "batch-0.parquet").is_file()
    with pytest.raises(LeaseLost, match="was taken over"):
        call_in_process(write_item, Checkpoint(tmp_path / "partial", lease))


def test_a_child_that_showed_a_progress_bar_leaves_no_semaphore_behind(tmp_path):
    """tqdm's bar in a child (model loading shows one) made a multiprocessing lock that the
    child, ended with ``os._exit``, never unlinked: the resource tracker warned of a leaked
    semaphore at every run's end."""
    import subprocess
    import sys

    from tests.conftest import REPO

    code = ("from rbench.core.processes import StageProcess\n"
            "from tests.unit.test_processes import progress_bar\n"
            "child = StageProcess()\n"
            "print(child.call(progress_bar))\n"
            "child.close()\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "3", proc.stderr[-2000:]
    assert "leaked semaphore" not in proc.stderr, proc.stderr[-2000:]


def blocked_signals(conn, parent: int) -> None:
    """A child's target: send back the signals blocked as it starts (before :func:`as_child`)."""
    conn.send(sorted(signal.pthread_sigmask(signal.SIG_BLOCK, set())))


def test_a_child_starts_with_the_group_signals_blocked_even_when_it_is_the_first():
    """The first child a process starts also starts multiprocessing's resource tracker, whose start
    unblocks SIGINT in the starting thread; a Ctrl-C to the group while that child's Python was
    starting raised KeyboardInterrupt in its bootstrap (CI, stop 87). In a fresh interpreter, so
    that this child is its first."""
    import subprocess
    import sys

    from tests.conftest import REPO

    code = ("import signal\n"
            "from rbench.core.processes import Child\n"
            "from tests.unit.test_processes import blocked_signals\n"
            "child = Child(blocked_signals, 'probe')\n"
            "print(sorted(int(s) for s in child._conn.recv()))\n"
            "print(sorted(signal.pthread_sigmask(signal.SIG_BLOCK, set())))\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    in_child, in_parent = proc.stdout.split("\n")[:2]
    assert in_child == str(sorted(int(s) for s in (signal.SIGHUP, signal.SIGINT))), proc.stdout
    assert in_parent == "[]", proc.stdout


class _Worker:
    def __init__(self):
        self.open = True

    def alive(self) -> bool:
        return self.open

    def close(self) -> None:
        self.open = False


def test_closing_idle_workers_leaves_busy_ones_alone():
    pool = Pool(_Worker)
    first, second, busy = pool.take(), pool.take(), pool.take()
    pool.put(first)
    pool.put(second)
    assert pool.close_idle() == 2
    assert not first.open and not second.open and busy.open
    assert pool.take() is not first and pool.close_idle() == 0


def test_closing_idle_workers_can_keep_the_last_used():
    pool = Pool(_Worker)
    first, second = pool.take(), pool.take()
    pool.put(first)
    pool.put(second)
    assert pool.close_idle(keep=1) == 1
    assert not first.open and second.open
    assert pool.take() is second and pool.close_idle(keep=1) == 0
