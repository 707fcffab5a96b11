"""Code identity taken from the code: an edit to a helper changes the keys of exactly the
components that import it, directly or through others, and nothing else."""

from __future__ import annotations

import shutil
import tomllib
from pathlib import Path

import pytest

from rbench.core.identity import closure, code_digest
from rbench.core.store import Stage
from rbench.dataset_adapters.base import ADAPTERS
from rbench.retrievers.base import RETRIEVERS
from tests.conftest import REPO


def copy_of_the_sources(root: Path):
    """The package's folders copied under ``root``, and a module locator over the copy."""
    dirs = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    mapped = {}
    for package, folder in dirs.items():
        shutil.copytree(REPO / folder, root / folder, ignore=shutil.ignore_patterns("__pycache__"), dirs_exist_ok=True)
        mapped[package] = root / folder

    def locate(name: str) -> Path | None:
        for package in sorted(mapped, key=len, reverse=True):
            if name == package or name.startswith(f"{package}."):
                rel = name[len(package) + 1:].split(".") if name != package else []
                base = mapped[package].joinpath(*rel)
                for candidate in ((base.with_suffix(".py"),) if rel else ()) + (base / "__init__.py",):
                    if candidate.is_file():
                        return candidate
                return None
        return None

    return locate


def stage_modules() -> dict[str, str]:
    from rbench.tasks.download import DOWNLOAD
    from rbench.tasks.evaluate import EVALUATE
    from rbench.tasks.index import ENCODE, INDEX
    from rbench.tasks.prepare import PREPARE
    from rbench.tasks.retrieve import RETRIEVE
    from rbench.tasks.rewrite import REWRITE
    from rbench.tasks.subsample import SUBSAMPLE

    stages: list[Stage] = [DOWNLOAD, PREPARE, SUBSAMPLE, ENCODE, INDEX, REWRITE, RETRIEVE, EVALUATE]
    return {f"stage:{s.name}": s.build.__module__ for s in stages}


def components() -> dict[str, str]:
    found = stage_modules()
    found |= {f"retriever:{name}": cls.__module__ for name, cls in RETRIEVERS.items()}
    found |= {f"adapter:{name}": cls.__module__ for name, cls in ADAPTERS.items()}
    return found


def digests(locate) -> dict[str, str]:
    return {name: code_digest(module, locate=locate) for name, module in components().items()}


def test_the_copy_gives_the_installed_digests(tmp_path):
    locate = copy_of_the_sources(tmp_path)
    assert digests(locate) == {name: code_digest(module) for name, module in components().items()}


def test_an_edit_to_a_helper_reached_only_through_rerankers_changes_exactly_its_importers(tmp_path):
    locate = copy_of_the_sources(tmp_path)
    before = digests(locate)
    rerank = locate("rbench.retrievers.rerankers")
    source = rerank.read_text()
    assert "def check_model_location(" in source  # a helper rerank, decompose, multi_query and arm reach via rerankers.py
    rerank.write_text(source.replace("def check_model_location(", "def check_model_location(  # edited\n", 1))
    after = digests(locate)
    changed = {name for name in before if before[name] != after[name]}
    assert changed == {"retriever:rerank", "retriever:decompose", "retriever:multi_query", "retriever:arm"}


def test_an_edit_to_a_metric_changes_the_evaluate_stage_only(tmp_path):
    locate = copy_of_the_sources(tmp_path)
    before = digests(locate)
    recall = locate("rbench.evaluation.metrics.recall")
    recall.write_text(recall.read_text() + "\n")
    after = digests(locate)
    assert {name for name in before if before[name] != after[name]} == {"stage:evaluate"}


def test_the_closure_follows_imports_inside_functions_and_stays_in_the_package():
    found = closure(["rbench.tasks.evaluate"])
    assert "rbench.evaluation.metrics.recall" in found  # imported by rbench.evaluation.metrics_per_query's package
    assert all(name.startswith("rbench") for name in found)
    assert "rbench.flows.benchmark" not in found


def test_an_unknown_module_is_named():
    with pytest.raises(ValueError, match="rbench.nowhere is not a module"):
        closure(["rbench.nowhere"])


