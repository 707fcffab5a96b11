"""The LLM call cache and the rewrite stage: hits, misses, sampling, retries, a damaged
answer, kill -9 in the middle of a stage, and what a change of prompt or reranker asks."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from rbench.core.store import Artifact, Store
from rbench.llm.backends import LLMError
from rbench.llm.cache import CallCache
from rbench.llm.client import LLM
from rbench.llm.config import LLMConfig, Sampling
from rbench.llm.rewrite import RewriteSpec
from rbench.tasks.rewrite import REWRITE
from tests.conftest import REPO
from tests.unit.llm.server import ChatServer

PROMPTS = [[("user", f"Question: what is item number {i} of the list")] for i in range(6)]


def _llm(server: ChatServer, tmp_path: Path, **extra) -> LLM:
    config = LLMConfig(backend="openai", base_url=server.url, model="test-model", max_retries=2, **extra)
    return LLM(config, CallCache(tmp_path / "store"))


def test_answers_are_cached_and_reused(tmp_path):
    with ChatServer() as server:
        first = _llm(server, tmp_path).chat_one(PROMPTS, Sampling(max_tokens=16))
        assert server.requests == 6
        again = _llm(server, tmp_path)
        assert again.chat_one(PROMPTS, Sampling(max_tokens=16, seed=7)) == first   # greedy: the seed is irrelevant
        assert server.requests == 6 and again.accounting.summary()["llm_calls_cached"] == 6
        _llm(server, tmp_path).chat_one(PROMPTS, Sampling(max_tokens=32))         # other settings: asked again
        assert server.requests == 12


def test_sampled_calls_are_reused_per_seed_and_sample(tmp_path):
    sampled = Sampling(temperature=0.7, seed=1)
    with ChatServer() as server:
        llm = _llm(server, tmp_path)
        llm.chat(PROMPTS[:2], sampled, samples=3)
        assert server.requests == 6
        assert sorted(b["seed"] for b in server.bodies) == [1, 1, 2, 2, 3, 3]
        llm.chat(PROMPTS[:2], sampled, samples=3)
        assert server.requests == 6
        llm.chat(PROMPTS[:2], sampled.model_copy(update={"seed": 2}), samples=3)
        assert server.requests == 12


def test_rate_limits_are_retried_and_hard_errors_are_not(tmp_path):
    with ChatServer(fail_first=[429, 503]) as server:
        assert _llm(server, tmp_path).chat_one(PROMPTS[:1], Sampling()) == ["what is item\nnumber 0 of the list"]
        assert server.requests == 3
    with ChatServer(fail_first=[400]) as server:
        with pytest.raises(LLMError, match=r"failed after 1 attempt\(s\): HTTP 400"):
            _llm(server, tmp_path / "b").chat_one(PROMPTS[:1], Sampling())
        assert server.requests == 1
    with ChatServer(fail_first=[500] * 5) as server:
        with pytest.raises(LLMError, match=r"failed after 3 attempt\(s\): HTTP 500"):
            _llm(server, tmp_path / "c").chat_one(PROMPTS[:1], Sampling())


def test_a_damaged_answer_is_counted_and_asked_again(tmp_path):
    with ChatServer() as server:
        llm = _llm(server, tmp_path)
        llm.chat_one(PROMPTS[:2], Sampling())
        victim = next((tmp_path / "store" / "llm-calls").rglob("*.json"))
        victim.write_text('{"text": "trunc')
        again = _llm(server, tmp_path)
        again.chat_one(PROMPTS[:2], Sampling())
        assert server.requests == 3 and again.cache.corrupt == 1
        assert json.loads(victim.read_text())["text"]


def test_an_answer_edited_in_place_is_not_served(tmp_path):
    with ChatServer() as server:
        first = _llm(server, tmp_path).chat_one(PROMPTS[:2], Sampling())
        victim = next((tmp_path / "store" / "llm-calls").rglob("*.json"))
        record = json.loads(victim.read_text())
        victim.write_text(json.dumps({**record, "text": "an edited answer"}))  # valid JSON, same key
        again = _llm(server, tmp_path)
        assert again.chat_one(PROMPTS[:2], Sampling()) == first
        assert server.requests == 3 and again.cache.corrupt == 1
        assert json.loads(victim.read_text())["text"] != "an edited answer"


def test_basic_auth_comes_from_a_variable_and_never_from_the_url(tmp_path, monkeypatch):
    import base64

    from rbench.config import parse_config
    from rbench.core.errors import ConfigError

    secret = "pl4nted-b4sic"
    with pytest.raises(ValueError) as refused:
        LLMConfig(backend="openai", base_url=f"http://rbench:{secret}@127.0.0.1:9/v1", model="m")
    assert "basic_auth_env" in str(refused.value)
    raw = {"name": "x", "datasets": [], "retrievers": [],
           "llms": {"s": {"backend": "openai", "model": "m", "base_url": f"http://rbench:{secret}@h/v1"}}}
    with pytest.raises(ConfigError) as refused:
        parse_config(raw, source="exp.yaml")
    assert "llms.s.base_url" in str(refused.value) and secret not in str(refused.value)

    monkeypatch.setenv("RBENCH_TEST_BASIC", f"rbench:{secret}")
    with ChatServer(fail_first=[400]) as server:
        llm = _llm(server, tmp_path, basic_auth_env="RBENCH_TEST_BASIC")
        with pytest.raises(LLMError) as failed:
            llm.chat_one(PROMPTS[:1], Sampling())
        assert secret not in str(failed.value)
        llm.chat_one(PROMPTS[:1], Sampling())
    expected = "Basic " + base64.b64encode(f"rbench:{secret}".encode()).decode()
    assert server.authorization == [expected, expected]


def _queries_artifact(folder: Path, count: int) -> Artifact:
    folder.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"query_id": [f"q{i}" for i in range(count)],
                             "text": [f"which film won the award number {i} in the year {1990 + i}" for i in range(count)]}),
                   folder / "queries.parquet")
    return Artifact("subsample", f"queries-{count}", folder)


def _spec(server: ChatServer, prompt: str = "decompose", **extra) -> RewriteSpec:
    llm = LLMConfig(backend="openai", base_url=server.url, model="test-model", **{"max_concurrency": 1, **extra})
    return RewriteSpec.of("decompose", llm, prompt)


def test_rewrite_stage_is_cached_and_a_changed_prompt_file_asks_again(tmp_path):
    queries = _queries_artifact(tmp_path / "q", 5)
    store = Store(tmp_path / "store")
    prompt = tmp_path / "my-prompt.yaml"
    prompt.write_text("system: Split into at most {max_queries} queries.\nuser: 'Question: {question}'\n")
    with ChatServer() as server:
        first = REWRITE.run(store, [queries], _spec(server, str(prompt)))
        assert server.requests == 5 and first.info["llm_calls"] == 5 and first.info["llm_parse_ok"] == 5
        rows = pq.read_table(first.file("rewrites.parquet")).to_pylist()
        assert rows[0]["queries"] == ["which film won", "the award number 0 in the year 1990"]
        assert REWRITE.run(store, [queries], _spec(server, str(prompt))).key == first.key
        assert server.requests == 5
        assert REWRITE.run(store, [queries], _spec(server, str(prompt), max_concurrency=4)).key == first.key
        prompt.write_text("system: Give at most {max_queries} search queries.\nuser: 'Question: {question}'\n")
        changed = REWRITE.run(store, [queries], _spec(server, str(prompt)))
        assert changed.key != first.key and server.requests == 10


KILLED = """
import sys
from pathlib import Path
from rbench.core.store import Store
from tests.unit.llm.test_call_cache import _queries_artifact, _spec
from rbench.tasks.rewrite import REWRITE
from tests.unit.llm.server import ChatServer

