"""Permissive parsers of LLM output. None of them raises: each returns what it could use
and a status, ``ok`` (as asked), ``repaired`` (usable after dropping or adding items) or
``fallback`` (nothing usable: the caller keeps its previous result), which is counted."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

NUMBER = re.compile(r"\d+")
BULLET = re.compile(r"^\s*(?:[-*•·]+|\(?\d{1,2}[.):]|(?:sub-?)?query\s*\d*\s*[:.)-]|q\d+\s*[:.)-])\s*", re.I)
MASTER = re.compile(r"^\s*\**\s*master(?:\s+query)?\s*\**\s*[:\-]\s*", re.I)


@dataclass
class Parsed:
    """Parsed items, the status and, for rewrites, the master query."""

    items: list = field(default_factory=list)
    status: str = "ok"
    master: str | None = None


def parse_ranking(text: str, count: int) -> Parsed:
    """A permutation of ``0..count-1`` from identifiers ``1..count`` in any wrapping
    (``[2] > [1]``, ``2, 1``, prose): non-digits ignored, duplicates and out-of-range
    numbers dropped, missing identifiers appended in their previous order."""
    seen: list[int] = []
    clean = True
    for match in NUMBER.findall(text):
        number = int(match)
        if 1 <= number <= count and number - 1 not in seen:
            seen.append(number - 1)
        else:
            clean = False
    if not seen:
        return Parsed(list(range(count)), "fallback" if count else "ok")
    complete = len(seen) == count
    return Parsed(seen + [i for i in range(count) if i not in seen], "ok" if clean and complete else "repaired")


def parse_selection(text: str, count: int, k: int) -> Parsed:
    """The first ``k`` distinct identifiers in ``1..count`` (as 0-based positions); extra,
    repeated and out-of-range numbers are dropped (``repaired``), none is ``fallback``."""
    chosen: list[int] = []
    clean = True
    for match in NUMBER.findall(text):
        number = int(match)
        if 1 <= number <= count and number - 1 not in chosen and len(chosen) < k:
            chosen.append(number - 1)
        else:
            clean = False
    if not chosen:
        return Parsed([], "fallback")
    return Parsed(chosen, "ok" if clean else "repaired")


def _latin_share(text: str) -> float:
    letters = [c for c in text if c.isalpha()]
    return sum(c.isascii() for c in letters) / len(letters) if letters else 0.0


def parse_queries(text: str, question: str, limit: int) -> Parsed:
    """Search queries, one per line: bullets and numbering stripped, preambles (lines ending
    in ':'), blank and repeated lines dropped, lines in another script than the question
    dropped, at most ``limit``; none usable falls back to the question itself. A ``MASTER:``
    line, when present, becomes the master query."""
    queries, master, dropped = [], None, False
    latin_question = _latin_share(question) >= 0.9
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        if MASTER.match(line):
            master = MASTER.sub("", line).strip().strip("\"'*").strip() or master
            continue
        line = BULLET.sub("", line).strip().strip("\"'`*").strip()
        if not line or line.endswith(":") or (latin_question and _latin_share(line) < 0.5) or len(line) > 500:
            dropped = True
            continue
        if line.lower() in {q.lower() for q in queries}:
            dropped = True
            continue
        queries.append(line)
    if len(queries) > limit:
        queries, dropped = queries[:limit], True
    if not queries:
        return Parsed([question], "fallback", master)
    return Parsed(queries, "repaired" if dropped else "ok", master)


def parse_lines(text: str) -> Parsed:
    """Every line that is not blank, each run of white space made one space, in order, repeats kept and
    no limit: ARM's reading of a decomposition (``src/utils/query_decomposition_vllm.py`` lines 207-212,
    apostolhskouk/ARM@5a6cb92: ``strip().split('\\n')``, ``re.sub(r'\\s+', ' ', line).strip()``). No line:
    ``fallback`` with no items (ARM then searches the question alone)."""
    lines = [re.sub(r"\s+", " ", line).strip() for line in text.strip().split("\n")]
    kept = [line for line in lines if line]
    return Parsed(kept, "ok" if kept else "fallback")


def parse_passage(text: str, question: str) -> Parsed:
    """An expansion passage: the text stripped of surrounding whitespace and quotes; an
    empty answer falls back to the question."""
    passage = text.strip().strip("\"'`").strip()
    if not passage:
        return Parsed([question], "fallback")
    return Parsed([passage], "ok")


THOUGHT = re.compile(r"^\s*thought\s*[:\-]?\s*(.*)", re.IGNORECASE)
ACTION = re.compile(r"Action\s*:\s*(?P<action>.*)", re.IGNORECASE)
SEARCH = re.compile(r"Search\s*[\[(:]\s*(?P<keywords>[^\])\n]*?)\s*[\])]?\s*$", re.IGNORECASE)


def parse_action(text: str) -> Parsed:
    """One ReAct turn: ``items`` is ``[thought, action, keywords]`` with action ``search``,
    ``finish`` or ``none``. ``Action: Search[k]`` and ``Action: Finish`` are ``ok``;
    ``Search(k)``, ``Search: k``, other letter case or text around them are ``repaired``;
    no usable action is ``fallback`` (action ``none``)."""
    thought = next((m.group(1).strip() for m in map(THOUGHT.match, text.splitlines()) if m), "")
    found = ACTION.search(text)
    raw = found.group("action").strip() if found else ""
    if re.fullmatch(r"Search\[[^\]\n]+\]", raw) or raw == "Finish":
        status = "ok"
    else:
        status = "repaired"
    if raw.lower().startswith("finish"):
        return Parsed([thought, "finish", ""], status)
    search = SEARCH.match(raw)
    if search and search.group("keywords").strip():
        return Parsed([thought, "search", search.group("keywords").strip()], status)
    return Parsed([thought, "none", ""], "fallback")


def parse_keywords(text: str, limit: int) -> Parsed:
    """Keywords separated by ``|`` (``ok``); separated by lines, commas or semicolons, or
    with bullets and quotes, they are ``repaired``; none is ``fallback`` (empty list)."""
    status = "ok"
    parts = text.split("|")
    if len(parts) == 1 and re.search(r"[\n,;]", text):
        parts, status = re.split(r"[\n,;]", text), "repaired"
    keywords, seen = [], set()
    for part in parts:
        cleaned = BULLET.sub("", part).strip().strip("\"'`*").strip()
        if cleaned != part.strip():
            status = "repaired" if status == "ok" and part.strip() else status
        if cleaned and cleaned.lower() not in seen:
            seen.add(cleaned.lower())
            keywords.append(cleaned)
    if len(keywords) > limit:
        keywords, status = keywords[:limit], "repaired"
    return Parsed(keywords, status if keywords else "fallback")
