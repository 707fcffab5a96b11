"""FeTaQA (Yale-LILY/FeTaQA): free-form questions over Wikipedia tables, one gold table each."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator, Literal

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
    manifest,
    read_jsonl,
)
from rbench.dataset_adapters.serialize import Granularity, arm_row_objects, table_objects

COMMIT = "bbc441be807212d736c8c35a18146b530dde11d0"
REQUIRED = ("feta_id", "table_page_title", "table_section_title", "table_array", "question")


def split_file(split: str) -> FileSpec:
    """The split's file, pinned by ``manifests/fetaqa.json`` (dev, test); train is not pinned
    there, so it is fetched unverified, with a warning."""
    name = f"fetaqa/fetaQA-v1_{split}.jsonl"
    return FileSpec(name=name, sha256=manifest("fetaqa").get(name),
                    url=f"https://raw.githubusercontent.com/Yale-LILY/FeTaQA/{COMMIT}/data/fetaQA-v1_{split}.jsonl")


DEV = split_file("dev")


TARGET_FORM = {"granularity": "row", "title": "page"}
"""What ``form: target`` fixes: one object per row, headed by the page title (TARGET's FeTaQA
context is ``{table_page_title, table_section_title}``, TARGET's README, "Note on corpus and
corpus_entry Formatting"; ARM's ``serialize_tables.py`` names a row by ``table_page_title``, and
by nothing where that is empty: its fallback key is ``section_title``, which this context lacks)."""


class FetaqaParams(BaseModel):
    """``split``: dev (1,001 questions, default), test (2,003) or train (7,326; unverified);
    ``form``: ``rbench`` (default: the split's tables de-duplicated by page and section) or
    ``target``, the corpus the ARM report searched: TARGET's FeTaQA, where every example is its own
    table (``table_id`` = its ``table_source_json``, so a table two questions share is two
    documents; test: 28,358 rows, the report's Table 1), rows as ARM's
    ``scripts/target/serialize_tables.py`` writes them (``page [SEP] [H] col: val , ...``); it
    fixes ``granularity`` and ``title``. ``granularity``: serialize each table per row (default),
    per cell or whole; ``title``: what heads each row: ``page_section`` ("page - section",
    default), ``page``, or ``none``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    split: Literal["dev", "test", "train"] = "dev"
    form: Literal["rbench", "target"] = "rbench"
    granularity: Granularity = "row"
    title: Literal["page_section", "page", "none"] = "page_section"

    @model_validator(mode="after")
    def _target_form(self) -> "FetaqaParams":
        if self.form == "target":
            fix_form(self, TARGET_FORM)
        return self


def _records(path: Path, form: str = "rbench") -> Iterator[dict]:
    required = REQUIRED + ("table_source_json",) if form == "target" else REQUIRED
    for line_no, record in read_jsonl(path):
        missing = [k for k in required if k not in record]
        if missing:
            raise DataError(
                f"{path}:{line_no} lacks FeTaQA field(s) {missing}; "
                f"expected {list(required)}, found {sorted(record)}"
            )
        table = record["table_array"]
        if not isinstance(table, list) or not table or not isinstance(table[0], list):
            raise DataError(f"{path}:{line_no} table_array must be a list of rows with the header first")
        yield record


def _doc(record: dict, form: str = "rbench") -> str:
    if form == "target":
        return doc_id(record["table_page_title"], record["table_source_json"])
    return doc_id(record["table_page_title"], record["table_section_title"])


def _title(page: str, section: str, choice: str) -> str:
    return {"page_section": f"{page} - {section}", "page": page, "none": ""}[choice]


@ADAPTERS.register
class Fetaqa(Adapter):
    """FeTaQA: free-form questions; the corpus is the set of the split's (de-duplicated) tables."""

    name = "fetaqa"
    description = "FeTaQA (Yale-LILY/FeTaQA): dev 1,001 questions over 992 tables, test 2,003, train 7,326"
    Params = FetaqaParams

    def files(self, params: FetaqaParams) -> list[FileSpec]:
        return [split_file(params.split)]

    def objects(self, raw: Path, params: FetaqaParams) -> Iterator[CorpusObject]:
        seen: set[str] = set()
        for record in _records(raw / split_file(params.split).name, params.form):
            doc = _doc(record, params.form)
            if doc in seen:
                continue
            seen.add(doc)
            page, section = record["table_page_title"], record["table_section_title"]
            header, *rows = record["table_array"]
            title = _title(page, section, params.title)
            objects = (arm_row_objects(page, header, rows) if params.form == "target"
                       else table_objects(title, header, rows, params.granularity))
            for modality, position, text, meta in objects:
                yield CorpusObject(
                    text=text, doc_id=doc, page_title=page, source=section,
                    modality=modality, position=position, metadata=meta,
                )

    def queries(self, raw: Path, params: FetaqaParams) -> Iterator[Query]:
        for record in _records(raw / split_file(params.split).name, params.form):
            yield Query(
                query_id=str(record["feta_id"]), text=record["question"], gold_doc_ids=[_doc(record, params.form)]
            )
