"""ARM's decomposition as ARM's code computes it, piece by piece on hand-made inputs: a reference prompt read
by parsing a pinned source file (never executing it) and checked by sha256; ARM's line reading; RRF ties in
the order first met; and the settings that ask for them. (ARM's own file and ARM's hits are compared in
``tests/integration/retrievers/test_arm_decomposition_reference.py`` and ``tests/reference/ottqa_decomp.py``.)"""

from __future__ import annotations

import hashlib

import pytest

from rbench.core.errors import DataError
from rbench.core.pinned_files import PinnedFile, read_pinned
from rbench.evaluation.runs_fusion import fuse_ranking
from rbench.llm.parse import parse_lines
from rbench.llm.prompts import parse_prompt, prompt_file_text
from rbench.llm.reference_prompts import _arm_decompose
from rbench.retrievers.base import make_retriever

COMMIT = "0123456789abcdef0123456789abcdef01234567"
SOURCE = '''
import os
raise SystemExit("a reference file is parsed, never run")

class QueryDecomposer:
    def __init__(self, model="m"):
        self.model = model
        examples_data = [
            {"input": "Who is A and where is B?", "tool_calls": [{"sub_query": "Who is A"}, {"sub_query": "Where is B"}]},
            {"input": "What is C", "tool_calls": [{"sub_query": "What is C"}]},
        ]
        self.system_prompt_content = """Split the question.
Keep *every* term."""
'''


def test_arms_decomposer_source_gives_its_messages_without_being_run():
    prompt = parse_prompt(prompt_file_text(_arm_decompose(SOURCE, "ARM@0123 decomposer.py"), "ARM"), "arm:decompose")
    assert prompt.render(question="Is D  older than E ?", max_queries="4") == [
        ("system", "Split the question.\nKeep *every* term."),
        ("user", "Who is A and where is B?"), ("assistant", "Who is A\nWhere is B"),
        ("user", "What is C"), ("assistant", "What is C"),
        ("user", "Is D  older than E ?")]


@pytest.mark.parametrize("source, message", [
    ("class QueryDecomposer:\n    def __init__(self):\n        self.x = make()\n", "no class QueryDecomposer with"),
    ("class QueryDecomposer:\n    def __init__(self):\n        examples_data = []\n", "no longer assigns a string"),
    (SOURCE.replace('{"sub_query": "What is C"}', '"What is C"'), "examples_data item 2 is not"),
    ("def broken(:\n", "is not Python source"),
])
def test_a_source_that_is_not_arms_decomposer_is_refused_by_name(source, message):
    with pytest.raises(DataError, match=message):
        _arm_decompose(source, "ARM@0123 decomposer.py")


@pytest.mark.parametrize("system, message", [("Keep {terms}.", "{terms} in a fixed message would be filled in"),
                                             ("Split. ", "begins or ends with white space")])
def test_a_message_a_prompt_file_cannot_keep_as_it_is_is_refused(system, message):
    data = {**_arm_decompose(SOURCE, "ARM"), "system": system}
    with pytest.raises(DataError, match=message):
        prompt_file_text(data, "ARM@0123 decomposer.py")


def test_a_pinned_file_is_read_from_the_mirror_only_when_its_digest_matches(tmp_path, monkeypatch):
    monkeypatch.setenv("RBENCH_CACHE", str(tmp_path / "cache"))
    body = SOURCE.encode()
    pinned = PinnedFile("org/ref", COMMIT, "src/d.py", hashlib.sha256(body).hexdigest())
    copy = tmp_path / "mirror" / "github" / "org" / "ref" / "src" / "d.py"
    copy.parent.mkdir(parents=True)
    copy.write_bytes(body)
    assert read_pinned(pinned, tmp_path / "mirror") == body
    copy.write_bytes(body + b"# edited\n")
    with pytest.raises(DataError, match=r"src/d.py is not src/d.py of org/ref@01234567 \(its sha256 is not"):
        read_pinned(pinned, tmp_path / "mirror")
    assert not (tmp_path / "cache").exists()  # nothing unchecked kept


@pytest.mark.parametrize("raw, items, status", [
    ("  Who  is\tA \n\n Where is B\nWho is A\n", ["Who is A", "Where is B", "Who is A"], "ok"),  # repeats kept
    ("1. Who is A\r\nWhere is B:", ["1. Who is A", "Where is B:"], "ok"),  # nothing stripped but white space
    (" \n \n", [], "fallback"),
])
def test_lines_are_read_as_arm_reads_them(raw, items, status):
    parsed = parse_lines(raw)
    assert (parsed.items, parsed.status) == (items, status)


def test_rrf_ties_by_id_or_in_the_order_first_met():
    runs = [[("b", 0.0), ("a", 0.0)], [("a", 0.0), ("b", 0.0)], [("c", 0.0)]]
    # b and a: 1/61 + 1/62 each; c: 1/61
    assert [d for d, _ in fuse_ranking(runs, "rrf", 60)] == ["a", "b", "c"]
    assert [d for d, _ in fuse_ranking(runs, "rrf", 60, ties="first_seen")] == ["b", "a", "c"]
    scores = dict(fuse_ranking(runs, "rrf", 60, ties="first_seen"))
    assert scores["b"] == 1 / 61 + 1 / 62 and scores["c"] == 1 / 61


def test_arms_settings_are_checked_together():
    base = {"llm": {"backend": "transformers", "model": "smollm2-135m"}, "first_stage": {"name": "bm25s"}}
    spec = make_retriever("decompose", {**base, "parse": "lines"}).own_rewrites()[0]
    assert spec.kind == "decompose_lines"
    with pytest.raises(ValueError, match="max_queries applies to parse: queries"):
        make_retriever("decompose", {**base, "parse": "lines", "max_queries": 3})
    with pytest.raises(ValueError, match="rerank_candidates needs a rerank model"):
        make_retriever("decompose", {**base, "rerank_candidates": "union"})
    with pytest.raises(ValueError, match="cap_to_context needs the LLM's context_tokens"):
        make_retriever("decompose", {**base, "cap_to_context": True})
    sized = {**base, "llm": {**base["llm"], "context_tokens": 4096}}
    capped = make_retriever("decompose", {**sized, "cap_to_context": True}).own_rewrites()[0]
    smaller = make_retriever("decompose", {**sized, "cap_to_context": True, "llm": {**sized["llm"], "context_tokens": 2048}})
    assert capped.sampling.cap_to_context and capped.key_view() != make_retriever("decompose", sized).own_rewrites()[0].key_view()
    assert capped.key_view() != smaller.own_rewrites()[0].key_view()  # the context decides where answers stop
    assert make_retriever("decompose", {**base, "prompt": "arm:decompose"}).params.prompt == "arm:decompose"  # read later
