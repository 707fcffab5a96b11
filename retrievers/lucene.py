"""Lucene (Pyserini's JVM) in a process of its own.

The JVM never shares a process with torch, with the Prefect engine or with rbench's signal
handler: in one process, torch failed at random beside it on busy machines, and the JVM's
own SIGINT/SIGTERM handlers ended runs without releasing their leases. A
:class:`LuceneProcess` is a spawned child that starts the JVM (with ``-Xrs``: it leaves signals
to Python) and serves index and search requests over a pipe. The child ignores SIGINT (the
parent decides when to stop, and terminates it), and ends itself within a second when the
parent is gone, however the parent ended. Workers are pooled per process
(:func:`lucene_worker`, :func:`give_back`), so a run starts the JVM once, not once per stage.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from rbench.core.errors import RbenchError
from rbench.core.processes import Child, Pool, as_child, portable


class LuceneError(RbenchError):
    """A Lucene request failed in the worker process (the message names the Java or Python error)."""


class LuceneProcess(Child):
    """A child process running Pyserini's JVM; :meth:`call` sends one request and waits for it.

    Requests are serialized (one at a time per process); start one process per retriever
    instance that needs the JVM. :meth:`close` (also called when the object is collected and at
    interpreter exit) stops the child."""

    died = LuceneError
    role = "Lucene worker process"

    def __init__(self):
        super().__init__(serve, "rbench-lucene")

    def call(self, op: str, *args: Any) -> Any:
        """Run request ``op`` with ``args`` in the child; return its result or raise its error."""
        return self._request((op, args), repr(op))


POOL = Pool(LuceneProcess)


def lucene_worker() -> LuceneProcess:
    """An idle Lucene worker of this process, or a new one; hand it back with :func:`give_back`."""
    return POOL.take()


def warm_worker() -> None:
    """Start a Lucene worker now and leave it idle in the pool, where none is idle: importing
    Pyserini and starting its JVM take about 5 s, which then pass while other work runs."""
    POOL.put(POOL.take())


def give_back(worker: LuceneProcess) -> None:
    """Return ``worker`` to the pool, its searchers closed (a worker that failed is stopped instead)."""
    if not worker.alive():
        return
    try:
        worker.call("close_all")
    except Exception:  # a worker that cannot close its searchers is not reused
        worker.close()
        return
    POOL.put(worker)


class _Lucene:
    """The child's side: open searchers by handle."""

    def __init__(self):
        self.searchers: dict[int, Any] = {}

    def index(self, corpus: str, folder: str, threads: int, ids: str = "object_id", title_field: bool = False) -> int:
        """Index the corpus's texts under the ids of kind ``ids`` (see :func:`built_ids`); with
        ``title_field``, each object's page title as a field ``title`` of its own, beside
        ``contents``, as Anserini's ``BeirMultifieldCollection`` with ``-fields title`` does."""
        from pyserini.index.lucene import LuceneIndexer

        from rbench.retrievers.prebuilt import built_ids

        if title_field:
            indexer = LuceneIndexer(args=["-index", folder, "-fields", "title"], threads=threads)
        else:
            indexer = LuceneIndexer(folder, threads=threads)
        count = 0
        for names, texts, titles in built_ids(Path(corpus), ids, title_field):
            if title_field:
                indexer.add_batch_raw([json.dumps({"id": i, "contents": t, "title": n}, ensure_ascii=False)
                                       for i, t, n in zip(names, texts, titles)])
            else:
                indexer.add_batch_dict([{"id": i, "contents": t} for i, t in zip(names, texts)])
            count += len(names)
        indexer.close()
        return count

    def open(self, location: str, prebuilt: bool) -> tuple[int, int]:
        from pyserini.search.lucene import LuceneSearcher

        searcher = LuceneSearcher.from_prebuilt_index(location, verbose=True) if prebuilt else LuceneSearcher(location)
        if searcher is None:
            raise LuceneError(f"Pyserini has no prebuilt index {location!r}")
        handle = max(self.searchers, default=0) + 1
        self.searchers[handle] = searcher
        return handle, int(searcher.num_docs)

    def ids(self, handle: int, positions: list[int]) -> list[str]:
        """The document ids of the index's documents at these internal positions."""
        searcher = self.searchers[handle]
        return [searcher.doc(p).docid() for p in positions]

    def close_all(self) -> None:
        for searcher in self.searchers.values():
            searcher.close()
        self.searchers.clear()

    def set_bm25(self, handle: int, k1: float, b: float) -> None:
        self.searchers[handle].set_bm25(k1, b)

    def search(self, handle: int, texts: list[str], qids: list[str], k: int, threads: int,
               fields: dict[str, float] | None = None) -> dict:
        hits = self.searchers[handle].batch_search(texts, qids, k=k, threads=threads, fields=fields or {})
        return {q: [(h.docid, float(h.score)) for h in hits.get(q, [])] for q in qids}


def serve(conn, parent: int) -> None:
    """The child's main loop: start the JVM, answer requests until the pipe closes."""
    as_child(parent)
    from rbench.retrievers.java import start_pyserini

    lucene = _Lucene()
    try:
        start_pyserini()
    except BaseException as e:  # answered to the first request, which fails with it
        failure: BaseException | None = portable(e, LuceneError)
    else:
        failure = None
    while True:
        try:
            op, args = conn.recv()
        except (EOFError, OSError):
            os._exit(0)
        try:
            if failure is not None:
                raise failure
            result = ("ok", getattr(lucene, op)(*args))
        except BaseException as e:  # every failure goes back to the caller, which raises it
            result = ("error", portable(e, LuceneError))
        conn.send(result)
