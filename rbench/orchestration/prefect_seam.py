"""Every private name of Prefect's that rbench relies on, here and nowhere else, each with what rbench
relies on it for; ``tests/unit/test_prefect_seam.py`` checks each one by name, so a Prefect upgrade that
changes one fails there and says which (Prefect 3.8)."""

from __future__ import annotations

from typing import Any

PRIVATE: dict[str, str] = {
    "_executor": "ThreadPoolTaskRunner's concurrent.futures pool: shut down without waiting on a stop",
    "_cancel_events": "ThreadPoolTaskRunner's per-task threading.Events: set on a stop, as cancel_all sets them",
    "_sync": "State.result's flag that reads a result synchronously inside a running event loop (a notebook's)",
    "PREFECT__SERVER_EPHEMERAL": "the variable Prefect's own temporary server is started with",
    "PREFECT__SERVER_FINAL": "the variable Prefect's own temporary server is started with",
}
"""The private names, each with its use (the test's list)."""

SERVER_ENVIRONMENT = {"PREFECT_UI_ENABLED": "0", "PREFECT__SERVER_EPHEMERAL": "1", "PREFECT__SERVER_FINAL": "1"}
"""The environment Prefect's ``SubprocessASGIServer`` starts its temporary server with (no UI)."""


def shut_down_now(runner: Any) -> bool:
    """Set every task's cancel event of a ``ThreadPoolTaskRunner`` and shut its pool down without
    waiting for its threads (they end with the process); False when it has no pool (not entered)."""
    if runner._executor is None:
        return False
    for event in runner._cancel_events.values():
        event.set()
    runner._executor.shutdown(wait=False, cancel_futures=True)
    runner._executor = None
    return True


def result_now(state: Any) -> Any:
    """A finished run's result (its exception for a failed one), read synchronously even in a running
    event loop, where Prefect would hand back a coroutine."""
    return state.result(raise_on_failure=False, _sync=True)
