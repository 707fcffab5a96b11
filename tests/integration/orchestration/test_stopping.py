"""A stop's traces: one line that says the run stopped, whichever path ends the process, and no
traceback from the stage futures the stop cancels."""

import asyncio
import logging
import os
import subprocess
import sys
import time
import uuid
from concurrent.futures import Future

import pytest
from prefect import flow
from prefect.futures import PrefectConcurrentFuture
from prefect.states import Failed

from rbench.config import ExecutionConfig
from rbench.orchestration.runner import Submitter

pytestmark = pytest.mark.usefixtures("prefect_server")  # one Prefect test server per session


def _cancel(wrapped: Future) -> None:
    wrapped.cancel()


def _cancel_queued(wrapped: Future) -> None:
    """As Prefect's thread pool ends a task that was still queued when the stop came."""
    wrapped.set_running_or_notify_cancel()
    wrapped.set_exception(asyncio.CancelledError("Task run cancelled by the task runner"))


def _stage_future(tmp_path) -> Future:
    """The concurrent future of a stage task ``shard-0`` whose end a Submitter (in a flow) reports."""
    sub = Submitter(str(tmp_path / "store"), ExecutionConfig())
    wrapped: Future = Future()
    future = PrefectConcurrentFuture(task_run_id=uuid.uuid4(), wrapped_future=wrapped)
    future.add_done_callback(lambda f: sub._progress("encode", "shard-0", f))
    return wrapped


@pytest.mark.parametrize("cancel", [_cancel, _cancel_queued], ids=["cancelled", "cancelled-while-queued"])
def test_a_stage_future_cancelled_by_a_stop_logs_no_traceback(tmp_path, caplog, cancel):
    @flow
    def cancelled_stage() -> None:
        wrapped = _stage_future(tmp_path)
        cancel(wrapped)

    with caplog.at_level(logging.DEBUG):
        cancelled_stage()
    assert not [r for r in caplog.records if r.exc_info], [r.getMessage() for r in caplog.records if r.exc_info]
    assert not [r for r in caplog.records if "shard-0" in r.getMessage()]


def test_a_stage_that_fails_after_a_stop_logs_nothing_from_the_thread_that_ends_it(tmp_path, caplog):
    """A stop kills a stage's process, and its task fails once the interrupted block has ended; the
    future's done callback runs on the worker thread outside the run's context (concurrent.futures
    calls it after ``Context.run`` returned), where ``stopping()`` sees no run: on 4abb1ba the
    notebook cell showed ``encode ... failed StageProcessError`` after its stop line."""
    import threading

    from rbench.core.session import run_session

    @flow
    def stopped_stage() -> None:
        wrapped = _stage_future(tmp_path)
        wrapped.set_running_or_notify_cancel()
        session.stopping.set()
        failed = Failed(message="StageProcessError: the stage process ended during build_encode")
        ending = threading.Thread(target=wrapped.set_result, args=(failed,))
        ending.start()  # a new thread: an empty context, as the pool's own threads have outside a task
        ending.join()

    with caplog.at_level(logging.DEBUG), run_session() as session:
        stopped_stage()
    shown = [r.getMessage() for r in caplog.records if "shard-0" in r.getMessage() or r.exc_info]
    assert not shown, shown  # on 4abb1ba: 'encode shard-0 failed StageProcessError: ...'


def test_a_failed_stage_shows_its_line_once_in_a_notebook(tmp_path, monkeypatch, capsys):
    """In a notebook the cell shows a stage's line as printed text; Prefect's console handler (on
    the root logger) showed a failed stage's WARNING record again in its own format (on 8eecc92:
    twice)."""
    import io

    import rbench.orchestration.runner as runner

    console = io.StringIO()
    handler = logging.StreamHandler(console)
    logging.getLogger().addHandler(handler)
    monkeypatch.setattr(runner, "in_a_notebook", lambda: True)

    @flow
    def failed_stage() -> None:
        wrapped = _stage_future(tmp_path)
        wrapped.set_running_or_notify_cancel()
        wrapped.set_result(Failed(message="ValueError: a bad row"))

    try:
        failed_stage()
    finally:
        logging.getLogger().removeHandler(handler)
    printed = [line for line in capsys.readouterr().out.splitlines() if "shard-0" in line]
    assert [line.split()[:3] for line in printed] == [["encode", "shard-0", "failed"]] and "a bad row" in printed[0]
    assert "shard-0" not in console.getvalue(), console.getvalue()


