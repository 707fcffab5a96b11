"""FeTaQA (Yale-LILY/FeTaQA): free-form questions over Wikipedia tables, one gold table each."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

from pydantic import BaseModel, ConfigDict

from rbench.errors import DataError
from tasks.datasets.base import Adapter, CorpusObject, FileSpec, Query, doc_id, read_jsonl
from tasks.datasets.serialize import Granularity, table_objects

COMMIT = "bbc441be807212d736c8c35a18146b530dde11d0"
DEV = FileSpec(
    name="fetaqa/fetaQA-v1_dev.jsonl",
    sha256="94ec2dcc2eaec580f4127958cb8847022c6db68ed58cf2c7c16222416d2f117e",
    url=f"https://raw.githubusercontent.com/Yale-LILY/FeTaQA/{COMMIT}/data/fetaQA-v1_dev.jsonl",
)
REQUIRED = ("feta_id", "table_page_title", "table_section_title", "table_array", "question")


class FetaqaParams(BaseModel):
    """``granularity``: serialize each table per row (default), per cell or whole."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    granularity: Granularity = "row"


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


class Fetaqa(Adapter):
    """FeTaQA dev: 1,001 questions; the corpus is the set of their (de-duplicated) tables."""

    name = "fetaqa"
    description = "FeTaQA dev (Yale-LILY/FeTaQA): 1,001 questions over 992 Wikipedia tables"
    Params = FetaqaParams

    def files(self, params: FetaqaParams) -> list[FileSpec]:
        return [DEV]

    def objects(self, raw: Path, params: FetaqaParams) -> Iterator[CorpusObject]:
        seen: set[str] = set()
        for record in _records(raw / DEV.name):
            doc = _doc(record)
            if doc in seen:
                continue
            seen.add(doc)
            page, section = record["table_page_title"], record["table_section_title"]
            header, *rows = record["table_array"]
            title = f"{page} - {section}"
            for modality, position, text, meta in table_objects(title, header, rows, params.granularity):
                yield CorpusObject(
                    text=text, doc_id=doc, page_title=page, source=section,
                    modality=modality, position=position, metadata=meta,
                )

    def queries(self, raw: Path, params: FetaqaParams) -> Iterator[Query]:
        for record in _records(raw / DEV.name):
            yield Query(
                query_id=str(record["feta_id"]), text=record["question"], gold_doc_ids=[_doc(record)]
            )
