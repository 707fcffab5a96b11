"""The deployment and compose files say what the cluster needs; the flow reads the worker's
environment at run time."""

from __future__ import annotations

import re

import pytest
import yaml

from rbench.config import ExecutionConfig
from rbench.core.errors import ConfigError
from rbench.experiment import resolve_experiment
from tests.conftest import REPO, tiny_dataset


def test_prefect_yaml_fills_only_the_code_location_at_deploy_time():
    text = (REPO / "deployments" / "prefect.yaml").read_text()
    code = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
    templated = set(re.findall(r"\{\{\s*\$(\w+)\s*\}\}", code))
    assert templated == {"RBENCH_GIT_URL", "RBENCH_GIT_COMMIT"}
    spec = yaml.safe_load(text)
    assert "git_clone" in str(spec["pull"][0]) and spec["pull"][0]["prefect.deployments.steps.git_clone"]["commit_sha"]
    nightly = next(d for d in spec["deployments"] if d["name"].endswith("nightly"))
    assert nightly["schedules"][0]["active"] and nightly["concurrency_limit"] == 1


def test_compose_waits_for_healthy_servers_and_sends_results_to_mlflow():
    spec = yaml.safe_load((REPO / "docker" / "compose.yaml").read_text())
    services = spec["services"]
    for name in ("prefect-server", "mlflow", "worker"):
        assert services[name]["healthcheck"]["test"] and services[name]["restart"] == "unless-stopped"
    worker = services["worker"]
    assert worker["depends_on"] == {"prefect-server": {"condition": "service_healthy"},
                                    "mlflow": {"condition": "service_healthy"}}
    assert worker["environment"]["MLFLOW_TRACKING_URI"] == "http://mlflow:5000"
    assert "--allowed-hosts" in services["mlflow"]["command"] and "mlflow:5000" in services["mlflow"]["command"]
    assert {v.split(":")[0] for v in worker["volumes"]} >= {"rbench-store", "model-cache"}


def test_the_worker_environment_is_read_at_run_time(tmp_path, tiny_files, monkeypatch):
    corpus, queries = tiny_files
    config = tmp_path / "exp.yaml"
    config.write_text(yaml.safe_dump({"datasets": [tiny_dataset(corpus, queries)], "retrievers": [{"name": "bm25s"}]}))
    monkeypatch.setenv("RBENCH_STORE", str(tmp_path / "shared"))
    monkeypatch.setenv("RBENCH_MIRROR", str(tmp_path / "mirror"))
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://mlflow:5000")
    cfg = resolve_experiment(str(config), None)
    assert cfg.store == tmp_path / "shared" and cfg.mirror == tmp_path / "mirror"
    assert cfg.tracking_uri() == "http://mlflow:5000"
    explicit = resolve_experiment(str(config), None, store=str(tmp_path / "mine"), runner="dask")
    assert explicit.store == tmp_path / "mine" and explicit.execution.runner == "dask"
    structured = resolve_experiment(str(config), cfg.model_dump(mode="json") | {"name": "form"})
    assert structured.name == "form"  # the UI's form wins over the default file path
    with pytest.raises(ConfigError, match="address"):
        resolve_experiment(str(config), None, address="tcp://scheduler:8786")
    with pytest.raises(ConfigError, match="config_path"):
        resolve_experiment(None, None)


def test_gpu_tasks_are_placed_on_gpu_resources():
    from rbench.tasks.orchestration import task_runner

    dask = task_runner(ExecutionConfig(runner="dask", gpus=2, max_workers=2))
    assert dask.cluster_kwargs["resources"] == {"GPU": 2} and dask.cluster_kwargs["n_workers"] == 2
    ray = task_runner(ExecutionConfig(runner="ray", gpus=1, max_workers=2))
    assert ray.init_kwargs["num_gpus"] == 1 and ray.init_kwargs["num_cpus"] == 2
