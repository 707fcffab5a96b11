"""A disk that fills mid-run (issue 60, item 1): ENOSPC injected where the store publishes an index
(its manifest's write), through ``rbench run``. About 25 s: two tiny runs."""

from __future__ import annotations

import contextlib
import errno
import io

import pytest
import yaml

import rbench.core.store as store_module
from rbench.cli import main
from tests.conftest import tiny_dataset

pytestmark = pytest.mark.usefixtures("prefect_server")  # one Prefect test server per session


def test_a_full_disk_mid_run_names_the_store_leaves_no_lease_and_the_rerun_resumes(tmp_path, tiny_files,
                                                                                  monkeypatch):
    """On main: a bare ``OSError: [Errno 28]`` with tracebacks, naming no store and no fix."""
    store = tmp_path / "store"
    config = tmp_path / "exp.yaml"
    config.write_text(yaml.safe_dump({"name": "full", "store": str(store), "subsample": {"size": 3},
                                      "datasets": [tiny_dataset(*tiny_files)], "retrievers": [{"name": "bm25s"}]}))
    real = store_module._write_text_atomic

    def full_at_the_index(path, text):
        if path.parent.parent.name == "index":
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        return real(path, text)

    monkeypatch.setattr(store_module, "_write_text_atomic", full_at_the_index)
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        assert main(["run", str(config)]) == 1
    printed = out.getvalue()
    failed = next(line for line in printed.splitlines() if line.startswith("FAILED tiny/bm25s"))
    assert f"the disk holding the store {store} is full (No space left on device" in failed, printed[-3000:]
    assert "MB free now" in failed and "--store DIR" in failed and "resumes" in failed
    assert "Traceback" not in printed and "Errno 28" not in printed
    assert not [p for p in store.glob("*/.locks/*") if p.is_file()]  # every lease released
    assert not list(store.glob("index/.tmp-*"))  # nothing half-written

    monkeypatch.setattr(store_module, "_write_text_atomic", real)  # space freed
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        assert main(["run", str(config)]) == 0
    assert "stages: 3 ran, 3 cached" in out.getvalue(), out.getvalue()[-2000:]  # index, retrieve, evaluate
