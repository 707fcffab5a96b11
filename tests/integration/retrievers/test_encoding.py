"""Embedding models used as their authors intend: prompts and loading options are validated,
change the embeddings, and enter the index key (document side) or the search (query side)."""

from __future__ import annotations

import numpy as np
import pytest

from rbench.core.errors import ConfigError
from rbench.retrievers.base import make_retriever
from rbench.retrievers.models import Encoding, embed, load_encoder, resolve_model
from tests.conftest import REPO, need

MINILM = "sentence-transformers/all-MiniLM-L6-v2"
SEARCH_INSTRUCTION = "Represent this sentence for searching relevant passages: "
TEXTS = ["Lions - Seasons [SEP] [H] Year : 2001 , [H] Wins : 3", "how many wins did the lions have in 2001"]


def test_known_models_get_their_authors_prompts_and_a_user_value_wins():
    bge = make_retriever("dense", {"model": "BAAI/bge-large-en-v1.5"})
    assert bge.params.encoding.query_prompt == SEARCH_INSTRUCTION and bge.params.encoding.document_prompt is None
    nomic = make_retriever("dense", {"model": "nomic-ai/nomic-embed-text-v1.5"}).params.encoding
    assert (nomic.query_prompt, nomic.document_prompt, nomic.trust_remote_code) == ("search_query: ", "search_document: ", True)
    qwen = make_retriever("dense", {"model": "Qwen/Qwen3-Embedding-0.6B", "encoding": {"dtype": "float16"}}).params.encoding
    assert qwen.query_prompt_name == "query" and qwen.dtype == "float16"
    plain = make_retriever("dense", {"model": "BAAI/bge-large-en-v1.5", "encoding": {"query_prompt": None}})
    assert plain.params.encoding.query_prompt is None


@pytest.mark.parametrize("encoding, message", [
    ({"query_prompt": "q: ", "query_prompt_name": "query"}, "give query_prompt .* or query_prompt_name"),
    ({"backend": "openvino"}, "backend"),
    ({"dtype": "half"}, "dtype"),
    ({"max_seq_length": 0}, "max_seq_length"),
    ({"prompt": "q: "}, "prompt"),
])
def test_bad_encoding_options_are_named(encoding, message):
    with pytest.raises(ValueError, match=message):
        make_retriever("dense", {"model": MINILM, "encoding": encoding})


def test_a_default_encoding_keeps_the_index_key_and_a_document_prompt_changes_it():
    plain = make_retriever("dense", {"model": MINILM})
    prompted = make_retriever("dense", {"model": MINILM, "encoding": {"document_prompt": "passage: "}})
    query_only = make_retriever("dense", {"model": MINILM, "encoding": {"query_prompt": "query: "}})
    assert plain.index_params() == {"model": MINILM, "index": "flat", "hnsw_m": 32, "ef_construction": 200}
    assert prompted.index_params()["encoding"] == {"document_prompt": "passage: "}
    assert prompted.shard_params() == {"model": MINILM, "encoding": {"document_prompt": "passage: "}}
    assert query_only.index_params() == plain.index_params()
    assert query_only.params != plain.params  # so the retrieve stage's key differs


def test_prompts_change_the_embeddings_of_their_side_only():
    plain = make_retriever("dense", {"model": MINILM})
    prompted = make_retriever("dense", {"model": MINILM, "encoding": {"document_prompt": "passage: ",
                                                                       "query_prompt": "query: "}})
    for side in ("document", "query"):
        a, b = plain.encode(TEXTS, side), prompted.encode(TEXTS, side)
        assert a.shape == b.shape == (2, 384) and np.allclose(np.linalg.norm(b, axis=1), 1, atol=1e-5)
        assert not np.allclose(a, b, atol=1e-3)
    doc_only = make_retriever("dense", {"model": MINILM, "encoding": {"document_prompt": "passage: "}})
    assert np.allclose(doc_only.encode(TEXTS, "query"), plain.encode(TEXTS, "query"), atol=1e-6)


def test_max_seq_length_cuts_inputs_and_the_model_is_loaded_once_per_setting():
    model = resolve_model(MINILM)
    assert load_encoder(model) is load_encoder(model)
    short = load_encoder(model, encoding=Encoding(max_seq_length=8))
    assert short is not load_encoder(model) and short.max_seq_length == 8
    cut = make_retriever("dense", {"model": MINILM, "encoding": {"max_seq_length": 8}})
    assert cut.index_params()["encoding"] == {"max_seq_length": 8}
    long_text = [TEXTS[0] + " and more words" * 20]
    assert not np.allclose(cut.encode(long_text, "document"), make_retriever("dense", {"model": MINILM}).encode(long_text, "document"), atol=1e-3)


