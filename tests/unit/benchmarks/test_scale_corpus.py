"""The scale benchmark's synthetic corpus: where the planted words go, for each vocabulary."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from tests.benchmarks.scale import OBJECTS_PER_DOC, QUERIES, generate


def _read(folder, objects, vocabulary):
    corpus, queries = generate(folder, objects, vocabulary=vocabulary)
    lines = [json.loads(line) for line in corpus.read_text(encoding="utf-8").splitlines()]
    return lines, [json.loads(line) for line in queries.read_text(encoding="utf-8").splitlines()]


@pytest.mark.parametrize("vocabulary, part, repeat, extra", [("tokens", 1, 1, 3), ("words", 2, 4, 0)])
def test_each_query_s_words_are_planted_in_its_gold_document_only(tmp_path, vocabulary, part, repeat, extra):
    objects = OBJECTS_PER_DOC * QUERIES * 2
    lines, queries = _read(tmp_path, objects, vocabulary)
    assert len(lines) == objects and len(queries) == QUERIES
    planted_words = set()
    for query in queries:
        words = query["text"].split()
        assert len(words) == 3 + extra
        planted, (gold,) = words[:3], query["gold_doc_ids"]
        planted_words.update(planted)
        doc = int(gold.removeprefix("doc"))
        holder = lines[doc * OBJECTS_PER_DOC + part]
        assert holder["doc_id"] == gold
        counts = Counter(holder["text"].split("[SEP]", 1)[1].split())
        assert all(counts[w] == repeat for w in planted), (holder, planted)
        assert ("[H]" in holder["text"]) == (vocabulary == "tokens")  # a table row, or a passage
    assert len(planted_words) == 3 * QUERIES
    elsewhere = sum(w in planted_words for line in lines for w in line["text"].split("[SEP]", 1)[1].split())
    assert elsewhere == 3 * repeat * QUERIES