def test_retriever_keys_hold_the_digest_and_composites_hold_their_components():
    from rbench.retrievers.base import make_retriever

    fusion = make_retriever("fusion", {"retrievers": [{"name": "bm25s"}, {"name": "dense", "params": {"model": "static-64d"}}]})
    versions = fusion.code_versions()
    assert set(versions) == {"fusion", "bm25s", "dense"}
    assert versions["dense"].endswith(code_digest("rbench.retrievers.dense"))


def test_a_digest_is_computed_once_whatever_the_threads(monkeypatch):
    """Stage threads asking for one digest at once parse the sources once: concurrent parsing failed
    in CPython 3.11 ("AST constructor recursion depth mismatch") and did the same work twice."""
    import threading
    import time

    from rbench.core import identity

    real, calls = identity.closure, []

    def slow_closure(modules, locate=identity.installed_file):
        calls.append(threading.get_ident())
        time.sleep(0.2)  # long enough for every thread to arrive while the first computes
        return real(modules, locate)

    monkeypatch.setattr(identity, "closure", slow_closure)
    identity._installed_digest.cache_clear()
    results, barrier = [], threading.Barrier(8)

    def ask():
        barrier.wait()
        results.append(code_digest("rbench.core.store"))

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    identity._installed_digest.cache_clear()
    assert len(calls) == 1 and len(set(results)) == 1 and len(results) == 8


NOTEBOOK_CLASS = '''
import sys
from pydantic import BaseModel
from rbench.core.identity import class_digest, importable
from rbench.retrievers.base import Retriever

SCALE = 2

def helper(x):
    return x * SCALE

class Words(Retriever):
    name = "words"
    description = "a notebook's retriever"
    class Params(BaseModel):
        lowercase: bool = True
    def index(self, corpus, folder):
        return {}
    def load(self, folder):
        pass
    def search(self, queries, k):
        return {q: [("o", float(helper(1)))] for q in queries}

print(class_digest(Words), importable(Words.__module__))
'''


@pytest.mark.parametrize("old, new, same", [
    ("", "", True),  # the same cell again, in another process
    ("\nclass Words", "\n\n# a comment and blank lines move the class down\n\nclass Words", True),
    ("float(helper(1))", "float(helper(2))", False),  # the class's own code (a comprehension in it)
    ("return x * SCALE", "return x * SCALE + 1", False),  # a function of its module that it calls
    ("SCALE = 2", "SCALE = 3", False),  # a plain value of its module that the function reads
    ('description = "a', 'description = "the', False),  # a plain attribute
])
def test_a_class_defined_in_a_notebook_or_script_is_keyed_by_its_code(old, new, same):
    """Issue 70, item 2: a retriever class from a notebook cell or a script (module ``__main__``,
    which no other process can import) is keyed by its code objects, not a module file: stable
    across processes and line shifts, changed by an edit to it, to a function of its module it
    calls, or to a plain value those read. Under a second a case (two processes)."""
    import subprocess
    import sys

    def digest(source: str) -> str:
        done = subprocess.run([sys.executable, "-c", source], capture_output=True, text=True, cwd=REPO, timeout=120)
        assert done.returncode == 0, done.stderr[-2000:]
        value, importable = done.stdout.split()
        assert importable == "False"
        return value

    assert old in NOTEBOOK_CLASS
    assert (digest(NOTEBOOK_CLASS.replace(old, new)) == digest(NOTEBOOK_CLASS)) is same


def test_a_class_only_this_process_knows_must_run_its_stages_here():
    """A notebook's class (its module importable by no other process) is refused, by name, where
    its stages would run elsewhere: on a cluster's workers, or in stage processes when native."""
    from rbench.config import ExecutionConfig
    from rbench.core.errors import ConfigError
    from rbench.experiment import check_defined_here

    cell = type("Cell", (), {"name": "cell", "__module__": "a_notebook_cell_that_no_file_holds"})
    check_defined_here("retriever", cell, ExecutionConfig(runner="threads"), native=False)
    check_defined_here("retriever", cell, ExecutionConfig(runner="threads", stage_processes=False), native=True)
    with pytest.raises(ConfigError, match="retriever 'cell' is defined in a_notebook_cell.*runner 'dask' runs"):
        check_defined_here("retriever", cell, ExecutionConfig(runner="dask"))
    with pytest.raises(ConfigError, match="stage processes: set execution.stage_processes: false"):
        check_defined_here("retriever", cell, ExecutionConfig(runner="threads"), native=True)
