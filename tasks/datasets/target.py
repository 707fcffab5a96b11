"""TARGET's Hugging Face datasets (``target-benchmark/<name>-corpus`` and ``-queries``).

Corpus columns ``database_id``, ``table_id``, ``table`` (rows, the header first) and
``context`` (the page and section titles, as a struct, a JSON object or text); query columns ``query_id``, ``query``, ``database_id``, ``table_id`` (one id
or a list) and ``answer``. A document is one table: ``database_id :: table_id``.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Iterator, Literal

import pyarrow.parquet as pq
from pydantic import BaseModel, ConfigDict

from rbench.core.errors import DataError
from rbench.tasks.datasets.base import (
    ADAPTERS,
    Adapter,
    CorpusObject,
    FileSpec,
    Query,
    doc_id,
)
from rbench.tasks.datasets.serialize import Granularity, table_objects

log = logging.getLogger("rbench")
ORG = "target-benchmark"
CORPUS_COLUMNS = ("database_id", "table_id", "table")
QUERY_COLUMNS = ("query_id", "query", "database_id", "table_id")


PAGE_KEYS = ("table_page_title", "page_title", "title", "table_title", "caption", "table_caption")
SECTION_KEYS = ("table_section_title", "section_title", "section")


class TargetParams(BaseModel):
    """``benchmark``: which TARGET dataset; ``granularity``: per row (default) or per schema
    (one object listing a table's columns, as BIRD needs); ``title``: what heads each row:
    ``context`` (the page and section titles from the ``context`` column, default; a table
    without them falls back to its id, counted in a warning), ``table_id``, or ``none``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    benchmark: Literal["ottqa", "fetaqa", "tabfact", "spider", "bird"]
    granularity: Granularity = "row"
    title: Literal["context", "table_id", "none"] = "context"
    revision: str = "main"


def context_title(context) -> str:
    """"page - section" from a TARGET ``context`` value (a dict, a JSON object text, or plain
    text); "" when it names neither. Unknown keys with text values are joined in order."""
    if isinstance(context, str):
        text = context.strip()
        try:
            context = json.loads(text) if text.startswith("{") else text
        except ValueError:
            context = text
    if isinstance(context, str):
        return context
    if not isinstance(context, dict):
        return ""
    values = {k: str(v).strip() for k, v in context.items() if isinstance(v, (str, int, float)) and str(v).strip()}
    page = next((values[k] for k in PAGE_KEYS if k in values), "")
    section = next((values[k] for k in SECTION_KEYS if k in values), "")
    if page or section:
        return " - ".join(p for p in (page, section) if p)
    return " - ".join(values.values())


def _rows(folder: Path, columns: tuple[str, ...]) -> Iterator[dict]:
    files = sorted(folder.rglob("*.parquet"))
    if not files:
        raise DataError(f"no Parquet files under {folder}; expected the TARGET dataset's data/*.parquet")
    for path in files:
        parquet = pq.ParquetFile(path)
        missing = [c for c in columns if c not in parquet.schema_arrow.names]
        if missing:
            raise DataError(f"{path} lacks TARGET column(s) {missing}; has {parquet.schema_arrow.names}")
        for batch in parquet.iter_batches(batch_size=1000):
            yield from batch.to_pylist()


@ADAPTERS.register
class Target(Adapter):
    """TARGET corpora and queries for OTT-QA, FeTaQA, TabFact, Spider and BIRD."""

    name = "target"
    description = f"TARGET ({ORG}/<name>-corpus, -queries): ottqa, fetaqa, tabfact, spider, bird"
    Params = TargetParams
    version = 2

    def files(self, params: TargetParams) -> list[FileSpec]:
        return [
            FileSpec(name=f"target/{params.benchmark}-{part}", hf_repo=f"{ORG}/{params.benchmark}-{part}",
                     revision=params.revision, patterns=["*.parquet", "**/*.parquet"])
            for part in ("corpus", "queries")
        ]

    def objects(self, raw: Path, params: TargetParams) -> Iterator[CorpusObject]:
        untitled = 0
        for row in _rows(raw / "target" / f"{params.benchmark}-corpus", CORPUS_COLUMNS):
            table = row["table"]
            if not table or not isinstance(table, list):
                raise DataError(f"TARGET table {row['table_id']!r} has no rows")
            header, *rows = [[str(c) for c in r] for r in table]
            database, table_id = str(row["database_id"]), str(row["table_id"])
            context = context_title(row.get("context"))
            untitled += not context
            title = {"table_id": table_id, "none": "", "context": context or table_id}[params.title]
            for modality, position, text, meta in table_objects(title, header, rows, params.granularity):
                yield CorpusObject(text=text, doc_id=doc_id(database, table_id), page_title=context or database,
                                   source=table_id, modality=modality, position=position, metadata=meta)
        if untitled and params.title == "context":
            log.warning("TARGET %s: %d table(s) have no page or section title in their context column; "
                        "their rows are titled by table id", params.benchmark, untitled)

    def queries(self, raw: Path, params: TargetParams) -> Iterator[Query]:
        for row in _rows(raw / "target" / f"{params.benchmark}-queries", QUERY_COLUMNS):
            tables = row["table_id"] if isinstance(row["table_id"], list) else [row["table_id"]]
            database = str(row["database_id"])
            yield Query(query_id=str(row["query_id"]), text=str(row["query"]),
                        gold_doc_ids=[doc_id(database, str(t)) for t in tables])
