"""TARGET's Hugging Face datasets (``target-benchmark/<name>-corpus`` and ``-queries``; Spider and BIRD
as TARGET's Text2SQL datasets ``<name>-corpus-<split>`` and ``<name>-queries-<split>``).

Corpus columns ``database_id``, ``table_id``, ``table`` (rows, the header first) and
``context`` (the page and section titles, as a struct, a JSON object or text); query columns ``query_id``, ``query``, ``database_id``, ``table_id`` (one id
or a list) and ``answer``. A document is one table: ``database_id :: table_id``. A Text2SQL corpus is
one JSON file of those columns (``<name>-corpus-<split>.json``; its ``<split>_database`` folder of
SQLite files serves SQL execution and is not downloaded), read whole, as TARGET's loader reads it.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Iterator, Literal

import pyarrow.parquet as pq
from pydantic import BaseModel, ConfigDict, model_validator

from rbench.core.errors import DataError
from rbench.dataset_adapters.base import (
    ADAPTERS,
    Adapter,
    CorpusObject,
    FileSpec,
    Query,
    doc_id,
    read_jsonl,
)
from rbench.dataset_adapters.serialize import Granularity, arm_row_objects, serialize_schema_arm, table_objects

log = logging.getLogger("rbench")
ORG = "target-benchmark"
CORPUS_COLUMNS = ("database_id", "table_id", "table")
QUERY_COLUMNS = ("query_id", "query", "database_id", "table_id")


TEXT_TO_SQL = ("spider", "bird")
TEXT_TO_SQL_SPLITS = {"spider": "test", "bird": "validation"}
HUB_METADATA = {"dataset_infos.json", "dataset_info.json", "dataset_dict.json", "state.json"}
QUERY_PATTERNS = ["*.parquet", "**/*.parquet", "*.json", "**/*.json", "*.jsonl", "**/*.jsonl"]

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
    layout: Literal["text2sql", "parquet"] | None = None
    """Spider and BIRD: ``text2sql`` (their default), the Text2SQL datasets TARGET's loader reads
    and the ARM report read (``TargetDatasetConfig.py`` at target-benchmark/target f916169, lines
    35-65; ``Text2SQLDatasetLoader.py`` lines 48-51, 69-79: the JSON file of the corpus), or
    ``parquet``, ``<name>-corpus`` and ``-queries`` as for the other three."""
    split: Literal["test", "validation", "train"] | None = None
    """The Text2SQL split: Spider ``test`` and BIRD ``validation`` by default, the ones TARGET's
    ``TEXT_2_SQL_DATASETS`` name and ARM's scripts ran."""

    @model_validator(mode="after")
    def _text2sql(self) -> "TargetParams":
        if self.benchmark not in TEXT_TO_SQL and (self.layout == "text2sql" or self.split is not None):
            raise ValueError(f"layout text2sql and split are for spider and bird; TARGET's {self.benchmark} is one "
                             "Parquet dataset: leave them out")
        if self.layout == "parquet" and self.split is not None:
            raise ValueError("split names a Text2SQL dataset (layout text2sql); the Parquet datasets have none")
        return self

    @property
    def text2sql(self) -> bool:
        """Whether the data are TARGET's Text2SQL datasets."""
        return self.benchmark in TEXT_TO_SQL and self.layout != "parquet"

    def repo(self, part: str) -> str:
        """The name of the corpus or queries dataset (``part``) under ``target-benchmark``."""
        if not self.text2sql:
            return f"{self.benchmark}-{part}"
        return f"{self.benchmark}-{part}-{self.split or TEXT_TO_SQL_SPLITS[self.benchmark]}"


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
    if first is not None:  # scripts/run_extract_schemas.py line 17 names the table by its source less every "table_"
        name = table_id.replace("table_", "")
        yield "schema", 0, serialize_schema_arm(database, name, first[2]), {"columns": len(header)}


def _rows(folder: Path, columns: tuple[str, ...]) -> Iterator[dict]:
    """The records of a TARGET dataset's files: Parquet, or (a Text2SQL queries dataset) JSON lines or JSON."""
    files = sorted(p for p in folder.rglob("*")
                   if p.suffix in (".parquet", ".jsonl", ".json") and p.name not in HUB_METADATA)
    if not files:
        raise DataError(f"no Parquet or JSON files under {folder}; expected the TARGET dataset's data files")
    for path in files:
        if path.suffix != ".parquet":
            yield from _checked(_json_records(path), columns, path)
            continue
        parquet = pq.ParquetFile(path)
        missing = [c for c in columns if c not in parquet.schema_arrow.names]
        if missing:
            raise DataError(f"{path} lacks TARGET column(s) {missing}; has {parquet.schema_arrow.names}")
        for batch in parquet.iter_batches(batch_size=1000):
            yield from batch.to_pylist()


