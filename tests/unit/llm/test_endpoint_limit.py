"""One limit per LLM endpoint: stages side by side, threads and processes of one host never have
more than ``max_concurrency`` requests in flight to one server, and every request type is retried."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading

import pytest

from rbench.llm.backends import LLMError, OpenAIBackend
from rbench.llm.cache import CallCache
from rbench.llm.client import LLM
from rbench.llm.config import LLMConfig, Sampling
from tests.conftest import REPO
from tests.unit.llm.server import ChatServer


@pytest.fixture(autouse=True)
def own_slots(tmp_path, monkeypatch):
    monkeypatch.setenv("RBENCH_LLM_SLOTS", str(tmp_path / "slots"))


def _stage(server: ChatServer, store, name: str, limit: int) -> list[str]:
    """What a rewrite stage does: its own LLM client and call cache, a batch of prompts."""
    config = LLMConfig(backend="openai", base_url=server.url, model="test-model", max_concurrency=limit)
    prompts = [[("user", f"Question: {name} asks about item {i} of the list")] for i in range(24)]
    return LLM(config, CallCache(store / name)).chat_one(prompts, Sampling(max_tokens=8))


def test_three_stages_side_by_side_never_exceed_the_endpoint_limit(tmp_path):
    with ChatServer(delay=0.05) as server:
        threads = [threading.Thread(target=_stage, args=(server, tmp_path, f"stage{i}", 3)) for i in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert server.requests == 72
        assert server.max_in_flight == 3  # each stage's pool alone would put 3 in flight: 9 at once


def test_processes_on_one_host_share_the_limit(tmp_path):
    with ChatServer(delay=0.05) as server:
        code = textwrap.dedent(f"""
            from pathlib import Path
            from tests.unit.llm.server import ChatServer
            from tests.unit.llm.test_endpoint_limit import _stage
            class Served: url = {server.url!r}
            _stage(Served, Path({str(tmp_path)!r}), "process-" + __import__("sys").argv[1], 2)
        """)
        env = {"RBENCH_LLM_SLOTS": str(tmp_path / "slots"), "PATH": "/usr/bin:/bin"}
        procs = [subprocess.Popen([sys.executable, "-c", code, str(i)], cwd=REPO, env=env) for i in range(2)]
        _stage(server, tmp_path, "here", 2)
        assert all(p.wait(timeout=120) == 0 for p in procs)
        assert server.requests == 72 and server.max_in_flight == 2


def test_tokenize_is_retried_and_a_failed_probe_is_named(tmp_path, caplog):
    config = LLMConfig(backend="openai", model="test-model", max_retries=2, max_concurrency=2, base_url="http://x/v1")
    with ChatServer(context=512, fail_tokenize=[503]) as server:
        backend = OpenAIBackend(config.model_copy(update={"base_url": server.url}))
        assert backend.count_tokens([("user", "three words here")]) == 3  # a 503 first, then the count
    with ChatServer(context=512, fail_tokenize=[503] * 3) as server:
        backend = OpenAIBackend(config.model_copy(update={"base_url": server.url}))
        with caplog.at_level("WARNING", logger="rbench"):
            assert backend.tokenizes() is False
        assert any("tokenize failed after 3 attempt(s)" in r.getMessage() and "approximation" in r.getMessage()
                   for r in caplog.records)
    with ChatServer(context=512, fail_tokenize=[503] * 3) as server:
        backend = OpenAIBackend(config.model_copy(update={"base_url": server.url}))
        with pytest.raises(LLMError, match=r"tokenize \(model 'test-model'\) failed after 3 attempt\(s\): HTTP 503"):
            backend.count_tokens([("user", "x")])
