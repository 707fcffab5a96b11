"""FeTaQA (Yale-LILY/FeTaQA): free-form questions over Wikipedia tables, one gold table each."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator, Literal

from pydantic import BaseModel, ConfigDict

from rbench.core.errors import DataError
from rbench.tasks.datasets.base import (
    ADAPTERS,
    Adapter,
    CorpusObject,
    FileSpec,
    Query,
    doc_id,
    manifest,
    read_jsonl,
)
from rbench.tasks.datasets.serialize import Granularity, table_objects

COMMIT = "bbc441be807212d736c8c35a18146b530dde11d0"
REQUIRED = ("feta_id", "table_page_title", "table_section_title", "table_array", "question")


def split_file(split: str) -> FileSpec:
    """The split's file, pinned by ``manifests/fetaqa.json`` (dev, test); train is not pinned
    there, so it is fetched unverified, with a warning."""
    name = f"fetaqa/fetaQA-v1_{split}.jsonl"
    return FileSpec(name=name, sha256=manifest("fetaqa").get(name),
                    url=f"https://raw.githubusercontent.com/Yale-LILY/FeTaQA/{COMMIT}/data/fetaQA-v1_{split}.jsonl")


DEV = split_file("dev")


class FetaqaParams(BaseModel):
    """``split``: dev (1,001 questions, default), test (2,003) or train (7,326; unverified);
    ``granularity``: serialize each table per row (default), per cell or whole;
    ``title``: what heads each row: ``page_section`` ("page - section", default), ``page``, or ``none``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    split: Literal["dev", "test", "train"] = "dev"
    granularity: Granularity = "row"
    title: Literal["page_section", "page", "none"] = "page_section"


def _records(path: Path) -> Iterator[dict]:
    for line_no, record in read_jsonl(path):
        missing = [k for k in REQUIRED if k not in record]
        if missing:
            raise DataError(
                f"{path}:{line_no} lacks FeTaQA field(s) {missing}; "
                f"expected {list(REQUIRED)}, found {sorted(record)}"
            )
        table = record["table_array"]
        if not isinstance(table, list) or not table or not isinstance(table[0], list):
            raise DataError(f"{path}:{line_no} table_array must be a list of rows with the header first")
        yield record


def _doc(record: dict) -> str:
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
        for record in _records(raw / split_file(params.split).name):
            doc = _doc(record)
            if doc in seen:
                continue
            seen.add(doc)
            page, section = record["table_page_title"], record["table_section_title"]
            header, *rows = record["table_array"]
            title = _title(page, section, params.title)
            for modality, position, text, meta in table_objects(title, header, rows, params.granularity):
                yield CorpusObject(
                    text=text, doc_id=doc, page_title=page, source=section,
                    modality=modality, position=position, metadata=meta,
                )

    def queries(self, raw: Path, params: FetaqaParams) -> Iterator[Query]:
        for record in _records(raw / split_file(params.split).name):
            yield Query(
                query_id=str(record["feta_id"]), text=record["question"], gold_doc_ids=[_doc(record)]
            )
