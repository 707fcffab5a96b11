"""Pyserini (Lucene) and bm25s agree on BM25 rankings within a stated tolerance."""

from __future__ import annotations

import random

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from rbench.retrievers.base import make_retriever

VOCAB = [f"{stem}{suffix}" for stem in ("river", "player", "season", "goal", "city", "album", "film", "award",
                                        "census", "bridge", "station", "league", "vote", "party", "song")
         for suffix in ("", "s", "ing")] + [f"w{i}" for i in range(300)]


def _corpus(tmp_path, n_docs=400, seed=7):
    rng = random.Random(seed)
    texts = [" ".join(rng.choice(VOCAB) for _ in range(rng.randint(5, 40))) for _ in range(n_docs)]
    path = tmp_path / "corpus.parquet"
    pq.write_table(pa.table({"object_id": [f"d{i}" for i in range(n_docs)], "text": texts}), path)
    queries = {f"q{i}": " ".join(rng.choice(VOCAB) for _ in range(rng.randint(2, 6))) for i in range(60)}
    return path, queries


def test_pyserini_and_bm25s_rankings_agree(tmp_path):
    corpus, queries = _corpus(tmp_path)
    runs = {}
    for name in ("bm25", "bm25s"):
        retriever = make_retriever(name, {"k1": 0.9, "b": 0.4})
        (tmp_path / name).mkdir()
        retriever.index(corpus, tmp_path / name)
        retriever.load(tmp_path / name)
        runs[name] = retriever.search(queries, k=10)
    top1 = sum(runs["bm25"][q][0][0] == runs["bm25s"][q][0][0] for q in queries) / len(queries)
    overlap = sum(
        len({d for d, _ in runs["bm25"][q]} & {d for d, _ in runs["bm25s"][q]}) / 10 for q in queries
    ) / len(queries)
    assert top1 >= 0.9, top1
    assert overlap >= 0.9, overlap
    lucene = dict(runs["bm25"]["q0"])
    for doc, score in runs["bm25s"]["q0"][:3]:
        assert score == pytest.approx(lucene[doc], rel=0.02)


def test_query_term_weighting_counts_repeated_terms(tmp_path):
    corpus, _ = _corpus(tmp_path)
    scores = {}
    for weighting in ("unique", "tf"):
        retriever = make_retriever("bm25s", {"query_weighting": weighting})
        folder = tmp_path / weighting
        folder.mkdir()
        retriever.index(corpus, folder)
        retriever.load(folder)
        scores[weighting] = dict(retriever.search({"q": "river river river city"}, k=400)["q"])
    doc = next(d for d in scores["tf"] if d in scores["unique"])
    assert scores["tf"][doc] > scores["unique"][doc]


def test_bm25s_keeps_words_unseen_in_the_first_batch_and_first_query(tmp_path):
    n = 4100  # more than one corpus batch of 4096
    texts = [f"common filler{i % 7}" for i in range(n - 1)] + ["zanzibar lighthouse"]
    pq.write_table(pa.table({"object_id": [f"d{i}" for i in range(n)], "text": texts}), tmp_path / "c.parquet")
    retriever = make_retriever("bm25s")
    # 10 words (common, filler0-6, zanzibar, lighthous) + the empty token bm25s adds
    assert retriever.index(tmp_path / "c.parquet", tmp_path)["vocabulary"] == 11
    retriever.load(tmp_path)
    assert retriever.search({"q1": "common"}, k=1)["q1"]
    assert retriever.search({"q2": "zanzibar"}, k=1)["q2"][0][0] == f"d{n - 1}"


def test_bm25s_answers_a_query_of_stopwords_alone_with_nothing(corpus_file, tmp_path):
    from rbench.retrievers.base import make_retriever

    bm25s = make_retriever("bm25s")
    bm25s.index(corpus_file, tmp_path)
    bm25s.load(tmp_path)
    run = bm25s.search({"stop": "the of and", "mixed": "the volcano"}, k=3)
    assert run["stop"] == [] and run["mixed"][0][0] == "o3"


@pytest.mark.parametrize("method", ["lucene", "robertson", "atire", "bm25l", "bm25+"])
def test_the_streamed_bm25s_index_scores_every_term_as_bm25s_own_index(tmp_path, monkeypatch, method):
    import bm25s

    from rbench.retrievers import bm25_sparse

    monkeypatch.setattr(bm25_sparse, "BATCH", 97)  # many postings files, terms spread over them
    corpus, _ = _corpus(tmp_path, n_docs=400)
    texts = pq.read_table(corpus).column("text").to_pylist() + ["the of and", ""]
    pq.write_table(pa.table({"object_id": [f"d{i}" for i in range(len(texts))], "text": texts}), corpus)
    retriever = make_retriever("bm25s", {"method": method})
    info = retriever.index(corpus, tmp_path)
    retriever.load(tmp_path)
    assert not (tmp_path / "_postings").exists()
    own = bm25s.BM25(k1=0.9, b=0.4, method=method)
    own.index(retriever._tokens(retriever._tokenizer(), texts), show_progress=False)
    ours = retriever._engine
    assert set(ours.vocab_dict) == set(own.vocab_dict) and info["vocabulary"] == len(own.vocab_dict)
    assert info["postings"] == len(own.scores["data"]) and ours.scores["num_docs"] == len(texts)
    for term in own.vocab_dict:
        assert np.array_equal(ours.get_scores([term]), own.get_scores([term])), term
    run = retriever.search({"q": "river city goals"}, k=5)["q"]
    best = np.argsort(-own.get_scores(["river", "citi", "goal"]), kind="stable")[:5]
    assert [d for d, _ in run] == [f"d{i}" for i in best]
