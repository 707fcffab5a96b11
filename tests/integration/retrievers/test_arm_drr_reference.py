"""rbench's `dense` and `rerank` (family mxbai-v2) against ARM's own `dr` and `drr` (``FaissDenseRetriever``,
``DenseRetrieverWithReranker`` of apostolhskouk/ARM@5a6cb92), hit for hit, on the OTT-QA dev slice that
``tests/reference/ottqa_drr.py record`` ran ARM's classes on with the same substitute models (its hits,
with their provenance, in ``tests/reference/recorded/ottqa-drr.json``).

Cost: ~45 s (MiniLM over the slice's rows twice, SmolLM2 over 5 x 30 pairs, the GGUF's conversion once)."""

from __future__ import annotations

from tests.conftest import REPO, substitute_causal_reranker
from tests.reference.ottqa_drr import RECORDED, rbench_hits, recorded_slice

DATA = REPO.parent / "shared" / "data"


def test_dense_and_mxbai_rerank_give_arms_hits_for_the_same_slice(tmp_path):
    recorded, objects, queries = recorded_slice(RECORDED, DATA)
    cut = recorded["provenance"]["slice"]
    ours = rbench_hits(objects, queries, substitute_causal_reranker(tmp_path / "reranker"), cut["k"], tmp_path)
    for method in ("dr", "drr"):
        for q, (arm, got) in enumerate(zip(recorded[method], ours[method])):
            assert [(h["object"], h["page_title"]) for h in got] == [(h["object"], h["page_title"]) for h in arm], \
                (method, queries[q])
            assert max(abs(a["score"] - b["score"]) for a, b in zip(arm, got)) < 1e-4, (method, queries[q])
    assert ours["drr"] != ours["dr"]  # the reranker reordered: it really scored
