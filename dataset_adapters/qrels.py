"""Relevance judgements in the two common layouts: BEIR's ``query-id<TAB>corpus-id<TAB>score``
(with or without its header) and TREC's ``qid iteration docid grade``."""

from __future__ import annotations

from pathlib import Path
from typing import Iterable
from urllib.parse import unquote

from rbench.core.errors import DataError


def read_qrels(path: Path, shown: Path | None = None) -> dict[str, dict[str, int]]:
    """``{query_id: {doc_id: grade}}`` from a BEIR TSV or a TREC qrels file, told apart by
    each line's field count (3 tab-separated, or 4 whitespace-separated). TREC ids are
    percent-decoded (rbench writes them percent-encoded). Grades 0 and below are kept:
    callers decide that only grades > 0 are relevant. A malformed line is a DataError
    naming the file (``shown``: the user's file) and line."""
    with open(path, encoding="utf-8") as f:
        return parse_qrels(f, shown or path)


def parse_qrels(lines: Iterable[str], name: "str | Path") -> dict[str, dict[str, int]]:
    """:func:`read_qrels` of lines already read (``name`` names them in an error)."""
    qrels: dict[str, dict[str, int]] = {}
    for line_no, line in enumerate(lines, 1):
        if not line.strip():
            continue
        tabs = line.rstrip("\n").split("\t")
        if len(tabs) == 3:
            if line_no == 1 and tabs[:2] == ["query-id", "corpus-id"]:
                continue
            qid, doc, grade = tabs
        else:
            fields = line.split()
            if len(fields) != 4:
                raise DataError(f"{name}:{line_no} must be 'query-id<TAB>corpus-id<TAB>score' (BEIR) or "
                                f"'qid 0 docid grade' (TREC), got {line.rstrip()!r}")
            qid, doc, grade = unquote(fields[0]), unquote(fields[2]), fields[3]
        if not grade.strip().lstrip("-").isdigit():
            raise DataError(f"{name}:{line_no}: relevance {grade!r} is not an integer grade")
        qrels.setdefault(qid, {})[doc] = int(grade)
    return qrels
