"""Prefect behind one seam (issue 67, item 4): rbench starts its temporary Prefect server and hands
it to Prefect through Prefect's public API only (``PREFECT_API_URL``,
``prefect.context.refresh_global_settings_context``, ``prefect.server.api.server:create_app``),
so no module of rbench's touches a private name of Prefect's; what the seam relies on is checked
here, so that a Prefect upgrade that changes it fails here and names it. Under a second."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def test_the_public_names_the_seam_uses_exist_with_the_meaning_it_needs():
    """``refresh_global_settings_context`` takes nothing and makes the environment's settings the
    process-wide ones; ``create_app`` is the app Prefect's own temporary server serves (its factory)."""
    import prefect.context
    from prefect.server.api.server import SubprocessASGIServer, create_app

    assert list(inspect.signature(prefect.context.refresh_global_settings_context).parameters) == []
    assert not prefect.context.refresh_global_settings_context.__name__.startswith("_")
    assert callable(create_app)
    assert "prefect.server.api.server:create_app" in inspect.getsource(SubprocessASGIServer)


def test_prefect_home_is_read_as_prefect_reads_it(monkeypatch, tmp_path):
    """The server's log is found without importing Prefect: ``PREFECT_HOME``, else ``~/.prefect``."""
    from prefect.settings import Settings

    from rbench.orchestration.prefect_server import prefect_home

    monkeypatch.setenv("PREFECT_HOME", str(tmp_path / "home"))
    assert prefect_home() == Path(Settings().home).expanduser()
    monkeypatch.delenv("PREFECT_HOME")
    assert prefect_home() == Path(Settings().home).expanduser()


def test_an_empty_ui_url_gives_no_links_to_a_server_without_a_ui():
    """The temporary server serves no UI: with ``PREFECT_UI_URL`` empty, Prefect's ``url_for``
    makes no "View at" link from the API address (it makes one where the UI address is unset)."""
    from prefect.settings import PREFECT_API_URL, PREFECT_UI_URL, temporary_settings
    from prefect.utilities.urls import url_for

    run = "00000000-0000-0000-0000-000000000000"
    with temporary_settings(updates={PREFECT_API_URL: "http://127.0.0.1:9/api"}):
        assert url_for("flow-run", obj_id=run) == f"http://127.0.0.1:9/runs/flow-run/{run}"
        with temporary_settings(updates={PREFECT_UI_URL: ""}):
            assert url_for("flow-run", obj_id=run) is None


def test_no_module_touches_prefects_private_names():
    """No import from Prefect in rbench's packages names a private module or name
    (``prefect._internal`` included), and no code names the server class Prefect's client starts
    or its private parts."""
    offenders = []
    for folder in ("rbench", "flows", "tasks", "retrievers", "evaluation", "dataset_adapters", "deployments"):
        for path in (REPO / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                named = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""
                if named in ("SubprocessASGIServer", "_instances", "_run_uvicorn_command"):
                    offenders.append(f"{path.relative_to(REPO)}:{node.lineno} {named}")
                elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("prefect"):
                    private = [a.name for a in node.names if a.name.startswith("_")]
                    if private or "._" in f".{node.module}":
                        offenders.append(f"{path.relative_to(REPO)}:{node.lineno} from {node.module} import {private}")
                elif isinstance(node, ast.Import):
                    offenders += [f"{path.relative_to(REPO)}:{node.lineno} import {a.name}" for a in node.names
                                  if a.name.startswith("prefect") and "._" in f".{a.name}"]
    assert not offenders, offenders


def test_prefects_private_names_are_named_in_the_seam_module_only():
    """Issue 80, item 5: ``ThreadPoolTaskRunner._executor`` and ``_cancel_events``, ``_sync=True`` and the
    ``PREFECT__SERVER_*`` variables were used in three modules; the seam test looked for three names only."""
    from rbench.orchestration.prefect_seam import PRIVATE

    seam = REPO / "rbench" / "orchestration" / "prefect_seam.py"
    offenders = []
    for folder in ("rbench", "flows", "tasks", "retrievers", "evaluation", "dataset_adapters", "deployments"):
        for path in (REPO / folder).rglob("*.py"):
            if path == seam:
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                named = (node.attr if isinstance(node, ast.Attribute) else node.arg if isinstance(node, ast.keyword)
                         else node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else "")
                if named in PRIVATE:
                    offenders.append(f"{path.relative_to(REPO)}:{getattr(node, 'lineno', '?')} {named}")
    assert not offenders, offenders


def test_the_thread_runners_pool_and_cancel_events_are_what_the_seam_shuts_down():
    """``_executor``: the entered runner's ``ThreadPoolExecutor``; ``_cancel_events``: its tasks' ``threading.Event``s,
    set by :func:`shut_down_now` as Prefect's ``cancel_all`` sets them, the pool shut down without waiting."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from prefect.task_runners import ThreadPoolTaskRunner

    from rbench.orchestration.prefect_seam import shut_down_now

    runner = ThreadPoolTaskRunner(max_workers=1)
    assert shut_down_now(runner) is False  # not entered: no pool
    with runner:
        assert isinstance(runner._executor, ThreadPoolExecutor) and isinstance(runner._cancel_events, dict)
        event = threading.Event()
        runner._cancel_events["task"] = event
        assert shut_down_now(runner) and event.is_set() and runner._executor is None
    assert "_cancel_events" in inspect.getsource(ThreadPoolTaskRunner.cancel_all)


def test_a_states_result_reads_synchronously_with_sync_in_a_running_event_loop():
    """``_sync=True`` (Prefect's ``sync_compatible`` keyword): a value, not a coroutine, inside a running loop."""
    import asyncio

    from prefect.states import Completed, Failed

    from rbench.orchestration.prefect_seam import result_now

    async def in_a_loop():
        return result_now(Completed(data=3)), result_now(Failed(data=ValueError("x")))

    done, failed = asyncio.run(in_a_loop())
    assert done == 3 and isinstance(failed, ValueError)


def test_the_temporary_servers_variables_are_the_ones_prefects_own_server_class_sets():
    from prefect.server.api.server import SubprocessASGIServer

    from rbench.orchestration.prefect_seam import SERVER_ENVIRONMENT

    source = inspect.getsource(SubprocessASGIServer._run_uvicorn_command)
    assert all(f'"{name}"' in source for name in SERVER_ENVIRONMENT), SERVER_ENVIRONMENT
