"""Every retriever setting reaches a cache key (issue 70, item 1): a param shapes the index unless
its retriever names it search-time only, and one placed nowhere is refused at the check."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import BaseModel

from rbench.config import RetrieverConfig
from rbench.core.errors import ConfigError
from rbench.core.store import Artifact
from rbench.retrievers.base import RETRIEVERS, Retriever
from rbench.tasks.index import INDEX, IndexConfig

CORPUS = Artifact("prepare", "k", Path("/nowhere"), {"digests": {"corpus": "c"}})


class TfidfParams(BaseModel):
    """A plugin's TF-IDF settings: two shape the index, one only the search."""

    ngram_max: int = 1
    stop_words: str | None = "english"
    min_score: float = 0.0
    device: str | None = None


class Tfidf(Retriever):
    """A plugin retriever that declares nothing but its search-time field."""

    name = "tfidf_probe"
    description = "TF-IDF, as an outside package writes it"
    Params = TfidfParams
    search_fields = ("min_score",)

    def index(self, corpus, folder):
        return {}

    def load(self, folder):
        pass

    def search(self, queries, k):
        return {}


class Undeclared(Tfidf):
    """The same, listing index_fields and forgetting one param."""

    name = "tfidf_undeclared"
    index_fields = ("ngram_max",)


@pytest.fixture
def plugins(monkeypatch):
    RETRIEVERS._load()
    for cls in (Tfidf, Undeclared):
        monkeypatch.setitem(RETRIEVERS._items, cls.name, cls)


def _index_key(name: str, **params) -> str:
    (config,) = IndexConfig.all_of(RetrieverConfig(name=name, params=params))
    return INDEX.key([CORPUS], config)


def test_a_plugins_index_shaping_param_changes_the_index_key_by_default(plugins):
    """On the main of 6e8e733 the index was keyed by ``index_fields`` only (empty by default): a
    variant with ``ngram_max: 2, stop_words: null`` reused the default's index and printed its numbers."""
    default = _index_key("tfidf_probe")
    assert _index_key("tfidf_probe", ngram_max=2) != default
    assert _index_key("tfidf_probe", stop_words=None) != default
    assert _index_key("tfidf_probe", min_score=0.5) == default  # search-time only: the run's key, not the index's
    assert _index_key("tfidf_probe", device="cpu") == default  # where it runs changes no key
    (config,) = IndexConfig.all_of(RetrieverConfig(name="tfidf_probe", params={"ngram_max": 2}))
    assert config.retriever_instance().params.ngram_max == 2  # and the index is built with it


def test_a_param_placed_in_neither_list_is_refused_at_the_check_by_name(plugins):
    with pytest.raises((ConfigError, ValueError),
                       match="not 'stop_words' there or in search_fields.*add each to index_fields"):
        RetrieverConfig(name="tfidf_undeclared")


def test_every_built_in_retriever_places_every_param():
    names = RETRIEVERS.names()
    assert {"bm25", "bm25s", "dense", "ngrams"} <= set(names)
    assert {name: RETRIEVERS.get(name).undeclared_fields() for name in names} == {name: [] for name in names}
