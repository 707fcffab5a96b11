"""Index stage: one index per (corpus, retriever family, index-shaping params).

Retrievers that encode the corpus with a model (``shard_fields``) build their index from
``encode`` shards: each shard is a cached artifact of its own (rows ``start:stop`` of the
corpus), so shards run in parallel on several workers and a killed build resumes with the
shards, and inside a shard the chunks, that were not finished.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel

from rbench.config import RetrieverConfig
from rbench.core.store import Artifact, Checkpoint, Stage
from rbench.retrievers.base import RETRIEVERS


class BuildKey(BaseModel):
    """What keys an artifact a retriever builds from the corpus (and nothing else does): the retriever's
    name, the code identity of the part that builds it, that part's params and the identity of each model
    the retriever runs (see ``rbench.retrievers.models.model_identity``)."""

    retriever: str
    version: str
    params: dict[str, Any]
    models: list[str] = []


class IndexConfig(BuildKey):
    """Only what shapes the index: the index code's identity and the index params."""

    @classmethod
    def all_of(cls, retriever: RetrieverConfig, instance: Any = None) -> list["IndexConfig"]:
        """The indexes a configured retriever searches: its own, or its components' (in order).
        A component's index has the same key as that retriever's own, so it is shared.
        ``instance``: the retriever built from ``retriever`` already (else built here)."""
        instance = instance if instance is not None else retriever.build()
        return [cls(retriever=leaf.name, version=leaf.code_identity(leaf.index_version), params=leaf.index_params(),
                    models=leaf.model_identities()) for leaf in instance.leaves()]

    def retriever_instance(self):
        """The retriever this index belongs to (built from the index params alone)."""
        return RETRIEVERS.get(self.retriever)(self.params)

    def shards(self, rows: int, shard_size: int, instance: Any = None) -> list["EncodeConfig"]:
        """The encode shards this index is built from; empty when it is built in one piece.
        ``instance``: the retriever this index belongs to, built already (else built here)."""
        instance = instance if instance is not None else self.retriever_instance()
        if not instance.sharded():
            return []
        common = {**self.model_dump(), "version": instance.code_identity(instance.shard_version),
                  "params": instance.shard_params()}
        return [EncodeConfig(**common, start=start, stop=min(start + shard_size, rows))
                for start in range(0, rows, shard_size)] or [EncodeConfig(**common, start=0, stop=0)]


class EncodeConfig(BuildKey):
    """One shard of a model-encoded index: the encoder's code identity and params, and the corpus rows
    ``start:stop``."""

    start: int
    stop: int


def build_encode(folder: Path, inputs: list[Artifact], config: EncodeConfig, checkpoint: Checkpoint,
                 device: str | None = None) -> dict:
    """Encode rows ``start:stop`` of the prepared corpus (resumable per chunk) on ``device``."""
    (prepared,) = inputs
    retriever = RETRIEVERS.get(config.retriever)({**config.params, **({"device": device} if device else {})})
    return retriever.encode_shard(prepared.file("corpus.parquet"), config.start, config.stop, folder, checkpoint)


def build_index(folder: Path, inputs: list[Artifact], config: IndexConfig) -> dict:
    """Build the retriever's index of the prepared corpus into ``folder`` (from its shards, if any)."""
    prepared, *shards = inputs
    retriever = config.retriever_instance()
    corpus = prepared.file("corpus.parquet")
    if shards:
        info = retriever.index_from_shards(corpus, [s.path for s in shards], folder)
        encode = [s.info for s in shards]
        seconds = sum(i.get("encode_seconds") or 0 for i in encode)
        encoded = sum(i.get("encoded") or 0 for i in encode)
        return {**info, "encode_seconds": round(seconds, 6),
                "passages_per_second": round(encoded / seconds, 1) if seconds else None}
    return retriever.index(corpus, folder)


def encodes(config: EncodeConfig) -> bool:
    """An encode shard always runs a model (torch or ONNX)."""
    return True


def loads_native(config: IndexConfig) -> bool:
    """Whether building this index loads torch, FAISS or a tokenizer's model."""
    return config.retriever_instance().loads_native()


ENCODE = Stage("encode", 2, build_encode, resumable=True, input_parts=(("prepare", "corpus"),), native=encodes)
INDEX = Stage("index", 3, build_index, input_parts=(("prepare", "corpus"),), native=loads_native)
