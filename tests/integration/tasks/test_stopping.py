"""A stop's traces: one line that says the run stopped, whichever path ends the process, and no
traceback from the stage futures the stop cancels."""

import asyncio
import logging
import subprocess
import sys
import uuid
from concurrent.futures import Future

import pytest
from prefect import flow
from prefect.futures import PrefectConcurrentFuture

from rbench.config import ExecutionConfig
from rbench.tasks.orchestration import Submitter

pytestmark = pytest.mark.usefixtures("prefect_server")  # one Prefect test server per session


def _cancel(wrapped: Future) -> None:
    wrapped.cancel()


def _cancel_queued(wrapped: Future) -> None:
    """As Prefect's thread pool ends a task that was still queued when the stop came."""
    wrapped.set_running_or_notify_cancel()
    wrapped.set_exception(asyncio.CancelledError("Task run cancelled by the task runner"))


@pytest.mark.parametrize("cancel", [_cancel, _cancel_queued], ids=["cancelled", "cancelled-while-queued"])
def test_a_stage_future_cancelled_by_a_stop_logs_no_traceback(tmp_path, caplog, cancel):
    @flow
    def cancelled_stage() -> None:
        sub = Submitter(str(tmp_path / "store"), ExecutionConfig())
        wrapped: Future = Future()
        future = PrefectConcurrentFuture(task_run_id=uuid.uuid4(), wrapped_future=wrapped)
        future.add_done_callback(lambda f: sub._progress("encode", "shard-0", f))
        cancel(wrapped)

    with caplog.at_level(logging.DEBUG):
        cancelled_stage()
    assert not [r for r in caplog.records if r.exc_info], [r.getMessage() for r in caplog.records if r.exc_info]
    assert not [r for r in caplog.records if "shard-0" in r.getMessage()]


def test_a_run_that_prefect_stops_says_stopped_and_ends_with_the_signals_code():
    code = ("import time\nfrom rbench.core.stopping import exit_soon\n"
            "exit_soon(143, 0.2, reason='SIGTERM')\ntime.sleep(30)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 143
    assert proc.stderr.startswith("rbench: SIGTERM: stopped (0 lease(s) released)"), proc.stderr
    assert "next run resumes" in proc.stderr
