"""LLM retrievers through the benchmark flow: the rewrite stage is shared and cached (a
changed first stage or reranker asks the LLM nothing), accounting reaches the summary and MLflow, and
a planted API key reaches no file, log, param or artifact."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from rbench.flows.benchmark import benchmark, summary_of
from tests.conftest import REPO, prefect_home, tiny_cross_encoder, tiny_dataset
from tests.unit.llm.server import ChatServer

KEY_ENV = "RBENCH_TEST_LLM_KEY"


pytestmark = pytest.mark.usefixtures("prefect_server")  # one Prefect test server per session


def _config(tmp_path: Path, tiny_files, url: str, retrievers: list[dict]) -> dict:
    corpus, queries = tiny_files
    return {"name": "llm", "store": str(tmp_path / "store"), "depth": 5, "subsample": {"size": 5},
            "metrics": {"k": [1, 3]}, "mlflow": {"experiment": "llm"},
            "llms": {"server": {"backend": "openai", "base_url": url, "model": "test-model", "api_key_env": KEY_ENV}},
            "datasets": [tiny_dataset(corpus, queries)], "retrievers": retrievers}


def _write(tmp_path: Path, cfg: dict) -> str:
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return str(path)


def _stage(result: dict, stage: str, label_part: str) -> dict:
    return next(s for s in result.stages if s.stage == stage and label_part in s.label)


def test_changing_the_first_stage_asks_the_llm_nothing(tmp_path, tiny_files, monkeypatch):
    monkeypatch.setenv(KEY_ENV, "k")
    with ChatServer() as server:
        first = {"name": "decompose", "label": "dec-bm25s", "params": {"llm": "server", "first_stage": {"name": "bm25s"}}}
        cfg = _config(tmp_path, tiny_files, server.url, [first])
        result = benchmark(config_path=_write(tmp_path, cfg))
        assert server.requests == 5
        rewrite = _stage(result, "rewrite", "decompose")
        assert rewrite.status == "ran"
        other = {"name": "decompose", "label": "dec-dense",
                 "params": {"llm": "server", "first_stage": {"name": "dense", "params": {"model": "static-64d"}}}}
        rerank = {"name": "llm_rerank", "params": {"llm": "server", "window": 3, "step": 1, "candidates": 4,
                                                   "first_stage": {"name": "dense", "params": {"model": "static-64d"}}}}
        reranked = {"name": "decompose", "label": "dec-reranked",
                    "params": {**first["params"], "rerank": {"model": tiny_cross_encoder(tmp_path / "ce")}}}
        cfg["retrievers"] = [first, other, reranked, rerank]
        result = benchmark(config_path=_write(tmp_path, cfg))
        assert _stage(result, "rewrite", "decompose").status == "cached"
        assert _stage(result, "retrieve", "dec-bm25s").status == "cached"
        assert _stage(result, "retrieve", "dec-dense").status == "ran"
        assert _stage(result, "retrieve", "dec-reranked").status == "ran"
        asked_by_rerank = server.requests - 5
        assert asked_by_rerank == 5 * 2  # two windows of 3 over 4 candidates, five queries
        labels = {m.retriever for m in result.metrics}
        assert labels == {"dec-bm25s", "dec-dense", "dec-reranked", "llm_rerank"}

    import mlflow

    mlflow.set_tracking_uri(f"sqlite:///{tmp_path / 'store' / 'mlflow.db'}")
    runs = mlflow.search_runs(experiment_names=["llm"], filter_string="tags.`rbench.retriever` = 'llm_rerank'")
    assert runs["metrics.retrieve.llm_calls"].iloc[0] == 10
    for label in ("dec-dense", "dec-reranked"):  # a new first stage or reranker reads the cached rewrites
        runs = mlflow.search_runs(experiment_names=["llm"], filter_string=f"tags.`rbench.retriever` = '{label}'")
        assert runs["metrics.rewrite.llm_calls"].iloc[0] == 5 and runs["metrics.retrieve.llm_calls"].iloc[0] == 0


def test_two_llms_serving_one_model_are_reported_under_their_own_labels(tmp_path, tiny_files, monkeypatch):
    monkeypatch.setenv(KEY_ENV, "k")
    with ChatServer() as good, ChatServer(fail_first=[400] * 50) as bad:
        cfg = _config(tmp_path, tiny_files, good.url, [
            {"name": "decompose", "label": "via-good", "params": {"llm": "server", "first_stage": {"name": "bm25s"}}},
            {"name": "decompose", "label": "via-bad", "params": {"llm": "broken", "first_stage": {"name": "bm25s"}}},
        ])
        # another revision of the same model (the URL alone is no part of an answer's identity)
        cfg["llms"]["broken"] = {**cfg["llms"]["server"], "base_url": bad.url, "revision": "v2"}
        state = benchmark(config_path=_write(tmp_path, cfg), return_state=True)
        assert state.is_failed()
        result = summary_of(state)
    rewrites = {s.label: s.status for s in result.stages if s.stage == "rewrite"}
    assert rewrites == {"tiny/decompose:test-model": "ran", "tiny/decompose:test-model#2": "failed"}
    (failure,) = result.failures
    assert failure.retriever == "via-bad" and "rewrite[tiny/decompose:test-model#2]" in failure.error
    assert {m.retriever for m in result.metrics} == {"via-good"}


@pytest.mark.slow
def test_a_planted_api_key_reaches_the_server_and_nothing_else(tmp_path, tiny_files):
    secret = "sk-pl4nted-llm-k3y"
    home = tmp_path / "node"
    with ChatServer(fail_first=[401]) as server:
        cfg = _config(tmp_path, tiny_files, server.url, [
            {"name": "decompose", "params": {"llm": "server", "first_stage": {"name": "bm25s"}}},
        ])
        config = _write(tmp_path, cfg)
        env = {**os.environ, "PREFECT_HOME": prefect_home(home), "PREFECT_LOGGING_LEVEL": "DEBUG", KEY_ENV: secret,
               "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
        env.pop("PREFECT_API_URL", None)
        env.pop("MLFLOW_TRACKING_URI", None)
        failed = subprocess.run([sys.executable, "-m", "rbench.cli", "run", config], cwd=REPO, env=env, text=True,
                                capture_output=True, timeout=600)
        assert failed.returncode == 1 and "HTTP 401" in failed.stderr + failed.stdout
        ok = subprocess.run([sys.executable, "-m", "rbench.cli", "run", config], cwd=REPO, env=env, text=True,
                            capture_output=True, timeout=600)
        assert ok.returncode == 0, ok.stderr[-2000:]
        assert set(server.authorization) == {f"Bearer {secret}"}
    for text in (failed.stdout, failed.stderr, ok.stdout, ok.stderr):
        assert secret not in text
    leaks = [p for folder in (tmp_path / "store", home) for p in folder.rglob("*")
             if p.is_file() and secret.encode() in p.read_bytes()]
    assert leaks == []


def test_the_pyserini_placeholder_key_never_outlives_the_import(monkeypatch):
    from rbench.retrievers.java import start_pyserini

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    start_pyserini.cache_clear()
    start_pyserini()
    assert "OPENAI_API_KEY" not in os.environ
    monkeypatch.setenv("OPENAI_API_KEY", "users-own-key")
    start_pyserini.cache_clear()
    start_pyserini()
    assert os.environ["OPENAI_API_KEY"] == "users-own-key"
