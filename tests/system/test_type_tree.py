"""The type checker sees the whole package (issue 80, item 3): in :func:`rbench.layers.type_tree`'s tree the
folders kept at the top (``tasks/``, ``retrievers/``, ...) resolve as ``rbench.*``, so a type error crossing into
them fails ``make typecheck``; run from the checkout, mypy saw them as untyped imports and let both probes pass.
About 50 s alone, 150 s beside two other test workers (two mypy runs over a probe and what it imports)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from rbench.layers import FOLDERS, type_tree
from tests.conftest import REPO

PROBE = '''
from rbench.results import Failure
from rbench.tasks.retrieve import RetrieveConfig
from rbench.retrievers.base import RetrieverSpec


def probe(spec: RetrieverSpec) -> None:
    Failure(dataset="d", retriever=RetrieveConfig, error="e")  # a config object where a str belongs
    depth: int = spec.name  # a str where an int belongs
'''


def _mypy(where: Path) -> str:
    done = subprocess.run([str(Path(sys.executable).with_name("mypy")), "--config-file", str(REPO / "pyproject.toml"),
                           "--strict", "--cache-dir", str(where / ".mypy_cache"), "probe.py"], cwd=where,
                          capture_output=True, text=True, timeout=300)
    return done.stdout + done.stderr


def test_the_tree_lays_out_the_package_as_installed_and_the_checker_catches_what_crosses_into_it(tmp_path):
    tree = type_tree(tmp_path / "tree")
    for package, folder in FOLDERS.items():
        assert (tree / "rbench" / package.split(".", 1)[1]).resolve() == (REPO / folder).resolve()
    (tree / "probe.py").write_text(PROBE)
    found = _mypy(tree)
    assert 'Argument "retriever" to "Failure" has incompatible type "type[RetrieveConfig]"' in found, found
    assert 'Incompatible types in assignment (expression has type "str", variable has type "int")' in found, found
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "probe.py").write_text(PROBE)
    assert "error" not in _mypy(plain).replace("0 errors", "")  # from outside the tree: both probes missed
