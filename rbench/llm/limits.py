"""One limit per LLM endpoint, shared by every stage, thread and process of a host.

``max_concurrency`` is the number of requests in flight to one server, whoever sends them:
two rewrite stages and a reranker side by side on the thread runner, Dask or Ray workers, two
``rbench run`` on one node. Each request holds one of the endpoint's slots: ``max_concurrency``
lock files in ``$RBENCH_LLM_SLOTS`` (default ``~/.cache/rbench/llm-slots``), one folder per
endpoint, held with ``flock`` (a lock the kernel releases when its holder dies, however it
died). Point ``RBENCH_LLM_SLOTS`` at a folder the nodes share (and whose file system supports
``flock``, as NFSv4 does) to make the limit cluster-wide. LLMs that name one endpoint with
different ``max_concurrency`` values share the lowest slots: the endpoint's limit is the
largest of them, so give them one value.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import tempfile
import time
from pathlib import Path
from typing import Iterator

from rbench.core import settings

POLL_SECONDS = 0.02


def slots_folder(endpoint: str) -> Path:
    """The folder of ``endpoint``'s slots (created; under the system's temporary folder when the
    home folder is not writable, as in some containers)."""
    name = hashlib.sha256(endpoint.rstrip("/").lower().encode()).hexdigest()[:16]
    configured = settings.read("RBENCH_LLM_SLOTS")
    folder = settings.llm_slots() / name
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        if configured:
            raise
        folder = Path(tempfile.gettempdir()) / f"rbench-llm-slots-{os.getuid()}" / name
        folder.mkdir(parents=True, exist_ok=True)
    marker = folder / "endpoint.txt"
    if not marker.exists():
        marker.write_text(endpoint.rstrip("/") + "\n")  # which server these slots are for (no credentials: refused in URLs)
    return folder


@contextlib.contextmanager
def endpoint_slot(endpoint: str, limit: int) -> Iterator[int]:
    """Hold one of ``endpoint``'s ``limit`` slots for the duration of the block (waiting for one);
    yields the slot's number."""
    folder = slots_folder(endpoint)
    while True:
        for slot in range(limit):
            fd = os.open(folder / f"slot-{slot:04d}.lock", os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            try:
                yield slot
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
                os.close(fd)
            return
        time.sleep(POLL_SECONDS)