def _json_records(path: Path) -> Iterator[dict]:
    """Records of a JSON-lines file, or of a JSON file holding a list of records or an object of columns."""
    if path.suffix == ".jsonl":
        yield from (record for _, record in read_jsonl(path))
        return
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise DataError(f"{path} is not readable JSON ({e})") from None
    if isinstance(data, dict) and all(isinstance(v, list) for v in data.values()):
        lengths = {len(v) for v in data.values()}
        if len(lengths) > 1:
            raise DataError(f"{path}: its columns differ in length ({sorted(lengths)}): is the file cut short?")
        yield from (dict(zip(data, values)) for values in zip(*data.values()))
    elif isinstance(data, list) and all(isinstance(r, dict) for r in data):
        yield from data
    else:
        raise DataError(f"{path} holds neither a list of records nor an object of columns")


def _checked(records: Iterator[dict], columns: tuple[str, ...], path: Path) -> Iterator[dict]:
    for record in records:
        missing = [c for c in columns if c not in record]
        if missing:
            raise DataError(f"{path} lacks TARGET column(s) {missing}; has {sorted(record)}")
        yield record


@ADAPTERS.register
class Target(Adapter):
    """TARGET corpora and queries for OTT-QA, FeTaQA, TabFact, Spider and BIRD."""

    name = "target"
    description = f"TARGET ({ORG}/<name>-corpus, -queries): ottqa, fetaqa, tabfact, spider, bird"
    Params = TargetParams
    version = 2

    def files(self, params: TargetParams) -> list[FileSpec]:
        corpus, queries = params.repo("corpus"), params.repo("queries")
        if params.text2sql:
            return [FileSpec(name=f"target/{corpus}/{corpus}.json", hf_repo=f"{ORG}/{corpus}", hf_path=f"{corpus}.json",
                             revision=params.revision),
                    FileSpec(name=f"target/{queries}", hf_repo=f"{ORG}/{queries}", revision=params.revision,
                             patterns=QUERY_PATTERNS)]
        return [FileSpec(name=f"target/{name}", hf_repo=f"{ORG}/{name}", revision=params.revision,
                         patterns=["*.parquet", "**/*.parquet"]) for name in (corpus, queries)]

    def objects(self, raw: Path, params: TargetParams) -> Iterator[CorpusObject]:
        untitled = skipped = repeated = 0
        seen: set[tuple[str, str]] = set()
        for row in _rows(raw / "target" / params.repo("corpus"), CORPUS_COLUMNS):
            table = row["table"]
            if params.form == "target" and not (table and isinstance(table, list) and table[0]):
                skipped += 1  # ARM's scripts/target/serialize_tables.py lines 91-93 skip it
                continue
            if not table or not isinstance(table, list):
                raise DataError(f"TARGET table {row['table_id']!r} has no rows")
            header, *rows = [[str(c) for c in r] for r in table]
            database, table_id = str(row["database_id"]), str(row["table_id"])
            if params.form == "target" and params.granularity == "schema":
                if (database, table_id) in seen:  # scripts/run_extract_schemas.py lines 14-16, 34: the first kept
                    repeated += 1
                    continue
                seen.add((database, table_id))
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
        if skipped:
            log.warning("TARGET %s: %d table(s) are empty or have no header and are skipped, as ARM's "
                        "serialize_tables.py skips them", params.benchmark, skipped)
        if repeated:
            log.warning("TARGET %s: %d repeated database/table pair(s) left out of the schema objects (the first "
                        "kept), as ARM's run_extract_schemas.py keeps one per table", params.benchmark, repeated)

    def queries(self, raw: Path, params: TargetParams) -> Iterator[Query]:
        ungrounded = 0
        for row in _rows(raw / "target" / params.repo("queries"), QUERY_COLUMNS):
            tables = row["table_id"] if isinstance(row["table_id"], list) else [row["table_id"]]
            database = row["database_id"]
            gold = [doc_id(str(database), str(t)) for t in tables if database not in (None, "") and t not in (None, "")]
            ungrounded += not gold
            yield Query(query_id=str(row["query_id"]), text=str(row["query"]), gold_doc_ids=gold)
        if ungrounded:  # no judgement: left out of the sample and the scores, as ARM leaves them out before sampling
            log.warning("TARGET %s: %d quer(ies) name no table (table_id or database_id missing or empty) and have "
                        "no gold document; they are not scored (ARM: create_benchmarks.py lines 84-86, "
                        "create_target_bench_all.py line 36, sample_queries.py lines 20-27)",
                        params.benchmark, ungrounded)
