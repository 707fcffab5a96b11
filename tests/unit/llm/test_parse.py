"""The permissive parsers on hand-written malformed LLM outputs."""

from __future__ import annotations

import pytest

from rbench.llm.parse import (
    parse_passage,
    parse_queries,
    parse_ranking,
    parse_selection,
)


@pytest.mark.parametrize("text, count, items, status", [
    ("[2] > [1] > [3]", 3, [1, 0, 2], "ok"),
    ("3, 1, 2", 3, [2, 0, 1], "ok"),
    ("", 3, [0, 1, 2], "fallback"),
    ("I think the first passage is the most relevant.", 3, [0, 1, 2], "fallback"),
    ("[2] > [2] > [1] > [3]", 3, [1, 0, 2], "repaired"),          # a repeated id is dropped
    ("[7] > [3] > [0] > [1]", 3, [2, 0, 1], "repaired"),          # out of range dropped, [2] appended
    ("[3]", 4, [2, 0, 1, 3], "repaired"),                          # missing ids keep their previous order
    ("最相关的是第二段", 3, [0, 1, 2], "fallback"),                    # another language, no digits
    ("Ranking: [2] > [1] > [3]. Passage [2] mentions it.", 3, [1, 0, 2], "repaired"),
])
def test_parse_ranking(text, count, items, status):
    parsed = parse_ranking(text, count)
    assert (parsed.items, parsed.status) == (items, status)


def test_parse_ranking_of_nothing():
    assert parse_ranking("[1]", 0).items == []


@pytest.mark.parametrize("text, items, status", [
    ("[4] > [1]", [3, 0], "ok"),
    ("[4], [4], [9], [2], [1]", [3, 1], "repaired"),   # repeat, out of range, and more than k=2
    ("none of them", [], "fallback"),
    ("", [], "fallback"),
])
def test_parse_selection(text, items, status):
    parsed = parse_selection(text, count=5, k=2)
    assert (parsed.items, parsed.status) == (items, status)


QUESTION = "Who won the 1998 world cup and where was it held?"


@pytest.mark.parametrize("text, items, status", [
    ("1998 world cup winner\n1998 world cup host country", ["1998 world cup winner", "1998 world cup host country"], "ok"),
    ("Here are the sub-queries:\n1. 1998 world cup winner\n2) host of the 1998 world cup",
     ["1998 world cup winner", "host of the 1998 world cup"], "repaired"),
    ("- \"world cup 1998 winner\"\n* world cup 1998 winner\n\n• France 1998", ["world cup 1998 winner", "France 1998"],
     "repaired"),
    ("", [QUESTION], "fallback"),
    ("   \n\n", [QUESTION], "fallback"),
    ("1998年世界杯冠军\n举办国", [QUESTION], "fallback"),                # another script than the question
    ("Query 1: 1998 final winner\nQ2: 1998 final venue", ["1998 final winner", "1998 final venue"], "ok"),
    ("a\nb\nc\nd\ne\nf", ["a", "b", "c", "d"], "repaired"),         # more than the limit of 4
])
def test_parse_queries(text, items, status):
    parsed = parse_queries(text, QUESTION, limit=4)
    assert (parsed.items, parsed.status) == (items, status)


def test_parse_queries_master_line():
    parsed = parse_queries("MASTER: The winner of the 1998 World Cup.\n- world cup 1998 final\n- 1998 champion",
                           QUESTION, limit=8)
    assert parsed.master == "The winner of the 1998 World Cup."
    assert parsed.items == ["world cup 1998 final", "1998 champion"] and parsed.status == "ok"
    assert parse_queries("**Master query:** the winner\n- a b", QUESTION, 8).master == "the winner"


def test_parse_passage():
    assert parse_passage('  "France won it, at home."  ', QUESTION).items == ["France won it, at home."]
    assert parse_passage(" \n ", QUESTION).status == "fallback"
