"""A run's own watch for its cancel. Prefect's runner or worker stops a deployed run when the server
marks it ``Cancelling``, but the runner's watch ended when its server restarted, and a run started
with ``rbench run`` against a server of one's own has no runner to watch at all: in both the run did
all its remaining work after the cancel (issue 81). The run asks the server for its own state
itself and, on ``Cancelling``, stops as a cancel from Prefect stops it: a SIGTERM to its own
process (:func:`rbench.orchestration.runner.ended_by_termination` records the run Cancelled)."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
from typing import Any, Iterator

log = logging.getLogger("rbench")

INTERVAL_SECONDS = 2.0
"""How often the run asks the server for its state: with the 5 s grace a cancel ends the run in under 10 s."""


def cancelling(flow_run_id: Any) -> bool:
    """Whether the server has this flow run ``Cancelling``; False when it cannot be asked now (down,
    restarting): the next look asks again."""
    from prefect.client.orchestration import get_client

    try:
        with get_client(sync_client=True) as client:
            state = client.read_flow_run(flow_run_id).state
    except Exception as e:
        log.debug("could not read the state of flow run %s: %s", flow_run_id, e)
        return False
    return state is not None and state.is_cancelling()


def _watch(flow_run_id: Any, done: threading.Event, interval: float) -> None:
    while not done.wait(interval):
        if cancelling(flow_run_id):
            log.warning("rbench: flow run %s was cancelled (its state is Cancelling): stopping", flow_run_id)
            os.kill(os.getpid(), signal.SIGTERM)
            return


@contextlib.contextmanager
def watched_for_cancel(interval: float = INTERVAL_SECONDS) -> Iterator[bool]:
    """Around a top-level flow run's work on a server of the user's own: a daemon thread asks for the
    run's state every ``interval`` seconds and, on ``Cancelling``, sends this process SIGTERM.
    Yields whether it watches (not in a subflow, whose parent's watch covers it; not on rbench's
    temporary server, which nobody else can reach)."""
    from prefect.context import FlowRunContext

    from rbench.orchestration.prefect_server import own_server

    context = FlowRunContext.get()
    run = context.flow_run if context is not None else None
    if run is None or run.parent_task_run_id is not None or not own_server():
        yield False
        return
    done = threading.Event()
    watcher = threading.Thread(target=_watch, args=(run.id, done, interval), name="rbench-cancel-watch", daemon=True)
    watcher.start()
    try:
        yield True
    finally:
        done.set()
