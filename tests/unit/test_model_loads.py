"""Models are built one at a time in a process: two transformers builds at once on the thread
runner left torch patched, and every later model of the process came out on the meta device
(seen in CI as "Cannot copy out of meta tensor" after an LLM study ran its LLM, encoder and
cross-encoder side by side)."""

from __future__ import annotations

import threading
import time

from rbench.core.imports import MODEL_LOADS, one_load_at_a_time


def held_by_another_thread() -> bool:
    """Whether some thread holds MODEL_LOADS (asked from a fresh thread, so the caller's own
    re-entrant hold counts)."""
    got = []

    def probe():
        acquired = MODEL_LOADS.acquire(blocking=False)
        got.append(acquired)
        if acquired:
            MODEL_LOADS.release()

    t = threading.Thread(target=probe)
    t.start()
    t.join()
    return not got[0]


def test_decorated_builds_never_overlap():
    inside, overlaps = [0], []

    @one_load_at_a_time
    def build():
        inside[0] += 1
        overlaps.append(inside[0])
        time.sleep(0.01)
        inside[0] -= 1

    threads = [threading.Thread(target=build) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert overlaps == [1] * 8


def test_the_cross_encoder_and_the_dense_encoder_are_built_under_the_lock(monkeypatch):
    import sentence_transformers

    from rbench.retrievers import models
    from rbench.retrievers.rerankers import CrossEncoderScorer, RerankerParams

    seen = []

    class Fake:
        def __init__(self, *args, **kwargs):
            seen.append(held_by_another_thread())

    monkeypatch.setattr(sentence_transformers, "CrossEncoder", Fake)
    monkeypatch.setattr(sentence_transformers, "SentenceTransformer", Fake)
    CrossEncoderScorer(RerankerParams(model="cross-encoder/ms-marco-MiniLM-L-6-v2")).load()
    resolved = models.ResolvedModel(id="x", kind="sentence-transformers", location="x", source="hub")
    models._load_encoder.__wrapped__(resolved, None, (None, "float32", False, None, "torch"))  # past the cache
    assert seen == [True, True]
    assert not held_by_another_thread()
