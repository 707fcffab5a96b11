"""``docs/extending.md`` runs as written: its retriever and dataset adapter, installed as the
package the page shows (``pip install -e`` into a virtual environment layered on the project's),
are found through their entry points and run by ``rbench run`` with the page's experiment,
printing the table the page shows; the page's notebook cell runs the same classes unpackaged in a
process of its own (as ``__main__``, where no other process can import them) and gets the same
table. About 30 s: two small runs."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

from tests.conftest import REPO
from tests.system.test_own_corpus import marked_blocks

PAGE = REPO / "docs" / "extending.md"


def layered_venv(root: Path) -> Path:
    """A virtual environment that sees the project's packages (a ``.pth`` adding its site folder)
    and installs into its own, with ``pip`` and ``rbench`` commands as an activated one has."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True, timeout=60)
    site = Path(subprocess.run([str(root / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()"
                                "['purelib'])"], capture_output=True, text=True, check=True).stdout.strip())
    (site / "project.pth").write_text(f"import site; site.addsitedir({sysconfig.get_paths()['purelib']!r})\n")
    for command, module in (("pip", "pip"), ("rbench", "rbench.cli")):
        script = root / "bin" / command
        script.write_text(f'#!/bin/sh\nexec "$(dirname "$0")/python" -m {module} "$@"\n')
        script.chmod(0o755)
    return root / "bin"


def test_the_extending_page_runs_as_written(tmp_path, prefect_server):
    from prefect.settings import PREFECT_API_URL

    text = PAGE.read_text()
    files = marked_blocks(text, "file")
    assert [name for name, _ in files] == ["rbench-tfidf/tfidf.py", "rbench-tfidf/tsv.py",
                                           "rbench-tfidf/pyproject.toml", "docs.tsv", "queries.tsv", "experiment.yaml"]
    for name, body in files:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(body)
    ((_, command),) = marked_blocks(text, "run")
    ((_, shown),) = marked_blocks(text, "output")
    ((_, cell),) = marked_blocks(text, "notebook")
    table = [line for line in shown.splitlines() if line.strip()]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RBENCH_", "MLFLOW_", "PIP_"))}
    env.update(PATH=f"{layered_venv(tmp_path / 'venv')}{os.pathsep}{env['PATH']}", PIP_NO_INDEX="1",
               PIP_NO_BUILD_ISOLATION="0", PIP_DISABLE_PIP_VERSION_CHECK="1",  # offline: the project's setuptools
               PREFECT_API_URL=str(PREFECT_API_URL.value()))
    done = subprocess.run(command, shell=True, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    out = done.stdout + done.stderr
    assert done.returncode == 0 and "Traceback" not in out, out[-4000:]
    assert "index     nordic/tfidf#2" in out  # ngram_max shapes the index: a second one, not the first reused
    assert all(line in done.stdout for line in table), (table, done.stdout[-3000:])
    listed = subprocess.run("rbench list retrievers && rbench list datasets", shell=True, cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=120)
    assert "  tfidf " in listed.stdout and "  tsv " in listed.stdout, listed.stdout[-2000:] + listed.stderr[-2000:]

    lines = cell.strip().splitlines()
    script = "\n".join([files[0][1], files[1][1], *lines[:-1], f"print({lines[-1]})"])
    notebook = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env={**env, "PATH": os.environ["PATH"]},
                              capture_output=True, text=True, timeout=600)
    assert notebook.returncode == 0, notebook.stderr[-4000:]
    assert all(line in notebook.stdout for line in table), (table, notebook.stdout[-3000:])
