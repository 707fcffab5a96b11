"""The corpus n-grams of ARM's constrained alignment: every window of ``max_len`` tokens
(of the aligning LLM's tokenizer) that starts at a word, as a sorted table searched as a
trie (:class:`rbench.llm.constrain.NgramTable`). An index of its own, cached by corpus
content, ``max_len`` and the tokenizer's identity; not a retriever to search."""

from __future__ import annotations

from pathlib import Path
from typing import Mapping

from pydantic import BaseModel, ConfigDict, Field, StrictInt

from rbench.retrievers.base import RETRIEVERS, Retriever, Run
from rbench.retrievers.corpus import corpus_batches

TABLE = "ngrams.npy"


class NgramParams(BaseModel):
    """``tokenizer``: the aligning LLM (a packaged name, hub id, folder or .gguf file)."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    tokenizer: str = Field(min_length=1)
    max_len: StrictInt = Field(5, ge=1, le=16)
    """The table's window: every run of this many tokens of the corpus, in the LLM's tokenizer."""


def load_tokenizer(model: str):
    """The tokenizer of an LLM as the transformers backend loads it."""
    from transformers import AutoTokenizer

    from rbench.llm.models import converted_folder, resolve_llm

    return AutoTokenizer.from_pretrained(str(converted_folder(resolve_llm(model))))


@RETRIEVERS.register
class NgramIndex(Retriever):
    """Corpus n-grams for trie-constrained generation (ARM's alignment step)."""

    name = "ngrams"
    description = "corpus n-gram table for ARM's constrained alignment (an index for arm, not a retriever)"
    Params = NgramParams
    index_fields = ("tokenizer", "max_len")
    searchable = False
    native = True

    def model_identities(self) -> list[str]:
        from rbench.llm.config import LLMConfig
        from rbench.llm.models import llm_identity

        return [llm_identity(LLMConfig(backend="transformers", model=self.params.tokenizer))]

    def index(self, corpus: Path, folder: Path) -> dict:
        from rbench.llm.constrain import NgramTable

        tokenizer = load_tokenizer(self.params.tokenizer)
        texts = [t for _, batch in corpus_batches(corpus) for t in batch]
        table = NgramTable.build(texts, tokenizer, self.params.max_len)
        table.save(folder / TABLE)
        return {"indexed": len(texts), "windows": len(table.windows), "max_len": self.params.max_len}

    def load(self, folder: Path) -> None:
        from rbench.llm.constrain import table_digest

        self.table_path = folder / TABLE
        self.digest = table_digest(self.table_path)

    def search(self, queries: Mapping[str, str], k: int) -> Run:
        raise TypeError("ngrams is an index for arm's alignment step, not a retriever: use arm")
