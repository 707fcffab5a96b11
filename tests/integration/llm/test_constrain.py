"""Constrained decoding with SmolLM2 through transformers: a regex the whole answer must
match, and corpus n-grams (every generated phrase occurs in the corpus)."""

from __future__ import annotations

import pytest

from rbench.llm.constrain import Constraint, NgramTable, table_digest

pytestmark = pytest.mark.slow
ACTION = r"Search\[[^\]\n]{1,60}\]|Finish"


@pytest.fixture(scope="module")
def smollm2():
    from rbench.llm.client import LLM

    return LLM({"backend": "transformers", "model": "smollm2-135m", "batch_size": 8})


def test_every_answer_matches_the_regex(smollm2):
    import regex

    from rbench.llm.config import Sampling

    questions = ["Who won the 1998 World Cup?", "What is the capital of Peru?", "Which year was Andy Karl nominated?",
                 "How tall is the Eiffel tower?", "Who wrote Hamlet?", "Is there anything left to search?"]
    prompts = [[("system", "Reply with one action: Search[keywords] to look something up, or Finish."),
                ("user", f"Question: {q}\nAction:")] for q in questions]
    free = smollm2.chat_one(prompts, Sampling(max_tokens=24))
    constrained = smollm2.chat_one(prompts, Sampling(max_tokens=24, constraint=Constraint(kind="regex", pattern=ACTION)))
    assert all(regex.fullmatch(ACTION, a) for a in constrained), constrained
    assert not all(regex.fullmatch(ACTION, a) for a in free)  # the constraint is what makes them well-formed


def test_a_bad_regex_is_named():
    with pytest.raises(ValueError, match="does not compile"):
        Constraint(kind="regex", pattern="Search[(")


def _normalized(texts):
    return [" " + " ".join(t.split()) for t in texts]


def test_every_generated_ngram_occurs_in_fetaqa_dev(smollm2, shared_data, tmp_path):
    import pyarrow.parquet as pq

    from rbench.config import DatasetConfig
    from rbench.core.store import Store
    from rbench.llm.backends import backend_for
    from rbench.llm.config import Sampling
    from rbench.tasks.download import DOWNLOAD, DownloadConfig
    from rbench.tasks.prepare import PREPARE

    ds = DatasetConfig(name="fetaqa", adapter="fetaqa")
    store = Store(tmp_path / "store")
    prepared = PREPARE.run(store, [DOWNLOAD.run(store, [], DownloadConfig.of(ds, shared_data), mirror=shared_data)], ds)
    texts = pq.read_table(prepared.file("corpus.parquet"), columns=["text"]).column("text").to_pylist()
    questions = pq.read_table(prepared.file("queries.parquet"), columns=["text"]).column("text").to_pylist()[:20]
    tokenizer = backend_for(smollm2.config).tokenizer
    table = NgramTable.build(texts, tokenizer, max_len=5)
    path = tmp_path / "ngrams.npy"
    table.save(path)
    constraint = Constraint(kind="ngrams", table=str(path), digest=table_digest(path), min_len=2)
    prompts = [[("system", "Rewrite the question's key phrase as it would appear in a table."),
                ("user", f"Question: {q}\nPhrase:")] for q in questions]
    answers = smollm2.chat_one(prompts, Sampling(max_tokens=5, constraint=constraint, beams=5))
    phrases = [line for answer in answers for line in answer.split("\n")]
    assert len(phrases) >= 100
    corpus = "\n".join(_normalized(texts))
    for phrase in phrases:
        assert phrase.strip() and phrase in corpus, phrase
    assert len(set(phrases)) > 20  # not one phrase repeated: the beams differ
