"""ARM's parts with hand-computed values: sub-n-grams, column values, lexical compatibility,
keyword parsing; and its settings refused before work."""

from __future__ import annotations

import pytest

from rbench.llm.parse import parse_keywords
from rbench.retrievers.arm import column_values, lexical, sub_ngrams

STOP = frozenset({"the", "of", "in"})


def test_sub_ngrams_are_counted_after_stopword_removal():
    grams = sub_ngrams(["the Drama Desk Award", "Drama Desk", "award of the year"], STOP, limit=4)
    # counts: drama 2, desk 2, "drama desk" 2, award 2, "desk award" 1, ... ; ties: longer first, then a-z
    assert grams == ["drama desk", "award", "desk", "drama"]
    assert sub_ngrams([], STOP, 5) == [] and sub_ngrams(["the of"], STOP, 5) == []


def test_column_values_and_lexical_compatibility():
    a = "Andy Karl - Awards [SEP] [H] Year : 2013 , [H] Award : Drama Desk Award , [H] Result : Nominated"
    b = "Andy Karl - Awards [SEP] [H] Year : 2014 , [H] Award : Drama Desk Award , [H] Result : Nominated"
    assert column_values(a) == {"2013", "drama desk award", "nominated"}
    assert column_values("a passage about chess") is None
    assert lexical(a, b, STOP) == pytest.approx(2 / 4)  # Jaccard of {2013, dda, nominated} and {2014, dda, nominated}
    # a row and a passage: overlap coefficient of word sets (stopwords removed)
    passage = "Karl won the Drama Desk in 2013"  # {karl, won, drama, desk, 2013}
    words_a = {"andy", "karl", "awards", "sep", "h", "year", "2013", "award", "drama", "desk", "result", "nominated"}
    assert lexical(a, passage, STOP) == pytest.approx(len(words_a & {"karl", "won", "drama", "desk", "2013"}) / 5)
    assert lexical("the of", passage, STOP) == 0.0


@pytest.mark.parametrize("text, keywords, status", [
    ("Andy Karl | Drama Desk | 2013", ["Andy Karl", "Drama Desk", "2013"], "ok"),
    ("- Andy Karl\n- Drama Desk", ["Andy Karl", "Drama Desk"], "repaired"),
    ('"Andy Karl", Drama Desk; andy karl', ["Andy Karl", "Drama Desk"], "repaired"),
    ("a | b | c | d", ["a", "b", "c"], "repaired"),
    ("  |  ", [], "fallback"),
])
def test_keywords_are_parsed_permissively(text, keywords, status):
    parsed = parse_keywords(text, limit=3)
    assert parsed.items == keywords and parsed.status == status


SMOL = {"backend": "transformers", "model": "smollm2-135m"}


@pytest.mark.parametrize("params, message", [
    ({"llm": SMOL, "selection": "rerank"}, "selection: rerank needs a rerank"),
    ({"llm": {"backend": "openai", "model": "m"}}, "ngram_alignment constrains generation"),
    ({"llm": SMOL, "dense": {"name": "bm25s"}}, "dense must be a dense retriever"),
    ({"llm": SMOL, "corpus_ngram_min_len": 4, "corpus_ngram_max_len": 3}, "corpus_ngram_min_len 4 is above"),
    ({"llm": SMOL, "mip_formulation": "cubic"}, "mip_formulation"),
    ({"llm": SMOL, "mip_formulation": "reproduction"}, "use mip_solver: cp_sat or scip for mip_formulation: repro"),
    ({"llm": SMOL, "base": {"name": "ngrams", "params": {"tokenizer": "smollm2-135m"}}}, "'ngrams' is not a retriever"),
])
def test_bad_arm_settings_are_named(params, message):
    from rbench.config import RetrieverConfig
    from rbench.core.errors import ConfigError

    with pytest.raises((ConfigError, ValueError), match=message):
        RetrieverConfig(name="arm", params=params)


def test_ngrams_is_not_a_retriever_of_an_experiment():
    from rbench.config import RetrieverConfig

    with pytest.raises(ValueError, match="'ngrams' is not a retriever"):
        RetrieverConfig(name="ngrams", params={"tokenizer": "smollm2-135m"})
