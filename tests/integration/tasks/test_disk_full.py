"""A disk that fills mid-run (issue 60, item 1): ENOSPC injected where the store publishes an index
(its manifest's write), through ``rbench run``. About 25 s: two tiny runs, the first in a process of its own."""

from __future__ import annotations

import contextlib
import io
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from rbench.cli import main
from tests.conftest import tiny_dataset

ROOT = Path(__file__).resolve().parents[3]
FULL_AT_THE_INDEX = """
import errno, sys
import rbench.core.store as store
from rbench.cli import main
real = store._write_text_atomic
def full_at_the_index(path, text):
    if path.parent.parent.name == "index":
        raise OSError(errno.ENOSPC, "No space left on device", str(path))
    return real(path, text)
store._write_text_atomic = full_at_the_index
sys.exit(main(["run", sys.argv[1]]))
"""

pytestmark = pytest.mark.usefixtures("prefect_server")  # one Prefect test server per session


def test_a_full_disk_mid_run_names_the_store_leaves_no_lease_and_the_rerun_resumes(tmp_path, tiny_files):
    """On main at 7d10503: a bare ``OSError: [Errno 28]`` with tracebacks, naming no store and no fix;
    at cb29cb1 the message five times on the console (the engine's two records, the stage row, the
    flow's state, the closing line). The full disk runs in a process of its own, so that the
    console is what a terminal shows."""
    store = tmp_path / "store"
    config = tmp_path / "exp.yaml"
    config.write_text(yaml.safe_dump({"name": "full", "store": str(store), "subsample": {"size": 3},
                                      "datasets": [tiny_dataset(*tiny_files)], "retrievers": [{"name": "bm25s"}]}))
    printed = subprocess.run([sys.executable, "-c", FULL_AT_THE_INDEX, str(config)], capture_output=True, text=True,
                             cwd=ROOT, timeout=300)
    assert printed.returncode == 1, printed.stderr[-3000:]
    printed = printed.stdout + printed.stderr  # what a terminal shows
    failed = next(line for line in printed.splitlines() if line.startswith("FAILED tiny/bm25s"))
    assert f"the disk holding the store {store} is full (No space left on device" in failed, printed[-3000:]
    assert "MB free now" in failed and "--store DIR" in failed and "resumes" in failed
    assert printed.count("the disk holding the store") == 1, printed  # once: not the engine's records, not the row
    assert "Traceback" not in printed and "Errno 28" not in printed and "NotReady" not in printed
    assert "Finished in state Completed()" not in printed  # issue 70, item 7: on main, a line per finished task
    assert not [p for p in store.glob("*/.locks/*") if p.is_file()]  # every lease released
    assert not list(store.glob("index/.tmp-*"))  # nothing half-written

    # space freed
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        assert main(["run", str(config)]) == 0
    assert "stages: 3 ran, 3 cached" in out.getvalue(), out.getvalue()[-2000:]  # index, retrieve, evaluate
