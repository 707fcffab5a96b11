"""OTT-QA dev (wenhuchen/OTT-QA): open questions over Wikipedia tables and their linked passages.

The corpus mixes table rows and passages; a question's gold documents are its table
plus every passage named by an ``answer-node`` of type ``passage`` (dev.traced.json).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator, Literal
from urllib.parse import unquote

from pydantic import BaseModel, ConfigDict, model_validator

from rbench.core.errors import DataError
from rbench.dataset_adapters.base import (
    ADAPTERS,
    Adapter,
    CorpusObject,
    FileSpec,
    Query,
    doc_id,
    fix_form,
    pinned_files,
)
from rbench.dataset_adapters.chunking import ChunkerConfig, chunk_text
from rbench.dataset_adapters.serialize import Granularity, arm_row_objects, serialize_text, table_objects

COMMIT = "b289bcca691db21a5259c3420e6b9819a9be9ba3"
UPSTREAM = {
    "ottqa/released_data/": "released_data/",
    "ottqa/tables/": "data/traindev_tables_tok/",
    "ottqa/passages/": "data/traindev_request_tok/",
}
QUESTIONS = "ottqa/released_data/dev.traced.json"


def _url(name: str) -> str:
    for local, remote in UPSTREAM.items():
        if name.startswith(local):
            return f"https://raw.githubusercontent.com/wenhuchen/OTT-QA/{COMMIT}/{remote}{name[len(local):]}"
    raise ValueError(name)


TARGET_FORM = {"passages": False, "granularity": "row", "title": "section"}
"""What ``form: target`` fixes: TARGET's OTT-QA corpus is the dev tables alone, one object per
row, and its context holds only ``section_title`` (TARGET's README, "Note on corpus and
corpus_entry Formatting"), the name ARM's ``serialize_tables.py`` heads each row with."""


class OttqaParams(BaseModel):
    """``form``: ``rbench`` (default) or ``target``, the corpus the ARM report searched: TARGET's
    OTT-QA (the 789 dev tables, no passages, each question's table its only gold) with rows as ARM's
    ``scripts/target/serialize_tables.py`` writes them (``section [SEP] [H] col: val , ...``, every
    cell, rows of the wrong length skipped); it fixes ``passages``, ``granularity`` and ``title``.
    ``granularity`` for tables; ``chunker`` for the linked passages; ``passages``: false keeps the
    tables alone, with each question's table as its only gold document; ``title``: what heads each
    row: ``page_section`` ("page - section", default), ``page``, ``section``, ``table_id`` (the
    table's uid, e.g. ``Prime_Suspect_0``, one token to Lucene's analyzer) or ``none``."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    form: Literal["rbench", "target"] = "rbench"
    granularity: Granularity = "row"
    """What an object of a table is: a ``row``, the whole ``table``, a ``cell``, or its ``schema`` (the column
    names)."""
    chunker: ChunkerConfig = ChunkerConfig()
    """How the linked passages are split."""
    passages: bool = True
    title: Literal["page_section", "page", "section", "table_id", "none"] = "page_section"

    @model_validator(mode="after")
    def _target_form(self) -> "OttqaParams":
        if self.form == "target":
            fix_form(self, TARGET_FORM)
        return self


def passage_doc(link: str) -> str:
    """Document id of a linked passage, e.g. ``/wiki/Prime_Suspect`` -> ``Prime Suspect :: passage``."""
    return doc_id(passage_title(link), "passage")


def passage_title(link: str) -> str:
    """Page title of a ``/wiki/...`` link."""
    return unquote(link.rsplit("/wiki/", 1)[-1]).replace("_", " ")


def _load(path: Path):
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise DataError(f"{path} is not a readable OTT-QA JSON file ({e})") from None


def _table_doc(table: dict) -> str:
    return doc_id(table["title"], table["uid"])


def table_title(table: dict, choice: str) -> str:
    """The text that heads each row of ``table`` under a ``title`` choice of :class:`OttqaParams`."""
    page, section = table["title"], table.get("section_title", "") or ""
    return {"page_section": f"{page} - {section}".rstrip(" -"), "page": page, "section": section,
            "table_id": table["uid"], "none": ""}[choice]


@ADAPTERS.register
class Ottqa(Adapter):
    """OTT-QA dev: 2,214 questions over 789 tables and their linked passages."""

    name = "ottqa"
    description = "OTT-QA dev (wenhuchen/OTT-QA): 2,214 questions; 789 tables + linked passages (mixed)"
    Params = OttqaParams

    def files(self, params: OttqaParams) -> list[FileSpec]:
        return pinned_files("ottqa_dev", _url)

    def objects(self, raw: Path, params: OttqaParams) -> Iterator[CorpusObject]:
        seen_links: set[str] = set()
        for path in sorted((raw / "ottqa" / "tables").glob("*.json")):
            table = _load(path)
            missing = [k for k in ("uid", "title", "header", "data") if k not in table]
            if missing:
                raise DataError(f"{path} lacks OTT-QA table field(s) {missing}")
            header = [h[0] for h in table["header"]]
            rows = [[cell[0] for cell in row] for row in table["data"]]
            title = table_title(table, params.title)
            objects = (arm_row_objects(title, header, rows) if params.form == "target"
                       else table_objects(title, header, rows, params.granularity))
            for modality, position, text, meta in objects:
                yield CorpusObject(text=text, doc_id=_table_doc(table), page_title=table["title"],
                                   source=table["uid"], modality=modality, position=position, metadata=meta)
            if not params.passages:
                continue
            passages = _load(raw / "ottqa" / "passages" / path.name)
            for link, passage in sorted(passages.items()):
                if link in seen_links:
                    continue
                seen_links.add(link)
                title = passage_title(link)
                for position, chunk in enumerate(chunk_text(passage, params.chunker)):
                    yield CorpusObject(text=serialize_text(title, chunk), doc_id=passage_doc(link),
                                       page_title=title, source="passage", modality="text",
                                       position=position, metadata={"link": link})

    def queries(self, raw: Path, params: OttqaParams) -> Iterator[Query]:
        titles = {p.stem: _load(p)["title"] for p in (raw / "ottqa" / "tables").glob("*.json")}
        for i, q in enumerate(_load(raw / QUESTIONS)):
            missing = [k for k in ("question_id", "question", "table_id", "answer-node") if k not in q]
            if missing:
                raise DataError(f"{raw / QUESTIONS} entry {i} lacks field(s) {missing}")
            if q["table_id"] not in titles:
                raise DataError(f"question {q['question_id']} names table {q['table_id']!r}, which is not in the corpus")
            gold = [doc_id(titles[q["table_id"]], q["table_id"])]
            if params.passages:
                gold += sorted({passage_doc(n[2]) for n in q["answer-node"] if n[3] == "passage"})
            yield Query(query_id=q["question_id"], text=q["question"], gold_doc_ids=gold)