class Remote(ChatServer):
    def __init__(self, url):
        self.url = url

REWRITE.run(Store(sys.argv[1]), [_queries_artifact(Path(sys.argv[2]), 12)], _spec(Remote(sys.argv[3])))
"""


def test_a_rewrite_killed_mid_stage_resumes_asking_only_the_unanswered(tmp_path):
    queries = _queries_artifact(tmp_path / "q", 12)
    store = tmp_path / "store"
    with ChatServer(stall_after=5) as server:
        proc = subprocess.Popen([sys.executable, "-c", KILLED, str(store), str(tmp_path / "q"), server.url], cwd=REPO,
                                start_new_session=True)
        deadline = time.time() + 120
        while server.requests < 6 and time.time() < deadline and proc.poll() is None:
            time.sleep(0.1)
        assert server.requests == 6  # five answered, the sixth stalls
        while len(list((store / "llm-calls").rglob("*.json"))) < 5 and time.time() < deadline:
            time.sleep(0.1)  # the fifth answer is written after the sixth request left (slow under load)
        time.sleep(0.5)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        assert len(list((store / "llm-calls").rglob("*.json"))) == 5
        server.stall_after = None
        artifact = REWRITE.run(Store(store), [queries], _spec(server))
        assert server.requests == 6 + 7
        assert artifact.info["llm_calls"] == 7 and artifact.info["llm_calls_cached"] == 5
        assert pq.read_table(artifact.file("rewrites.parquet")).num_rows == 12


def test_a_constrained_answer_is_checked_and_asked_again_unless_the_server_enforces_it(tmp_path):
    from rbench.llm.constrain import Constraint

    action = Constraint(kind="regex", pattern=r"Search\[[^\]\n]+\]|Finish")
    sampling = Sampling(max_tokens=16, constraint=action)
    prompt = [[("user", "Question: anything")]]
    config = {"backend": "openai", "model": "m", "max_retries": 0}
    with ChatServer(scripted=["I would search", "Search[the answer]"]) as server:
        cache = CallCache(tmp_path / "retried")
        llm = LLM({**config, "base_url": server.url}, cache)
        assert llm.chat_one(prompt, sampling) == ["Search[the answer]"] and server.requests == 2
        retry = server.bodies[1]
        assert retry["temperature"] == 0.7 and retry["seed"] == server.bodies[0]["seed"] + 1
        stats = llm.accounting.summary()
        assert stats["llm_calls"] == 2 and stats["llm_completion_tokens"] == 3 + 2  # the retry counts too
        assert "llm_parse_unconstrained" not in stats
        assert len(list((tmp_path / "retried").rglob("*.json"))) == 2  # each try under its own key
        again = LLM({**config, "base_url": server.url}, cache)
        assert again.chat_one(prompt, sampling) == ["Search[the answer]"] and server.requests == 2
        assert again.accounting.summary()["llm_calls_cached"] == 2
    with ChatServer(scripted=["no", "still no", "never"]) as server:
        llm = LLM({**config, "base_url": server.url})
        assert llm.chat_one(prompt, sampling) == ["never"] and server.requests == 3  # then the parser's fallback
        stats = llm.accounting.summary()
        assert stats["llm_calls"] == 3 and stats["llm_parse_unconstrained"] == 1
    with ChatServer(scripted=["enforced by the server"]) as server:
        llm = LLM({"backend": "openai", "base_url": server.url, "model": "m", "structured_outputs": True})
        assert llm.chat_one(prompt, sampling) == ["enforced by the server"] and server.requests == 1
        assert server.bodies[0]["structured_outputs"] == {"regex": action.pattern}
    with ChatServer() as server:
        llm = LLM({"backend": "openai", "base_url": server.url, "model": "m"})
        ngrams = Constraint(kind="ngrams", table="t.npy", digest="d")
        with pytest.raises(LLMError, match="run on the transformers backend"):
            llm.chat_one(prompt, Sampling(constraint=ngrams))


def test_latency_is_per_request_only_where_a_request_has_one_and_batches_are_reported_whole():
    from rbench.llm.backends import Completion
    from rbench.llm.client import Accounting

    accounting = Accounting()
    for seconds in (0.5, 1.5):  # server calls: each its own latency
        accounting.answered(Completion("a", 10, 2, seconds))
    for _ in range(4):  # one in-process batch of four, 2 s of wall time for all of them
        accounting.answered(Completion("b", 10, 3, 2.0, batch=7, batch_size=4))
    accounting.answered(Completion("c", 10, 3, 1.0, batch=8, batch_size=1))
    stats = accounting.summary()
    assert stats["llm_calls"] == 7 and stats["llm_completion_tokens"] == 2 * 2 + 5 * 3
    assert (stats["llm_latency_mean_s"], stats["llm_latency_p95_s"]) == (1.0, 1.5)  # not 2.0 / 4 per request
    assert (stats["llm_batches"], stats["llm_batch_size_mean"]) == (2, 2.5)
    assert (stats["llm_batch_seconds_mean"], stats["llm_batch_seconds_p95"]) == (1.5, 2.0)


def test_calls_and_tokens_count_under_the_step_that_made_them():
    import threading

    from rbench.llm.backends import Completion
    from rbench.llm.client import Accounting

    accounting = Accounting()
    with accounting.step("arm_keywords"):
        accounting.answered(Completion("a", 10, 2, 0.1))
        accounting.hit(3)
        other = threading.Thread(target=accounting.answered, args=(Completion("elsewhere", 1, 1, 0.1),))
        other.start()
        other.join()  # another thread's call is not this step's
    accounting.answered(Completion("b", 5, 1, 0.1))  # outside any step
    stats = accounting.summary()
    assert stats["llm_calls"] == 3 and stats["llm_calls_cached"] == 3
    assert {k: v for k, v in stats.items() if k.startswith("llm_arm_")} == {
        "llm_arm_keywords_calls": 1, "llm_arm_keywords_calls_cached": 3,
        "llm_arm_keywords_prompt_tokens": 10, "llm_arm_keywords_completion_tokens": 2}
