"""Provenance tags: the commit a run's code came from, and whether the checkout had changes that
commit lacks."""

from __future__ import annotations

import subprocess

from rbench.tracking.write import git_commit, git_dirty, run_tags


def _git(folder, *args):
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=folder, check=True,
                   capture_output=True)


def test_the_commit_and_the_dirty_flag_follow_the_checkout(tmp_path, monkeypatch):
    _git(tmp_path, "init", "-q")
    (tmp_path / ".gitignore").write_text("store/\n")
    (tmp_path / "code.py").write_text("x = 1\n")
    _git(tmp_path, "add", ".")
    _git(tmp_path, "commit", "-qm", "first")
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=tmp_path, capture_output=True, text=True).stdout.strip()
    assert git_commit(tmp_path) == head and git_dirty(tmp_path) is False
    (tmp_path / "store").mkdir()
    (tmp_path / "store" / "artifact").write_text("ignored output")
    assert git_dirty(tmp_path) is False
    (tmp_path / "new.py").write_text("y = 2\n")
    assert git_dirty(tmp_path) is True
    (tmp_path / "new.py").unlink()
    (tmp_path / "code.py").write_text("x = 2\n")
    assert git_dirty(tmp_path) is True
    outside = tmp_path.parent / f"{tmp_path.name}-plain"
    outside.mkdir()
    monkeypatch.setenv("RBENCH_GIT_COMMIT", "abc123")
    assert git_commit(outside) == "abc123" and git_dirty(outside) is None


def test_run_tags_carry_the_commit_and_its_flag_outside_a_flow_run():
    tags = run_tags("name: x\n")
    assert tags["git.commit"] == git_commit() and tags["git.dirty"] in ("true", "false")
    assert "prefect.flow_run_id" not in tags
