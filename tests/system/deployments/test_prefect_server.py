"""The documented deployment on a real Prefect server with a process worker: a scheduled run
appears, a run with a failing stage fails alone, and a retry as the UI sends it builds only
what failed, with every earlier stage cached in the store."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time

import pytest
import yaml

from rbench.worker import alive, children
from tests.conftest import CORPUS, QUERIES, REPO, tiny_cross_encoder, tiny_dataset, write_jsonl
from tests.system.deployments.conftest import BIN, free_port, git, prefect, stop_group, wait_final, wait_healthy

pytestmark = pytest.mark.slow


def descendants(pid: int) -> list[int]:
    """Every process below ``pid``."""
    found = children(pid)
    return [p for child in found for p in (child, *descendants(child))]


def _killed_attempt():
    """Stands for a task whose process was killed mid-run."""


def test_deployment_schedules_runs_fails_alone_and_retries_from_the_ui(server, tmp_path, tiny_files):
    from mlflow.tracking import MlflowClient
    from prefect import task
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import (
        DeploymentFilter,
        DeploymentFilterId,
        FlowRunFilter,
        FlowRunFilterParentFlowRunId,
        TaskRunFilter,
        TaskRunFilterState,
        TaskRunFilterStateType,
    )
    from prefect.client.schemas.objects import StateType
    from prefect.settings import PREFECT_API_URL, temporary_settings
    from prefect.states import AwaitingRetry, Running

    env = {**server, "RBENCH_GIT_URL": REPO.as_uri(), "RBENCH_GIT_COMMIT": git("rev-parse", "HEAD")}
    prefect(env, "work-pool", "create", "gpu-pool", "--type", "process")
    prefect(env, "deploy", "--all", "--prefect-file", "deployments/prefect.yaml")
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
    base = free_port(2)
    ports = [base, base + 1]
    worker_log = open(tmp_path / "worker.log", "w")
    workers = subprocess.Popen(  # two workers on one host, as on a node with two GPUs: each pinned, own health port
        ["bash", str(REPO / "deployments" / "workers.sh"), "2"], cwd=tmp_path, stdout=worker_log,
        stderr=subprocess.STDOUT, start_new_session=True,
        env={**server, "RBENCH_STORE": str(store), "PREFECT_HOME": str(tmp_path / "worker-home"),
             "RBENCH_HEALTH_PORT_BASE": str(base), "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"})
    try:
        for port in ports:
            wait_healthy(f"http://127.0.0.1:{port}/health", 90, tmp_path / "worker.log", workers)
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
            failed = wait_final(client, run.id)
            assert failed.state.is_failed(), (tmp_path / "worker.log").read_text()[-3000:]
            assert "tiny/rerank" in failed.state.message and failed.name.startswith("deployed-")
            (stages,) = client.read_flow_runs(flow_run_filter=FlowRunFilter(  # watched by the zombie automation too
                parent_flow_run_id=FlowRunFilterParentFlowRunId(any_=[run.id])))
            assert stages.name.endswith("-stages") and "rbench-heartbeat" in stages.tags, (stages.name, stages.tags)

            stuck = client.create_task_run(task(_killed_attempt), run.id, "stuck",
                                           state=Running())  # what an attempt killed mid-task leaves behind
            tiny_cross_encoder(broken)  # fix the cause, then press "Retry" as the UI does
            client.set_flow_run_state(run.id, AwaitingRetry(message="Retry from the UI"), force=True)
            retried = wait_final(client, run.id)
            assert retried.state.is_completed(), (tmp_path / "worker.log").read_text()[-3000:]
            assert retried.name == failed.name and retried.run_count == 2
            assert client.read_task_run(stuck.id).state.is_crashed()
            running = client.read_task_runs(task_run_filter=TaskRunFilter(state=TaskRunFilterState(
                type=TaskRunFilterStateType(any_=[StateType.RUNNING, StateType.PENDING]))))
            assert running == []
    finally:
        stop_group(workers)
        worker_log.close()

    mlflow = MlflowClient(f"sqlite:///{store / 'mlflow.db'}")
    (experiment,) = [e for e in mlflow.search_experiments() if e.name == "rbench"]
    parents = [r for r in mlflow.search_runs([experiment.experiment_id], order_by=["attributes.start_time ASC"])
               if "mlflow.parentRunId" not in r.data.tags]
    (parent,) = parents  # one parent per flow run: the retry logged into the first attempt's run
    assert parent.info.status == "FINISHED" and re.fullmatch(r"deployed-\d{8}-\d{6}", parent.info.run_name)
    assert parent.info.run_name == parent.data.tags["prefect.flow_run_name"]  # the retry kept its name
    assert parent.data.tags["rbench.experiment"] == "deployed"
    assert parent.data.tags["prefect.flow_run_id"] == str(run.id) and parent.data.tags["rbench.attempt"] == "2"
    assert "rbench.failed_pairs" not in parent.data.tags
    assert parent.data.tags["rbench.cuda_visible_devices"] in ("0", "1")
    history = [m.value for m in mlflow.get_metric_history(parent.info.run_id, "pairs_failed")]
    assert history == [1, 0]  # the failed attempt, then the retry
    retry = parent.data.metrics
    assert retry["stages_ran"] == 2 and retry["stages_cached"] == 6  # only the reranker's retrieve + evaluate
    children = mlflow.search_runs([experiment.experiment_id],
                                  filter_string=f"tags.`mlflow.parentRunId` = '{parent.info.run_id}'")
    assert sorted(c.info.run_name for c in children) == ["tiny/bm25s", "tiny/rerank"]
    assert not (store / "_prefect-results").exists()  # the store is the only cache: Prefect keeps no records


@pytest.mark.timing
@pytest.mark.parametrize("stop", ["cancel", "worker-shutdown"])
def test_a_stopped_deployed_run_ends_within_seconds_and_releases_its_leases(server, tmp_path, stop):
    """``cancel``: `prefect flow-run cancel` (or Cancel in the UI): the worker sends SIGTERM, Prefect
    raises TerminationSignal in the flow, and rbench releases its leases and ends the process, though
    a dense encode is still running in a worker thread. ``worker-shutdown``: SIGTERM to `rbench
    worker` alone, as Kubernetes stops a pod or an operator its worker: it sends SIGTERM to its flow
    runs before it stops the Prefect worker (which would kill them), and the run ends the same way,
    with no process of the worker's tree left. Either way the run and its ``-stages`` subflow end
    Cancelled or Crashed (within 30 s of a worker's stop), no JVM crashes (BM25's runs in a Lucene
    worker process), and the encode's progress lines are in the worker's output and in the run's
    logs on the server. After the worker's stop, a retry from the API on a new worker builds only
    what was left unfinished."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterParentFlowRunId
    from prefect.settings import PREFECT_API_URL, temporary_settings
    from prefect.states import Cancelling

    env = {**server, "RBENCH_GIT_URL": REPO.as_uri(), "RBENCH_GIT_COMMIT": git("rev-parse", "HEAD")}
    prefect(env, "work-pool", "create", "gpu-pool", "--type", "process")
    prefect(env, "deploy", "--all", "--prefect-file", "deployments/prefect.yaml")
    rows = [{**CORPUS[i % len(CORPUS)], "object": f"{CORPUS[i % len(CORPUS)]['object']} variant {i}"}
            for i in range(1200)]
    corpus, queries = write_jsonl(tmp_path / "corpus.jsonl", rows), write_jsonl(tmp_path / "queries.jsonl", QUERIES)
    config = tmp_path / "exp.yaml"
    config.write_text(yaml.safe_dump({
        "name": "stopped", "depth": 10, "subsample": {"size": 5}, "datasets": [tiny_dataset(corpus, queries)],
        "retrievers": [{"name": "bm25"}, {"name": "dense", "params": {"model": "minilm"}}],
        "execution": {"runner": "threads", "max_workers": 2, "shard_size": 150}}))
    store = tmp_path / "store"
    worker_log = open(tmp_path / "worker.log", "w")
    worker = subprocess.Popen([str(BIN / "rbench"), "worker", "--pool", "gpu-pool"], cwd=tmp_path,
                              env={**server, "RBENCH_STORE": str(store), "PREFECT_HOME": str(tmp_path / "worker-home")},
                              stdout=worker_log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        with temporary_settings({PREFECT_API_URL: server["PREFECT_API_URL"]}), get_client(sync_client=True) as client:
            adhoc = client.read_deployment_by_name("rbench-benchmark/adhoc")
            run = client.create_flow_run_from_deployment(adhoc.id, parameters={"config_path": str(config)})
            deadline = time.time() + 400
            while len(list((store / "encode").glob("*/_manifest.json"))) < 2:
                assert time.time() < deadline, (tmp_path / "worker.log").read_text()[-3000:]
                time.sleep(0.2)
            tree = descendants(worker.pid)
            told = time.monotonic()
            if stop == "cancel":
                client.set_flow_run_state(run.id, Cancelling(message="cancelled from the UI"))
            else:
                worker.send_signal(15)
            leases = lambda: [p for p in store.glob("*/.locks/*") if p.is_file()]  # noqa: E731
            while leases() and time.monotonic() - told < 60:
                time.sleep(0.2)
            stopped = time.monotonic() - told
            assert not leases()
            assert stopped < 15, f"{stopped:.1f}s from the stop to the leases released"
            if stop == "cancel":
                cancelled = wait_final(client, run.id, timeout=max(1.0, 10 - (time.monotonic() - told)))
                assert cancelled.state.is_cancelled(), (cancelled.state, (tmp_path / "worker.log").read_text()[-3000:])
                (stages,) = client.read_flow_runs(flow_run_filter=FlowRunFilter(
                    parent_flow_run_id=FlowRunFilterParentFlowRunId(any_=[run.id])))
                stages = wait_final(client, stages.id, timeout=max(1.0, 10 - (time.monotonic() - told)))
                assert stages.state.is_cancelled(), stages.state
                assert time.monotonic() - told < 10  # recorded within 10 s of the request (33.6 s on main)
            else:
                assert worker.wait(timeout=max(1.0, 15 - (time.monotonic() - told))) == 143
                while [p for p in tree if alive(p)] and time.monotonic() - told < 15:
                    time.sleep(0.2)
                assert len(tree) >= 3 and not [p for p in tree if alive(p)]  # the Prefect worker, a flow run, ...
                assert time.monotonic() - told < 15
                crashed = wait_final(client, run.id, timeout=max(1.0, 30 - (time.monotonic() - told)))
                assert crashed.state.is_crashed(), crashed.state  # rerunnable from the UI, not Running for good
                (stages,) = client.read_flow_runs(flow_run_filter=FlowRunFilter(
                    parent_flow_run_id=FlowRunFilterParentFlowRunId(any_=[run.id])))
                stages = wait_final(client, stages.id, timeout=max(1.0, 30 - (time.monotonic() - told)))
                assert stages.state.is_crashed(), stages.state  # it stayed Running for good in 3 of 6 stops
            assert len(list((store / "encode").glob("*/_manifest.json"))) < 8  # it stopped mid-build
            log = (tmp_path / "worker.log").read_text()
            assert stop == "cancel" or "rbench worker: SIGTERM: stopping 1 flow run process(es)" in log
            assert "rbench: SIGTERM: stopped (" in log and "the process ends within 5s" in log, log[-3000:]
            assert "fatal error has been detected by the Java Runtime" not in log  # the JVM is in its own process
            assert not list(tmp_path.rglob("hs_err_pid*.log"))
            progress = "dense: encoded rows"  # made in torch's stage processes, handed to the flow's process
            assert progress in log, log[-3000:]  # the worker's output
            named = f"rbench [{client.read_flow_run(run.id).name}-stages] - {progress}"
            assert named in log, log[-3000:]  # each line names its run: two runs on one worker told apart
            messages = [record.message for offset in range(0, 2000, 200)
                        for record in client.read_logs(limit=200, offset=offset)]
            assert any(m.startswith(progress) for m in messages), messages[-20:]  # the run's logs in the UI
            if stop == "worker-shutdown":
                worker = _retry_on_a_new_worker(client, run.id, server, store, tmp_path, worker_log)
    finally:
        stop_group(worker)
        worker_log.close()


def _retry_on_a_new_worker(client, run_id, server, store, tmp_path, worker_log) -> subprocess.Popen:
    """Retry a crashed run from the API on a new worker, as the UI's Retry does after a node came
    back; check that it builds only what the stopped attempt left unfinished: every artifact
    published before the stop is reported cached and left as it was (the encode resumes from its
    published shards). Returns the new worker."""
    from mlflow.tracking import MlflowClient
    from prefect.states import AwaitingRetry

    published = {p: p.stat().st_mtime_ns for p in store.glob("*/*/_manifest.json")}
    shards = len(list((store / "encode").glob("*/_manifest.json")))
    worker = subprocess.Popen([str(BIN / "rbench"), "worker", "--pool", "gpu-pool"], cwd=tmp_path,
                              env={**server, "RBENCH_STORE": str(store), "PREFECT_HOME": str(tmp_path / "worker-home")},
                              stdout=worker_log, stderr=subprocess.STDOUT, start_new_session=True)
    client.set_flow_run_state(run_id, AwaitingRetry(message="Retry from the UI"), force=True)
    retried = wait_final(client, run_id)
    assert retried.state.is_completed(), (retried.state, (tmp_path / "worker.log").read_text()[-3000:])
    assert {p: p.stat().st_mtime_ns for p in published} == published
    assert len(list((store / "encode").glob("*/_manifest.json"))) == 8
    mlflow = MlflowClient(f"sqlite:///{store / 'mlflow.db'}")
    (parent,) = [r for r in mlflow.search_runs([e.experiment_id for e in mlflow.search_experiments()])
                 if "mlflow.parentRunId" not in r.data.tags]
    assert parent.data.metrics["stages_cached"] == len(published), (parent.data.metrics, sorted(map(str, published)))
    assert parent.data.metrics["stages_ran"] >= 8 - shards + 2  # the missing shards, the dense index and search
    return worker
