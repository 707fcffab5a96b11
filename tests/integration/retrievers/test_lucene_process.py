"""Pyserini's JVM runs in a Lucene worker process of its own: BM25 indexes and searches without a
JVM in the calling process, the worker ends when its parent is killed, and a signal to the
process group is handled by rbench (the JVM installs no SIGINT/SIGTERM handler)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.conftest import REPO, need

pytestmark = pytest.mark.slow

CORPUS = [("t1-r0", "Toronto Raptors won the 2019 NBA championship"), ("t1-r1", "Golden State Warriors lost the final"),
          ("p1", "the Eiffel Tower is in Paris"), ("p2", "Lucene is a search library written in Java")]


def write_corpus(folder: Path) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = folder / "corpus.parquet"
    pq.write_table(pa.table({"object_id": [i for i, _ in CORPUS], "text": [t for _, t in CORPUS]}), path)
    return path


def run_python(code: str, **kwargs) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **kwargs)


def marked(proc: subprocess.Popen, marker: str = "PID=") -> str:
    """The rest of the first stdout line that starts with ``marker`` (the JVM logs to stdout too)."""
    for line in proc.stdout:
        if line.startswith(marker):
            return line[len(marker):].strip()
    raise AssertionError(f"no {marker!r} line; stderr: {proc.stderr.read()[-2000:]}")


def gone(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        try:  # a zombie child of ours counts as gone once reaped
            if os.waitpid(pid, os.WNOHANG)[0] == pid:
                return True
        except ChildProcessError:
            pass
        time.sleep(0.1)
    return False


def test_bm25_indexes_and_searches_without_a_jvm_in_the_calling_process(tmp_path):
    need("pyserini")
    corpus = write_corpus(tmp_path)
    done = run_python(f"""
        import sys
        from pathlib import Path
        from rbench.retrievers.base import make_retriever
        bm25 = make_retriever("bm25")
        folder = Path({str(tmp_path / "index")!r}); folder.mkdir()
        print("indexed", bm25.index(Path({str(corpus)!r}), folder)["indexed"])
        bm25.load(folder)
        run = bm25.search({{"q1": "which team won the NBA championship", "q2": "search library Java"}}, 2)
        print("top", run["q1"][0][0], run["q2"][0][0])
        print("jvm here", "jnius" in sys.modules, "worker", bm25._lucene.pid)
    """)
    out, err = done.communicate(timeout=300)
    assert done.returncode == 0, err
    assert "indexed 4" in out and "top t1-r0 p2" in out
    assert "jvm here False" in out


def test_a_java_error_comes_back_as_an_error_that_names_it(tmp_path):
    need("pyserini")
    from rbench.retrievers.lucene import LuceneError, LuceneProcess

    lucene = LuceneProcess()
    try:
        with pytest.raises(LuceneError, match="(?i)exception|no such|not"):
            lucene.call("open", str(tmp_path / "no-index-here"), False)
        assert lucene.call("index", str(write_corpus(tmp_path)), str(tmp_path / "lucene"), 1) == 4
        handle, docs = lucene.call("open", str(tmp_path / "lucene"), False)
        assert docs == 4
        assert lucene.call("search", handle, ["Eiffel Paris"], ["q"], 1, 1)["q"][0][0] == "p1"
    finally:
        lucene.close()
    assert gone(lucene.pid, 10)


def test_the_worker_ends_when_its_parent_is_killed(tmp_path):
    need("pyserini")
    parent = run_python("""
        import time
        from rbench.retrievers.lucene import LuceneProcess
        lucene = LuceneProcess()
        print("PID=" + str(lucene.pid), flush=True)
        time.sleep(600)
    """)
    child = int(marked(parent))
    parent.kill()
    parent.wait(timeout=30)
    assert gone(child, 10), f"the Lucene worker {child} outlived its killed parent"


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_reaches_rbench_in_a_process_that_started_the_jvm(tmp_path, signum):
    """With ``-Xrs`` the JVM leaves SIGINT and SIGTERM to Python: rbench's handler runs (its line,
    its exit code), even where the JVM was started in the process itself."""
    need("pyserini")
    proc = run_python("""
        import time
        from rbench.core.stopping import stop_on_signals
        from rbench.retrievers.java import start_pyserini
        stop_on_signals()
        start_pyserini()  # after the handler, as a stage thread started it in a run
        print("PID=ready", flush=True)
        time.sleep(600)
    """)
    assert marked(proc) == "ready"
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 128 + signum, err
    assert f"rbench: {signal.Signals(signum).name}: stopped" in err and "Traceback" not in err


def test_ctrl_c_to_the_group_is_rbenchs_to_handle(tmp_path):
    """SIGINT to the whole process group: the worker ignores it, rbench's handler stops the run,
    and the worker ends with its parent."""
    need("pyserini")
    corpus = write_corpus(tmp_path)
    proc = run_python(f"""
        import time
        from pathlib import Path
        from rbench.core.stopping import stop_on_signals
        from rbench.retrievers.base import make_retriever
        stop_on_signals()
        bm25 = make_retriever("bm25")
        folder = Path({str(tmp_path / "index")!r}); folder.mkdir()
        bm25.index(Path({str(corpus)!r}), folder)
        bm25.load(folder)
        print("PID=" + str(bm25._lucene.pid), flush=True)
        time.sleep(600)
    """, start_new_session=True)
    child = int(marked(proc))
    os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert "rbench: SIGINT: stopped" in err and "Traceback" not in err
    assert gone(child, 10)


def test_workers_are_pooled_so_a_run_starts_the_jvm_once(tmp_path):
    """The index stage hands its worker back; the search stage gets it again (the JVM started once);
    two retrievers searching at the same time get two workers."""
    need("pyserini")
    import gc

    from rbench.retrievers import lucene
    from rbench.retrievers.base import make_retriever

    corpus = write_corpus(tmp_path)
    folder = tmp_path / "index"
    folder.mkdir()
    bm25 = make_retriever("bm25")
    bm25.index(corpus, folder)
    indexer = lucene.POOL.idle[-1].pid
    bm25.load(folder)
    assert bm25._lucene.pid == indexer
    other = make_retriever("bm25", {"k1": 1.2, "b": 0.75})
    other.load(folder)
    assert other._lucene.pid != indexer
    assert bm25.search({"q": "Eiffel Paris"}, 1)["q"][0][0] == other.search({"q": "Eiffel Paris"}, 1)["q"][0][0] == "p1"
    del bm25, other
    gc.collect()
    assert {w.pid for w in lucene.POOL.idle} >= {indexer}
    again = make_retriever("bm25")
    again.load(folder)  # a searcher of a handed-back worker was closed; this one opens afresh
    assert again.search({"q": "search library Java"}, 1)["q"][0][0] == "p2"


def test_a_warmed_up_worker_is_the_one_the_index_then_uses(tmp_path):
    """``BM25.warm_up`` (called while a flow's server starts) leaves one Lucene worker idle in the
    pool, its JVM starting; building the index takes that worker instead of starting another."""
    need("pyserini")
    from rbench.retrievers import lucene
    from rbench.retrievers.base import make_retriever

    lucene.POOL.close_idle()
    bm25 = make_retriever("bm25")
    bm25.warm_up()
    bm25.warm_up()  # a second call finds the idle worker
    assert len(lucene.POOL.idle) == 1
    warm = lucene.POOL.idle[0].pid
    folder = tmp_path / "index"
    folder.mkdir()
    assert bm25.index(write_corpus(tmp_path), folder)["indexed"] == len(CORPUS)
    assert [w.pid for w in lucene.POOL.idle] == [warm]
