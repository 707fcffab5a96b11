"""Output constraints for LLM calls: a regular expression the whole answer must match, or
n-grams that must occur in a corpus (a table of token windows, searched as a trie).

vLLM (in process, or a vLLM server with ``structured_outputs: true``) enforces a regex
itself; the transformers backend enforces both kinds with a logits processor that keeps
only the tokens after which the answer can still be completed; other servers get the
regex checked on the answer and a bounded retry (see :func:`rbench.llm.client.LLM.chat`).
"""

from __future__ import annotations

import hashlib
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, StrictInt, model_validator

PAD = -1


class Constraint(BaseModel):
    """``kind: regex`` with ``pattern`` (matched against the whole answer), or ``kind: ngrams``
    with ``table`` (an :class:`NgramTable` file) and ``digest`` (its content key): the answer
    is ``min_len`` or more tokens of one window of the table."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["regex", "ngrams"]
    pattern: str | None = None
    table: str | None = None
    digest: str | None = None
    min_len: StrictInt = Field(1, ge=1)

    @model_validator(mode="after")
    def _complete(self) -> "Constraint":
        import regex

        if self.kind == "regex":
            if not self.pattern:
                raise ValueError("a regex constraint needs a pattern")
            try:
                regex.compile(self.pattern)
            except regex.error as e:
                raise ValueError(f"regex constraint {self.pattern!r} does not compile: {e}") from None
        elif not (self.table and self.digest):
            raise ValueError("an ngrams constraint needs the table file and its digest")
        return self

    def key_view(self) -> dict[str, Any]:
        """What the answer depends on (the table's content, not where it lies)."""
        if self.kind == "regex":
            return {"regex": self.pattern}
        return {"ngrams": self.digest, "min_len": self.min_len}

    def accepts(self, text: str) -> bool:
        """Whether a whole answer meets a regex constraint (n-gram answers are checked by tokens)."""
        import regex

        return self.kind != "regex" or regex.fullmatch(self.pattern, text) is not None


class NgramTable:
    """Every window of ``max_len`` tokens of a corpus that starts at a word, sorted: the
    n-grams are the windows' prefixes, so a sorted array serves as a compact trie."""

    def __init__(self, windows: np.ndarray):
        self.windows = windows
        self.max_len = windows.shape[1]

    @classmethod
    def build(cls, texts, tokenizer, max_len: int) -> "NgramTable":
        """Windows of the tokenized ``texts`` (each with a leading space, as words follow a
        prompt), starting at word-initial tokens and cut at line breaks."""
        starts = word_starts(tokenizer)
        breaks = line_breaks(tokenizer)
        rows = []
        for text in texts:
            ids = tokenizer(" " + " ".join(text.split()), add_special_tokens=False)["input_ids"]
            for i, token in enumerate(ids):
                if not starts[token] or breaks[token]:
                    continue
                window = ids[i:i + max_len]
                cut = next((j for j, t in enumerate(window) if breaks[t]), len(window))
                rows.append(window[:cut] + [PAD] * (max_len - cut))
        if not rows:
            return cls(np.zeros((0, max_len), dtype=np.int32))
        windows = np.unique(np.asarray(rows, dtype=np.int32), axis=0)
        return cls(windows)

    def save(self, path: Path) -> None:
        """Write the table (``.npy``)."""
        np.save(path, self.windows)

    @classmethod
    def load(cls, path: Path) -> "NgramTable":
        """Read a table written by :meth:`save`."""
        return cls(np.load(path))

    def _range(self, prefix) -> tuple[int, int]:
        lo, hi = 0, len(self.windows)
        for j, token in enumerate(prefix):
            if j >= self.max_len or lo >= hi:
                return lo, lo
            column = self.windows[lo:hi, j]
            lo, hi = lo + int(np.searchsorted(column, token, "left")), lo + int(np.searchsorted(column, token, "right"))
        return lo, hi

    def next_tokens(self, prefix) -> np.ndarray:
        """The tokens that extend ``prefix`` to a longer n-gram of the corpus."""
        if len(prefix) >= self.max_len:
            return np.zeros(0, dtype=np.int32)
        lo, hi = self._range(prefix)
        following = np.unique(self.windows[lo:hi, len(prefix)])
        return following[following != PAD]

    def contains(self, tokens) -> bool:
        """Whether ``tokens`` is an n-gram of the corpus (a prefix of a window)."""
        lo, hi = self._range(tokens)
        return 0 < len(tokens) <= self.max_len and hi > lo


def word_starts(tokenizer) -> np.ndarray:
    """Per token id: whether its text begins a word (a leading space or word-piece marker)."""
    return _vocab_flags(tokenizer)["start"]


def line_breaks(tokenizer) -> np.ndarray:
    """Per token id: whether its text holds a line break."""
    return _vocab_flags(tokenizer)["break"]


def _vocab_flags(tokenizer) -> dict[str, np.ndarray]:
    flags = getattr(tokenizer, "_rbench_flags", None)
    if flags is None:
        pieces = [tokenizer.decode([i]) for i in range(len(tokenizer))]
        flags = {"start": np.array([p[:1].isspace() for p in pieces]), "break": np.array(["\n" in p for p in pieces])}
        tokenizer._rbench_flags = flags
    return flags


def table_digest(path: Path) -> str:
    """sha256 of a table file (its content key inside a call key)."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


class ConstrainedLogits:
    """A transformers logits processor that keeps, per row, only the tokens after which the
    answer can still satisfy ``constraint`` (and end-of-text once it does)."""

    def __init__(self, constraint: Constraint, tokenizer, prompt_width: int, candidates: int = 64):
        import regex

        self.constraint = constraint
        self.tokenizer = tokenizer
        self.width = prompt_width
        self.candidates = candidates
        self.eos = tokenizer.eos_token_id
        self.table = _load_table(constraint.table) if constraint.kind == "ngrams" else None
        self.compiled = regex.compile(constraint.pattern) if constraint.kind == "regex" else None

    def __call__(self, input_ids, scores):
        import torch

        masked = torch.full_like(scores, float("-inf"))
        for row in range(scores.shape[0]):
            generated = [t for t in input_ids[row, self.width:].tolist() if t != self.tokenizer.pad_token_id
                         or t == self.eos]
            allowed = self._allowed(generated, scores[row])
            masked[row, allowed] = scores[row, allowed]
        return masked

    def _allowed(self, generated: list[int], row_scores) -> list[int]:
        if generated and generated[-1] == self.eos:
            return [self.eos]
        if self.table is not None:
            allowed = self.table.next_tokens(generated).tolist()
            if len(generated) >= self.constraint.min_len or not allowed:
                allowed.append(self.eos)
            return allowed
        text = self.tokenizer.decode(generated)
        ordered = row_scores.argsort(descending=True).tolist()
        allowed = [t for t in ordered[:self.candidates] if t != self.eos and self._extends(generated, t)]
        if not allowed:
            allowed = [t for t in ordered[self.candidates:] if t != self.eos and self._extends(generated, t)]
        if self.compiled.fullmatch(text) is not None or not allowed:
            allowed.append(self.eos)
        return allowed

    def _extends(self, generated: list[int], token: int) -> bool:
        return self.compiled.fullmatch(self.tokenizer.decode(generated + [token]), partial=True) is not None


@lru_cache(maxsize=8)
def _load_table(path: str) -> NgramTable:
    return NgramTable.load(Path(path))