def test_a_prompt_name_the_model_does_not_ship_is_named():
    dense = make_retriever("dense", {"model": MINILM, "encoding": {"query_prompt_name": "retrieval"}})
    with pytest.raises(ConfigError, match=r"query_prompt_name 'retrieval' is not a prompt of this model; "
                                          r"it ships \['document', 'query'\]"):
        dense.encode(TEXTS, "query")


def test_onnx_backends_match_torch_and_are_keyed_apart(tmp_path, monkeypatch):
    need("onnx")
    need("onnxruntime")
    monkeypatch.setenv("RBENCH_CACHE", str(tmp_path))
    torch_dense = make_retriever("dense", {"model": MINILM})
    onnx_dense = make_retriever("dense", {"model": MINILM, "encoding": {"backend": "onnx"}})
    int8_dense = make_retriever("dense", {"model": MINILM, "encoding": {"backend": "onnx_int8",
                                                                         "query_prompt": "query: "}})
    texts = TEXTS * 3 + ["a much longer passage " * 30]
    reference = torch_dense.encode(texts, "document")
    assert np.allclose(onnx_dense.encode(texts, "document"), reference, atol=1e-4)
    cosines = (int8_dense.encode(texts, "document") * reference).sum(1)
    assert cosines.min() > 0.85 and not np.allclose(cosines, 1, atol=1e-4)  # int8 weights: close, not equal
    query = int8_dense.encode(TEXTS[1:], "query") @ int8_dense.encode(["query: " + TEXTS[1]], "document").T
    assert query[0, 0] == pytest.approx(1, abs=1e-5)  # the query prompt is put before the text
    assert len(list((tmp_path / "onnx").glob("*.onnx"))) == 2
    keys = {d.index_params()["encoding"]["backend"] for d in (onnx_dense, int8_dense)}
    assert keys == {"onnx", "onnx_int8"} and "encoding" not in torch_dense.index_params()


def test_the_twelve_model_benchmark_config_loads_with_each_models_prompts():

    from rbench.config import load_config

    cfg = load_config(REPO / "configs" / "embeddings-arm12.yaml")
    models = [r.params["model"] for r in cfg.retrievers]
    assert len(set(models)) == 12 and {r.name for r in cfg.retrievers} == {"dense"}
    encodings = {r.params["model"]: r.params["encoding"] for r in cfg.retrievers}
    assert encodings["intfloat/e5-large-v2"]["document_prompt"] == "passage: "
    assert encodings["Qwen/Qwen3-Embedding-4B"]["query_prompt_name"] == "query"
    assert encodings["nomic-ai/nomic-embed-text-v1.5"]["trust_remote_code"] is True
    assert {d.params["split"] for d in cfg.datasets if "split" in d.params} == {"test"}


def test_a_shared_model_encodes_safely_from_many_threads():
    from concurrent.futures import ThreadPoolExecutor

    dense = [make_retriever("dense", {"model": MINILM, "batch_size": 2}) for _ in range(4)]
    assert len({id(d._encoder()) for d in dense}) == 1  # one loaded copy, shared
    texts = [f"{TEXTS[0]} {i}" for i in range(12)]
    expected = dense[0].encode(texts, "document")
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda d: d.encode(texts, "document"), dense * 3))
    assert all(np.allclose(r, expected, atol=1e-5) for r in results)


def test_a_half_precision_checkpoint_loads_in_the_dtype_asked_for(tmp_path):
    """A checkpoint stored in float16 (as many hub models are) loads in float32 by default: without the
    dtype passed, transformers loads it as stored and the 'float32' setting meant float16. Vectors of a
    half-precision model are unit length in float32 (normalised in bfloat16, norms were off by 1e-3)."""
    import shutil

    from safetensors.torch import load_file, save_file

    source = resolve_model(MINILM).location
    folder = tmp_path / "minilm-f16"
    shutil.copytree(source, folder, ignore=shutil.ignore_patterns("model.safetensors"))
    weights = load_file(f"{source}/model.safetensors")
    save_file({k: v.half() for k, v in weights.items()}, folder / "model.safetensors", metadata={"format": "pt"})
    for dtype, expected in (("float32", "torch.float32"), ("bfloat16", "torch.bfloat16")):
        encoder = load_encoder(resolve_model(str(folder)), "cpu", Encoding(dtype=dtype))
        assert str(next(encoder.parameters()).dtype) == expected
        vectors = embed(encoder, TEXTS, Encoding(dtype=dtype), "document")
        assert vectors.dtype == np.float32 and np.abs(np.linalg.norm(vectors, axis=1) - 1).max() < 1e-6
