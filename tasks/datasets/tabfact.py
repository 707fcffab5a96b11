"""TabFact (wenhuchen/Table-Fact-Checking): statements to verify against Wikipedia tables.

Each statement is a query whose gold document is its table. Tables are ``#``-separated
CSV files; titles come from ``table_to_page.json``, else the caption (empty when "none").
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Iterator, Literal

from pydantic import BaseModel, ConfigDict

from rbench.errors import DataError
from tasks.datasets.base import Adapter, CorpusObject, FileSpec, Query, doc_id, pinned_files
from tasks.datasets.serialize import Granularity, table_objects

COMMIT = "2ab782ba42b5808076ac91fec846473aa5315a79"
FOLDER = "tabfact_sample"
EXAMPLES = f"{FOLDER}/val_examples_sample.json"
PAGES = f"{FOLDER}/table_to_page_sample.json"


def _url(name: str) -> str | None:
    if name.startswith(f"{FOLDER}/all_csv/"):
        return f"https://raw.githubusercontent.com/wenhuchen/Table-Fact-Checking/{COMMIT}/data/all_csv/{Path(name).name}"
    return None


class TabfactParams(BaseModel):
    """``granularity`` for tables; ``statements``: all, or only the entailed ones (label 1)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    granularity: Granularity = "row"
    statements: Literal["all", "entailed"] = "all"


def _load_json(path: Path):
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise DataError(f"{path} is not a readable TabFact JSON file ({e})") from None


def _titles(raw: Path) -> dict[str, str]:
    examples = _load_json(raw / EXAMPLES)
    pages = _load_json(raw / PAGES)
    titles = {}
    for table_id, entry in examples.items():
        if not (isinstance(entry, list) and len(entry) == 3):
            raise DataError(f"{raw / EXAMPLES}: entry {table_id!r} must be [statements, labels, caption]")
        caption = entry[2] if str(entry[2]).strip().lower() != "none" else ""
        titles[table_id] = pages[table_id][0] if table_id in pages else caption
    return titles


class Tabfact(Adapter):
    """The 40-table TabFact validation sample shipped as development data."""

    name = "tabfact"
    description = "TabFact validation sample (wenhuchen/Table-Fact-Checking): 40 tables, their statements"
    Params = TabfactParams

    def files(self, params: TabfactParams) -> list[FileSpec]:
        return pinned_files("tabfact_sample", _url)

    def objects(self, raw: Path, params: TabfactParams) -> Iterator[CorpusObject]:
        for table_id, title in sorted(_titles(raw).items()):
            path = raw / FOLDER / "all_csv" / table_id
            try:
                with open(path, encoding="utf-8", newline="") as f:
                    header, *rows = list(csv.reader(f, delimiter="#"))
            except (OSError, ValueError) as e:
                raise DataError(f"TabFact table {table_id} cannot be read from {path} ({e})") from None
            for modality, position, text, meta in table_objects(title, header, rows, params.granularity):
                yield CorpusObject(text=text, doc_id=doc_id(title, table_id), page_title=title,
                                   source=table_id, modality=modality, position=position, metadata=meta)

    def queries(self, raw: Path, params: TabfactParams) -> Iterator[Query]:
        examples = _load_json(raw / EXAMPLES)
        for table_id, title in sorted(_titles(raw).items()):
            statements, labels, _ = examples[table_id]
            for i, (statement, label) in enumerate(zip(statements, labels)):
                if params.statements == "entailed" and label != 1:
                    continue
                yield Query(query_id=f"{table_id}#{i}", text=statement, gold_doc_ids=[doc_id(title, table_id)])
