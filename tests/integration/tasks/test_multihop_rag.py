"""MultiHop-RAG from its upstream files, as the ARM reproduction's chunking.py and
generate_benchmark_all.py turn them into the release's corpus and benchmark (issue 69, item 3),
with a tiny local chonky model standing in for mirth/chonky_modernbert_base_1. ~10 s (torch)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rbench.core.errors import DataError
from tests.integration.tasks.test_chonky import _tiny_model
from tests.unit.datasets.test_adapters import _prepare, _table

ARTICLES = [
    {"title": "Cats. And dogs", "author": "A", "source": "Wired", "published_at": "2023-10-01", "category": "pets",
     "url": "https://example.org/1", "body": "<p>the cat sat on the mat .</p>\n<p>the dog ran in the park .</p>"},
    {"title": "Dawn chorus", "author": "B", "source": "The Verge", "published_at": "2023-10-02", "category": "birds",
     "url": "https://example.org/2", "body": "birds sing at dawn .\n\nthe  park\tat dawn ."},
    {"title": "Empty", "author": "C", "source": "Wired", "published_at": "2023-10-03", "category": "none",
     "url": "https://example.org/3", "body": ""},
]
QUERIES = [
    {"query": "Do cats and birds both like the park?", "answer": "Yes", "question_type": "comparison_query",
     "evidence_list": [{"title": "Cats. And dogs", "source": "Wired", "fact": "the dog ran"},
                       {"title": "Dawn chorus", "source": "The Verge", "fact": "birds sing"}]},
    {"query": "Who sings at dawn?", "answer": "birds", "question_type": "inference_query",
     "evidence_list": [{"title": "Dawn chorus", "source": "The Verge", "fact": "birds sing"}]},
]
# What ARM's scripts/MultiiHopRag/chunking.py (apostolhskouk/ARM at 5a6cb92; run 2026-11-29 with only
# its model id and device changed: the tiny model below, with separators everywhere, on the CPU; magika
# 1.0.3) wrote for ARTICLES: a chunk per separator run and the empty rest, the markup identified as
# plain text and only its whitespace folded.
ARM_OBJECTS = [
    {"page_title": "Wired", "source": "sentence_Cats. And dogs",
     "object": "Cats. And dogs [SEP] <p>the cat sat on the mat .</p> <p>the dog ran in the park .</p>"},
    {"page_title": "Wired", "source": "sentence_Cats. And dogs", "object": "Cats. And dogs [SEP] "},
    {"page_title": "The Verge", "source": "sentence_Dawn chorus", "object": "Dawn chorus [SEP] birds sing at dawn . the park at dawn ."},
    {"page_title": "The Verge", "source": "sentence_Dawn chorus", "object": "Dawn chorus [SEP] "},
]


@pytest.fixture()
def upstream(tmp_path) -> Path:
    raw = tmp_path / "raw" / "multihop_rag"
    raw.mkdir(parents=True)
    (raw / "corpus.json").write_text(json.dumps(ARTICLES))
    (raw / "MultiHopRAG.json").write_text(json.dumps(QUERIES))
    return raw.parent


def test_multihop_rag_from_the_upstream_files_writes_what_arms_scripts_write(tmp_path, upstream):
    model = _tiny_model(tmp_path / "separators", separator_bias=5.0)
    prepared = _prepare(tmp_path, upstream, {"name": "mhr", "adapter": "multihop_rag", "params": {"model": model}})
    corpus = _table(prepared.file("corpus.parquet"))
    assert [{"page_title": c["page_title"], "source": c["source"], "object": c["text"]} for c in corpus] == ARM_OBJECTS
    queries = _table(prepared.file("queries.parquet"))
    assert [q["text"] for q in queries] == [q["query"] for q in QUERIES]
    assert [q["gold_doc_ids"] for q in queries] == [["Wired_sentence_Cats. And dogs", "The Verge_sentence_Dawn chorus"],
                                                    ["The Verge_sentence_Dawn chorus"]]
    assert [q["gold_found"] for q in queries] == [2, 1]  # ids: agree, the title as chunking.py keeps it

    # ARM's HEAD: generate_benchmark_all.py slugs the title (line 20), chunking.py does not: no gold is found
    with pytest.raises(DataError, match=r"2 of 2 queries have no gold document in the corpus.*Cats__And_dogs"):
        _prepare(tmp_path / "head", upstream, {"name": "mhr", "adapter": "multihop_rag", "max_missing_gold": 1.0,
                                               "params": {"model": model, "ids": "arm_head"}})


def test_the_prepare_key_follows_the_chonky_models_files_and_the_libraries_that_cut(tmp_path):
    """A changed local model folder gives a new prepare key in the same process, and so does a
    chonky chunker's; the versions of chonky and magika are in it; an adapter that runs no model
    keeps the key it had (no "models" part). Under a second beside the tiny model."""
    from rbench.config import DatasetConfig
    from rbench.core.hashing import folder_fingerprint
    from rbench.tasks.prepare import chunks_with_a_model, prepare_key

    model = Path(_tiny_model(tmp_path / "model", separator_bias=5.0))
    (tmp_path / "c.jsonl").write_text('{"doc_id": "d", "text": "t"}\n')
    (tmp_path / "q.jsonl").write_text('{"query_id": "q", "text": "t", "relevant": ["d"]}\n')
    multihop = DatasetConfig.model_validate({"name": "mhr", "adapter": "multihop_rag", "params": {"model": str(model)}})
    chunked = DatasetConfig.model_validate({"name": "c", "adapter": "jsonl", "params": {
        "corpus": str(tmp_path / "c.jsonl"), "queries": str(tmp_path / "q.jsonl"),
        "chunker": {"kind": "chonky", "model": str(model), "size": 64}}})
    first = [prepare_key(multihop), prepare_key(chunked)]
    assert all(key["models"] == [f"folder:{folder_fingerprint(model)}"] for key in first)
    assert all(set(key["libraries"]) == {"chonky", "magika"} and key["libraries"]["chonky"] for key in first)
    assert chunks_with_a_model(multihop) and chunks_with_a_model(chunked)

    weights = model / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-4] + bytes(4))  # a fine-tuned model saved over the old one
    assert [prepare_key(multihop), prepare_key(chunked)] != first
    assert prepare_key(multihop)["params"] == first[0]["params"]  # the path is the same: the files decided

    plain = DatasetConfig.model_validate({"name": "p", "adapter": "jsonl", "params": {
        "corpus": str(tmp_path / "c.jsonl"), "queries": str(tmp_path / "q.jsonl")}})
    assert set(prepare_key(plain)) == {"adapter", "adapter_version", "params"} and not chunks_with_a_model(plain)


def test_a_model_saved_over_between_two_builds_of_one_process_cuts_with_its_new_weights(tmp_path, upstream):
    """In a long-lived process (a notebook's stage process), a chonky model folder saved over with
    other weights gives a new prepare key and is loaded again: the corpus follows the new weights,
    not the splitter loaded first. ~5 s (two tiny models)."""
    folder = tmp_path / "model"
    dataset = {"name": "mhr", "adapter": "multihop_rag", "params": {"model": str(folder)}}
    _tiny_model(folder, separator_bias=5.0)  # a cut at every separator
    cut = _table(_prepare(tmp_path, upstream, dataset).file("corpus.parquet"))
    _tiny_model(folder, separator_bias=-5.0)  # saved over: no cut at all
    whole = _table(_prepare(tmp_path, upstream, dataset).file("corpus.parquet"))
    assert len(cut) == 4 and len(whole) == 2, (cut, whole)