def test_a_run_that_prefect_stops_says_stopped_and_ends_with_the_signals_code():
    code = ("import time\nfrom rbench.core.stopping import exit_soon\n"
            "exit_soon(143, 0.2, reason='SIGTERM')\ntime.sleep(30)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 143
    assert proc.stderr.startswith("rbench: SIGTERM: stopped (0 lease(s) released)"), proc.stderr
    assert "next run resumes" in proc.stderr


CHILD_DURING_THE_GRACE = """
import subprocess, sys, time
from rbench.core.session import run_session
from rbench.core.stopping import exit_soon, reaped_on_stop
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
with run_session(), reaped_on_stop(child):  # a deployed run's session (ended_by_termination opens it)
    exit_soon(143, 3.0, reason="SIGTERM")
    print("child ended" if child.poll() is not None else "child running", flush=True)
    time.sleep(30)
"""


def test_a_deployed_stop_ends_the_child_processes_before_its_grace_period():
    """A deployed run stopped by Prefect keeps its process for a few seconds so that Prefect can
    record the run's state; its stage and Lucene processes stop with the stop's line, so no
    progress or JVM output follows it."""
    proc = subprocess.run([sys.executable, "-c", CHILD_DURING_THE_GRACE], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 143, proc.stderr
    assert proc.stdout.strip() == "child ended"


HOLD_A_LEASE = """
import signal, sys, time
from rbench.core.lease import Lease
from rbench.core.stopping import stop_on_signals
# "terminal": SIGHUP's default, as a shell in a terminal starts it, even when the suite runs under nohup
signal.signal(signal.SIGHUP, signal.SIG_IGN if sys.argv[2] == "nohup" else signal.SIG_DFL)
stop_on_signals()
Lease(sys.argv[1]).acquire()
print("held", flush=True)
time.sleep(60)
"""


@pytest.mark.parametrize("started", ["terminal", "nohup"])
def test_a_hang_up_stops_like_sigterm_unless_started_under_nohup(tmp_path, started):
    """SIGHUP (a closed terminal, a dropped ssh session) releases the leases and says so, as a
    stop does; under ``nohup`` it is ignored and the run goes on until it is told otherwise."""
    import signal

    lease = tmp_path / "k.lease"
    proc = subprocess.Popen([sys.executable, "-c", HOLD_A_LEASE, str(lease), started], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "held" and lease.exists()
        proc.send_signal(signal.SIGHUP)
        if started == "nohup":
            with pytest.raises(subprocess.TimeoutExpired):
                proc.wait(timeout=1)
            assert lease.exists()
            proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    name, code = ("SIGHUP", 129) if started == "terminal" else ("SIGTERM", 143)
    assert proc.returncode == code, err
    assert err.startswith(f"rbench: {name}: stopped (1 lease(s) released)"), err
    assert not lease.exists()


STOPPED_MID_STAGE = """
import logging, os, signal, threading, time
from prefect import flow, task
from prefect.runtime import flow_run
from rbench.config import ExecutionConfig
from rbench.orchestration.runner import ended_by_termination, forward_logs_to_prefect, task_runner

started = threading.Event()

@task
def shard():
    started.set()
    threading.Event().wait()  # a shard under way, which a stop does not wait for

@flow(task_runner=task_runner(ExecutionConfig(runner="threads", max_workers=2)))
def stages():
    print(flow_run.get_id(), flush=True)
    with ended_by_termination(grace_seconds=5):  # the run's session: its stop sends the batched records
        forward_logs_to_prefect()  # as the stages' Submitter does
        shard.submit()
        started.wait(30)
        logging.getLogger("rbench").info("dense: encoded rows 0-64 of shard 0:150")
        os.kill(os.getpid(), signal.SIGTERM)  # as a worker's stop reaches a deployed run
        time.sleep(60)

stages()
"""


def test_a_deployed_run_stopped_mid_stage_is_crashed_in_prefect_before_it_ends():
    """Prefect turns a SIGTERM into ``TerminationSignal`` and cancels the flow's tasks before it
    reports the run Crashed; its thread pool waited for a running shard, past the 5 s grace after
    which rbench ends the process, so the run (a deployment's ``-stages`` subflow) stayed Running.
    The thread runner rbench builds does not wait for its threads once a stop is under way. The
    progress records still batched for the server (Prefect sends a batch every few seconds, here
    every minute) are sent before the process ends: they are in the run's logs."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import LogFilter, LogFilterFlowRunId
    from prefect.settings import PREFECT_API_URL

    env = {**os.environ, "PREFECT_API_URL": PREFECT_API_URL.value(), "PREFECT_LOGGING_LEVEL": "CRITICAL",
           "PREFECT_LOGGING_TO_API_BATCH_INTERVAL": "60"}
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", STOPPED_MID_STAGE], capture_output=True, text=True, timeout=60,
                          env=env)
    assert time.monotonic() - started < 45
    assert proc.returncode in (-15, 143), proc.stderr[-2000:]
    with get_client(sync_client=True) as client:
        run = client.read_flow_run(uuid.UUID(proc.stdout.split()[0]))
        logs = client.read_logs(LogFilter(flow_run_id=LogFilterFlowRunId(any_=[run.id])))
    assert run.state.is_crashed(), (run.state, proc.stderr[-2000:])
    assert "dense: encoded rows 0-64 of shard 0:150" in [r.message for r in logs], proc.stderr[-2000:]
