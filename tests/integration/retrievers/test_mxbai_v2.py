"""mxbai-rerank-v2 as its authors score it: rbench's ``mxbai-v2`` family against ``MxbaiRerankV2.rank``
(mxbai-rerank 0.1.6 in ARM's pins, ``tests/reference/mxbai_rank.py``) on the same pairs, with SmolLM2-135M
as the substitute causal LM; and a causal LM is never scored as a cross-encoder.

Cost: ~25 s (two loads of a 135M model on each side; the GGUF's conversion once per machine, ~30 s)."""

from __future__ import annotations

import json
import subprocess

import pytest

from pydantic import ValidationError

from rbench.core.errors import ConfigError
from rbench.retrievers.rerankers import MxbaiV2Scorer, RerankerParams, make_scorer, resolve_family
from tests.conftest import REPO, arm_python, substitute_causal_reranker, tiny_cross_encoder

ROWS = " ".join(f"[H] year : {1990 + i} , [H] team : club {i} , [H] venue : stadium {i % 3}" for i in range(8))
QUERIES = {
    "q1": ("Which club won the cup in 1995?", {
        "a": "Club 5 won the cup in 1995.", "b": "The weather in Paris is mild.", "c": f"cup winners [SEP] {ROWS}",
        "d": "1995 winners [SEP] [H] year : 1995 , [H] team : club 5", "e": "a", "f": "Cup finals of the 1990s",
        "g": "club 5 [SEP] [H] founded : 1901", "h": "Stadium 2 hosted the 1995 final.", "i": "unrelated text"}),
    "q2": ("who wrote the play hamlet " * 15, {
        "a": "Hamlet is a tragedy by William Shakespeare.", "b": "Macbeth", "c": "Shakespeare [SEP] playwright",
        "d": ROWS}),
    "q3": ("How many goals did club 3 score?", {"a": "club 3 scored 12 goals", "b": "club 3 [SEP] [H] goals : 12",
                                               "c": "club 4 scored 7 goals"}),
}


@pytest.fixture(scope="module")
def reranker(tmp_path_factory):
    return substitute_causal_reranker(tmp_path_factory.mktemp("smollm2") / "reranker")


def authors_ranking(tmp_path, model: str, max_length: int | None, batch_size: int) -> dict[str, list]:
    spec = {"model": model, "max_length": max_length, "batch_size": batch_size,
            "queries": [{"query": text, "documents": list(docs.values()), "top_k": len(docs)}
                        for text, docs in QUERIES.values()]}
    (tmp_path / "pairs.json").write_text(json.dumps(spec))
    subprocess.run([arm_python(), str(REPO / "tests/reference/mxbai_rank.py"), str(tmp_path / "pairs.json"),
                    str(tmp_path / "out.json")], check=True, capture_output=True, timeout=300)
    out = json.loads((tmp_path / "out.json").read_text())
    assert out["versions"]["mxbai-rerank"] == "0.1.6" and out["versions"]["transformers"] == "4.52.4"
    return {q: [(list(docs)[i], score) for i, score in ranked]
            for (q, (_, docs)), ranked in zip(QUERIES.items(), out["ranked"])}


@pytest.mark.parametrize("max_length, batch_size", [(None, 8), (96, 2)], ids=["arm-defaults", "cut-and-bucketed"])
def test_mxbai_v2_ranks_the_pairs_as_the_authors_class_does(tmp_path, reranker, max_length, batch_size):
    """ARM's call (8,192 tokens, batches of 8: q1's nine candidates go through the length buckets), and
    a 96-token cut in batches of 2 (the document cut to fit, q2's query cut to 3/4 of the length)."""
    expected = authors_ranking(tmp_path, reranker, max_length, batch_size)
    scorer = make_scorer(RerankerParams(model=reranker, family="mxbai-v2", max_length=max_length,
                                        batch_size=batch_size))
    assert isinstance(scorer, MxbaiV2Scorer)
    texts = {f"{q}/{oid}": text for q, (_, docs) in QUERIES.items() for oid, text in docs.items()}
    got = scorer.rescore({q: (text, [f"{q}/{oid}" for oid in docs]) for q, (text, docs) in QUERIES.items()}, texts)
    for q, ranked in expected.items():
        assert [oid.split("/")[1] for oid, _ in got[q]] == [oid for oid, _ in ranked], q
        assert max(abs(a[1] - b[1]) for a, b in zip(got[q], ranked)) < 1e-4, q
    assert len({round(s, 3) for hits in got.values() for _, s in hits}) > 10  # real, distinct scores
    assert scorer.stats()["pairs_scored"] == 16


def test_a_causal_lm_is_never_scored_as_a_cross_encoder(tmp_path, reranker):
    with pytest.raises(ValidationError, match=r"causal LM \(LlamaForCausalLM\).*family: mxbai-v2"):
        RerankerParams(model=reranker)
    with pytest.raises(ValidationError, match="family: cross-encoder would score it with another family's head"):
        RerankerParams(model=reranker, family="cross-encoder")
    assert resolve_family(reranker, "mxbai-v2") == "mxbai-v2"
    bert = tiny_cross_encoder(tmp_path / "ce")
    assert resolve_family(bert, "auto") == "cross-encoder"
    with pytest.raises(ValidationError, match="not a causal LM: family: mxbai-v2 needs one"):
        RerankerParams(model=bert, family="mxbai-v2")
    assert resolve_family("mixedbread-ai/mxbai-rerank-large-v2", "auto") == "mxbai-v2"  # by name, offline too
    with pytest.raises(ConfigError, match="family: cross-encoder would score"):
        make_scorer(RerankerParams(model="mixedbread-ai/mxbai-rerank-base-v2").model_copy(update={"family": "cross-encoder"}))
