"""A stop's traces: one line that says the run stopped, whichever path ends the process, and no
traceback from the stage futures the stop cancels."""

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


def test_a_stage_future_cancelled_by_a_stop_logs_no_traceback(tmp_path, caplog):
    @flow
    def cancelled_stage() -> None:
        sub = Submitter(str(tmp_path / "store"), ExecutionConfig())
        wrapped: Future = Future()
        future = PrefectConcurrentFuture(task_run_id=uuid.uuid4(), wrapped_future=wrapped)
        future.add_done_callback(lambda f: sub._progress("encode", "shard-0", f))
        wrapped.cancel()

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
