"""`rbench worker` (:class:`rbench.worker.Supervisor`) on a stand-in process tree shaped like
Prefect's process worker: a worker process whose child is a flow run. A stop sends SIGTERM to
the flow run first (and to one the worker takes meanwhile), and to the worker only once the runs
have ended; a worker that ignores SIGTERM is killed after the grace; nothing of the tree is left."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from pathlib import Path

import pytest

from rbench.worker import Supervisor, alive, children

FLOW_RUN = """
import os, signal, sys, time
folder, name, tidy = sys.argv[1], sys.argv[2], float(sys.argv[3])
def stop(*_):
    open(os.path.join(folder, name + "-stopping"), "w").close()
    time.sleep(tidy)
    open(os.path.join(folder, name + "-stopped"), "w").close()
    sys.exit(143)
signal.signal(signal.SIGTERM, stop)
open(os.path.join(folder, name + "-ready"), "w").close()
while True:
    time.sleep(0.05)
"""

WORKER = """
import os, signal, subprocess, sys, time
folder, mode, code = sys.argv[1:4]
def start(name, tidy):
    return subprocess.Popen([sys.executable, "-c", code, folder, name, str(tidy)])
runs = [start("run", 1 if mode == "greedy" else 0)]
def stop(*_):  # as Prefect's worker does: its flow runs are killed
    open(os.path.join(folder, "worker-stopped"), "w").write(",".join(str(r.poll()) for r in runs))
    for r in runs:
        r.kill()
        r.wait()
    sys.exit(0)
signal.signal(signal.SIGTERM, signal.SIG_IGN if mode == "stubborn" else stop)
while True:
    if mode == "greedy" and len(runs) == 1 and os.path.exists(os.path.join(folder, "run-stopping")):
        runs.append(start("next", 0))  # the next scheduled flow run, taken while the first tidies up
    time.sleep(0.05)
"""


def supervise(tmp_path: Path, worker: str, grace: float) -> tuple[int, list[int], float]:
    """Run a Supervisor over the stand-in worker; SIGTERM this process once the flow run is up.
    Returns the exit code, the tree's pids and the seconds from the signal to the return."""
    supervisor = Supervisor([], grace=grace, command=[sys.executable, "-c", WORKER, str(tmp_path), worker, FLOW_RUN])
    seen: dict = {}

    def stop_when_ready() -> None:
        deadline = time.monotonic() + 60
        while not (tmp_path / "run-ready").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        seen["tree"] = [supervisor.worker.pid, *children(supervisor.worker.pid)]
        seen["told"] = time.monotonic()
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=stop_when_ready, daemon=True).start()
    code = supervisor.run()
    return code, seen["tree"], time.monotonic() - seen["told"]


@pytest.mark.timing
def test_a_stop_ends_the_flow_run_with_sigterm_before_the_worker(tmp_path, capsys):
    code, tree, seconds = supervise(tmp_path, "polite", grace=10)
    assert code == 128 + signal.SIGTERM
    assert (tmp_path / "run-stopped").exists()  # the flow run had SIGTERM, not the worker's SIGKILL
    assert (tmp_path / "worker-stopped").read_text() == "143"  # it had ended before the worker was told
    assert len(tree) == 2 and not [p for p in tree if alive(p)]
    assert seconds < 5
    err = capsys.readouterr().err
    assert "rbench worker: SIGTERM: stopping 1 flow run process(es) with SIGTERM, then the worker" in err
    assert err.rstrip().endswith("rbench worker: SIGTERM: stopped")


@pytest.mark.timing
def test_a_flow_run_the_worker_takes_during_the_stop_gets_sigterm_too(tmp_path, capsys):
    code, tree, seconds = supervise(tmp_path, "greedy", grace=10)
    assert code == 128 + signal.SIGTERM
    assert (tmp_path / "run-stopped").exists() and (tmp_path / "next-stopped").exists()
    assert (tmp_path / "worker-stopped").read_text() == "143,143"  # both ended before the worker was told
    assert not [p for p in tree if alive(p)]
    assert seconds < 5
    err = capsys.readouterr().err
    assert "rbench worker: SIGTERM to 1 flow run process(es) the worker started after the stop" in err
    assert err.rstrip().endswith("rbench worker: SIGTERM: stopped")


@pytest.mark.timing
def test_a_worker_that_ignores_sigterm_is_killed_after_the_grace(tmp_path, capsys):
    code, tree, seconds = supervise(tmp_path, "stubborn", grace=1)
    assert code == 128 + signal.SIGTERM
    assert (tmp_path / "run-stopped").exists()
    assert not (tmp_path / "worker-stopped").exists()
    assert not [p for p in tree if alive(p)]
    assert 1 <= seconds < 5
    assert "the worker did not stop within 1s of SIGTERM: SIGKILL" in capsys.readouterr().err


def test_a_bad_grace_is_refused():
    with pytest.raises(ValueError, match="grace must be positive seconds, got 0"):
        Supervisor([], grace=0)
