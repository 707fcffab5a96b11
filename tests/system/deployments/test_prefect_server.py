"""The documented deployment on a real Prefect server with a process worker: a scheduled run
appears, a run with a failing stage fails alone, and a retry as the UI sends it builds only
what failed, with every earlier stage Cached."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO, missing, tiny_cross_encoder, tiny_dataset

BIN = Path(sys.executable).parent
pytestmark = pytest.mark.slow


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, check=True).stdout.strip()


@pytest.fixture
def server(tmp_path):
    if shutil.which("git") is None or not (REPO / ".git").exists():
        missing("the deployment clones the repository with git: needs git and a checkout")
    port = _free_port()
    env = {**os.environ, "PREFECT_HOME": str(tmp_path / "prefect-home"), "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
           "PREFECT_API_URL": f"http://127.0.0.1:{port}/api", "PREFECT_SERVER_SERVICES_SCHEDULER_LOOP_SECONDS": "2",
           "PREFECT_LOGGING_LEVEL": "WARNING", "PREFECT_WORKER_QUERY_SECONDS": "2"}
    log = open(tmp_path / "server.log", "w")
    proc = subprocess.Popen([str(BIN / "prefect"), "server", "start", "--host", "127.0.0.1", "--port", str(port)],
                            env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.time() + 120
    while True:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/api/health", timeout=2)
            break
        except OSError:
            if time.time() > deadline or proc.poll() is not None:
                raise RuntimeError((tmp_path / "server.log").read_text()[-3000:])
            time.sleep(1)
    try:
        yield env
    finally:
        os.killpg(proc.pid, 15)
        proc.wait(timeout=30)
        log.close()


def _prefect(env, *args: str, **kwargs) -> subprocess.CompletedProcess:
    out = subprocess.run([str(BIN / "prefect"), *args], env=env, cwd=REPO, capture_output=True, text=True, **kwargs)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    return out


def _wait_final(client, flow_run_id, timeout=600):
    deadline = time.time() + timeout
    while time.time() < deadline:
        run = client.read_flow_run(flow_run_id)
        if run.state is not None and run.state.is_final():
            return run
        time.sleep(2)
    raise TimeoutError(f"flow run {flow_run_id} did not finish in {timeout}s: {run.state}")


def test_deployment_schedules_runs_fails_alone_and_retries_from_the_ui(server, tmp_path, tiny_files):
    from mlflow.tracking import MlflowClient
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import DeploymentFilter, DeploymentFilterId
    from prefect.settings import PREFECT_API_URL, temporary_settings
    from prefect.states import AwaitingRetry

    env = {**server, "RBENCH_GIT_URL": REPO.as_uri(), "RBENCH_GIT_COMMIT": _git("rev-parse", "HEAD")}
    _prefect(env, "work-pool", "create", "gpu-pool", "--type", "process")
    _prefect(env, "deploy", "--all", "--prefect-file", "deployments/prefect.yaml")
    for _ in range(2):  # idempotent: a second call replaces the first automation
        out = subprocess.run([sys.executable, "deployments/zombies.py", "--grace", "90"], env=env, cwd=REPO,
                             capture_output=True, text=True)
        assert out.returncode == 0 and "automation" in out.stdout, out.stderr[-2000:]

    corpus, queries = tiny_files
    broken = tmp_path / "ce"
    broken.mkdir()
    config = tmp_path / "exp.yaml"
    config.write_text(yaml.safe_dump({
        "name": "deployed", "depth": 10, "subsample": {"size": 5}, "metrics": {"k": [1, 3]},
        "datasets": [tiny_dataset(corpus, queries)],
        "retrievers": [{"name": "bm25s"},
                       {"name": "rerank", "params": {"model": str(broken), "first_stage": {"name": "bm25s"}}}],
    }))
    store = tmp_path / "shared-store"
    worker_env = {**server, "RBENCH_STORE": str(store), "PREFECT_HOME": str(tmp_path / "worker-home")}
    worker_log = open(tmp_path / "worker.log", "w")
    worker = subprocess.Popen([str(BIN / "prefect"), "worker", "start", "--pool", "gpu-pool"], env=worker_env,
                              cwd=tmp_path, stdout=worker_log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        with temporary_settings({PREFECT_API_URL: server["PREFECT_API_URL"]}), get_client(sync_client=True) as client:
            assert len([a for a in client.read_automations() if a.name.startswith("rbench: crash")]) == 1
            nightly = client.read_deployment_by_name("rbench-benchmark/fetaqa-baselines-nightly")
            deadline = time.time() + 60
            only_nightly = DeploymentFilter(id=DeploymentFilterId(any_=[nightly.id]))
            while not (scheduled := client.read_flow_runs(deployment_filter=only_nightly)) and time.time() < deadline:
                time.sleep(1)
            assert scheduled and all(r.state.is_scheduled() for r in scheduled)

            adhoc = client.read_deployment_by_name("rbench-benchmark/adhoc")
            run = client.create_flow_run_from_deployment(adhoc.id, parameters={"config_path": str(config)})
            failed = _wait_final(client, run.id)
            assert failed.state.is_failed(), (tmp_path / "worker.log").read_text()[-3000:]
            assert "tiny/rerank" in failed.state.message and failed.name.startswith("deployed-")

            tiny_cross_encoder(broken)  # fix the cause, then press "Retry" as the UI does
            client.set_flow_run_state(run.id, AwaitingRetry(message="Retry from the UI"), force=True)
            retried = _wait_final(client, run.id)
            assert retried.state.is_completed(), (tmp_path / "worker.log").read_text()[-3000:]
    finally:
        os.killpg(worker.pid, 15)
        worker.wait(timeout=30)
        worker_log.close()

    mlflow = MlflowClient(f"sqlite:///{store / 'mlflow.db'}")
    (experiment,) = [e for e in mlflow.search_experiments() if e.name == "rbench"]
    parents = [r for r in mlflow.search_runs([experiment.experiment_id], order_by=["attributes.start_time ASC"])
               if "mlflow.parentRunId" not in r.data.tags]
    assert [p.info.status for p in parents] == ["FAILED", "FINISHED"]
    first, retry = (p.data.metrics for p in parents)
    assert first["pairs_failed"] == 1 and retry["pairs_failed"] == 0
    assert retry["stages_ran"] == 2 and retry["stages_cached"] == 6  # only the reranker's retrieve + evaluate
    assert parents[1].data.tags["prefect.flow_run_id"] == str(run.id)
    assert (store / "_prefect-results").is_dir()  # Prefect's records live in the shared store
