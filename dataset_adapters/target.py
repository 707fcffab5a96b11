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
from rbench.dataset_adapters.base import (
    ADAPTERS,
    Adapter,
    CorpusObject,
    FileSpec,
    Query,
    doc_id,
)
from rbench.dataset_adapters.serialize import Granularity, arm_row_objects, serialize_schema_arm, table_objects

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
    without them falls back to its id, counted in a warning), ``table_id``, or ``none``.
    ``form``: ``rbench`` (default) or ``target``, the objects the ARM report searched: rows as
    ARM's ``scripts/target/serialize_tables.py`` writes them (``name [SEP] [H] col: val , ...``,
    the name the context's ``table_page_title``, else ``section_title``, else ``title``, else for
    Spider and BIRD the table id; no name, no ``[SEP]``), and with ``granularity: schema`` the
    metadata objects of ``scripts/run_extract_schemas.py`` (``database [SEP] table [SEP] [H] col
    [H] col``); it ignores ``title``."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    benchmark: Literal["ottqa", "fetaqa", "tabfact", "spider", "bird"]
    form: Literal["rbench", "target"] = "rbench"
    granularity: Granularity = "row"
    title: Literal["context", "table_id", "none"] = "context"
    revision: str = "main"
    """The Hugging Face dataset revision to download (a commit, branch or tag)."""


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


TEXT_TO_SQL = ("spider", "bird")


def arm_name(context, table_id: str, benchmark: str) -> str:
    """The name ARM's ``scripts/target/serialize_tables.py`` heads a TARGET table's rows with (lines
    98-105): the context's ``table_page_title``, else ``section_title``, else ``title``, else
    (text-to-SQL only) the table id."""
    if isinstance(context, str) and context.strip().startswith("{"):
        try:
            context = json.loads(context)
        except ValueError:
            context = None
    name = None
    if isinstance(context, dict):
        name = context.get("table_page_title") or context.get("section_title") or context.get("title")
    if not name and benchmark in TEXT_TO_SQL:
        name = str(table_id)
    return str(name) if name else ""


def _arm_objects(database: str, table_id: str, name: str, header: list[str], rows: list[list[str]],
                 granularity: str) -> Iterator[tuple[str, int, str, dict]]:
    """ARM's objects of one TARGET table: its rows, or its one metadata object (from its first kept row)."""
    if granularity not in ("row", "schema"):
        raise DataError(f"form: target has rows and schema objects only, not granularity {granularity!r}")
    objects = arm_row_objects(name, header, rows)
    if granularity == "row":
        yield from objects
        return
    first = next(objects, None)
    if first is not None:
        yield "schema", 0, serialize_schema_arm(database, table_id, first[2]), {"columns": len(header)}


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
            objects = (_arm_objects(database, table_id, arm_name(row.get("context"), table_id, params.benchmark),
                                    header, rows, params.granularity) if params.form == "target"
                       else table_objects(title, header, rows, params.granularity))
            for modality, position, text, meta in objects:
                yield CorpusObject(text=text, doc_id=doc_id(database, table_id), page_title=context or database,
                                   source=table_id, modality=modality, position=position, metadata=meta)
        if untitled and params.title == "context" and params.form == "rbench":
            log.warning("TARGET %s: %d table(s) have no page or section title in their context column; "
                        "their rows are titled by table id", params.benchmark, untitled)

    def queries(self, raw: Path, params: TargetParams) -> Iterator[Query]:
        for row in _rows(raw / "target" / f"{params.benchmark}-queries", QUERY_COLUMNS):
            tables = row["table_id"] if isinstance(row["table_id"], list) else [row["table_id"]]
            database = str(row["database_id"])
            yield Query(query_id=str(row["query_id"]), text=str(row["query"]),
                        gold_doc_ids=[doc_id(database, str(t)) for t in tables])
