"""Prefect behind one seam (issue 67, item 4): the private names of Prefect's temporary server that
``rbench.prefect_server`` relies on, one test each, so that a Prefect upgrade that changes one fails
here and names it; and no other rbench module touches Prefect's private names. Under a second."""

from __future__ import annotations

import ast
import inspect

import pytest

from rbench.prefect_server import PREFECT_PRIVATE_NAMES
from tests.conftest import REPO

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def _server_class():
    from prefect.server.api.server import SubprocessASGIServer

    return SubprocessASGIServer


def test_the_seam_lists_what_these_tests_check():
    assert PREFECT_PRIVATE_NAMES == ("SubprocessASGIServer._instances", "SubprocessASGIServer._run_uvicorn_command",
                                     "SubprocessASGIServer.start")


def test_instances_is_the_one_server_per_port_that_prefects_client_asks_for():
    """``log_temporary_server`` finds Prefect's temporary server (port None) in ``_instances``, and a
    subclass created for that port is the instance the class hands back."""
    server = _server_class()
    assert isinstance(server.__dict__.get("_instances"), dict)
    port = 65431
    try:
        first = server(port=port)
        assert server._instances[port] is first and server(port=port) is first
    finally:
        server._instances.pop(port, None)


def test_run_uvicorn_command_takes_the_server_alone_and_is_what_start_calls():
    """``LoggedServer`` overrides ``_run_uvicorn_command(self)`` to take over the early process;
    ``start`` must still call it to get the server's process."""
    server = _server_class()
    assert list(inspect.signature(server._run_uvicorn_command).parameters) == ["self"]
    assert "self._run_uvicorn_command()" in inspect.getsource(server.start)


def test_start_takes_a_timeout_in_seconds():
    """``LoggedServer.start`` passes ``RBENCH_SERVER_STARTUP_SECONDS`` as ``start(timeout)``."""
    parameters = inspect.signature(_server_class().start).parameters
    assert list(parameters) == ["self", "timeout"] and parameters["timeout"].default is None


def test_no_other_module_touches_prefects_private_names():
    """Outside ``rbench/prefect_server.py``, no import from Prefect names a private module or name
    (``prefect._internal`` included), and the seam's private names appear nowhere."""
    offenders = []
    for folder in ("rbench", "flows", "tasks", "retrievers", "evaluation", "dataset_adapters"):
        for path in (REPO / folder).rglob("*.py"):
            if path == REPO / "rbench" / "prefect_server.py":
                continue
            source = path.read_text(encoding="utf-8")
            offenders += [f"{path.relative_to(REPO)} uses {name}" for name in PREFECT_PRIVATE_NAMES[:2]
                          if name.split(".")[1] in source]
            tree = ast.parse(source)
            for node in ast.walk(tree):
                if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("prefect"):
                    private = [a.name for a in node.names if a.name.startswith("_")]
                    if private or "._" in f".{node.module}":
                        offenders.append(f"{path.relative_to(REPO)}:{node.lineno} from {node.module} import {private}")
                elif isinstance(node, ast.Import):
                    offenders += [f"{path.relative_to(REPO)}:{node.lineno} import {a.name}" for a in node.names
                                  if a.name.startswith("prefect") and "._" in f".{a.name}"]
    assert not offenders, offenders
