"""The deployments' pull step against a real repository and Prefect server: a commit the remote
does not have fails the flow run with a message naming the repository, the commit and git's error;
a config missing from a clone is reported as missing from that clone."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from rbench.core.errors import ConfigError, RbenchError
from rbench.experiment import resolve_experiment
from rbench.orchestration.clone import git_clone
from tests.conftest import REPO, missing

pytestmark = pytest.mark.usefixtures("prefect_server")

UNPUSHED = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture
def repository(tmp_path):
    if shutil.which("git") is None:
        missing("the pull step runs git")
    remote = tmp_path / "remote"
    subprocess.run(["git", "init", "-q", "-b", "main", str(remote)], check=True)
    (remote / "configs").mkdir()
    (remote / "configs" / "committed.yaml").write_text("name: x\n")
    subprocess.run(["git", "-C", str(remote), "add", "."], check=True)
    subprocess.run(["git", "-C", str(remote), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "c"],
                   check=True)
    head = subprocess.run(["git", "-C", str(remote), "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()
    return remote, head


def test_an_unpushed_commit_fails_the_flow_run_with_git_s_error(repository, tmp_path, monkeypatch):
    from prefect import flow, get_client

    @flow(name="cloned")
    def cloned():
        pass

    remote, _ = repository
    with get_client(sync_client=True) as client:
        run = client.create_flow_run(cloned)
        monkeypatch.setenv("PREFECT__FLOW_RUN_ID", str(run.id))
        (tmp_path / "worker").mkdir()
        monkeypatch.chdir(tmp_path / "worker")
        with pytest.raises(RbenchError) as error:
            git_clone(repository=remote.as_uri(), commit_sha=UNPUSHED)
        state = client.read_flow_run(run.id).state
    assert state.is_failed() and state.message == str(error.value)
    assert f"could not clone {remote.as_uri()} at commit {UNPUSHED}" in state.message
    assert "fatal: " in state.message  # git's own words


def test_a_config_missing_from_the_clone_names_the_clone(repository, tmp_path, monkeypatch):
    remote, head = repository
    monkeypatch.delenv("PREFECT__FLOW_RUN_ID", raising=False)
    monkeypatch.delenv("RBENCH_CLONE", raising=False)
    (tmp_path / "worker").mkdir()
    monkeypatch.chdir(tmp_path / "worker")
    out = git_clone(repository=remote.as_uri(), commit_sha=head)
    monkeypatch.chdir(out["directory"])
    assert Path("configs/committed.yaml").is_file()
    with pytest.raises(ConfigError, match=f"configs/local.yaml is not in the clone of {remote.as_uri()} at commit "
                                          f"{head}.*experiment parameter"):
        resolve_experiment("configs/local.yaml", None)
    assert REPO.exists()
