"""TabFact (wenhuchen/Table-Fact-Checking): statements to verify against Wikipedia tables.

Each statement is a query whose gold document is its table. Tables are ``#``-separated
CSV files; titles come from ``table_to_page.json``, else the caption (empty when "none").
``split: sample`` (default) is the 40-table validation sample of the development mirror;
``test``, ``val`` and ``train`` read the full release at the pinned commit: every table
and examples file is verified against ``manifests/tabfact.json``, except the train
examples file, which the manifest does not cover and which is fetched unverified.
Statements, and a split's own tables, keep the examples file's order (tables as listed,
statements as listed): the order a query sampler such as ARM's TF-IDF k-means depends on
reads them in, and a Lucene index built under ``doc_<n>`` ids is numbered in.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Iterator, Literal

from pydantic import BaseModel, ConfigDict, model_validator

from rbench.core.errors import DataError
from rbench.dataset_adapters.base import (
    ADAPTERS,
    Adapter,
    CorpusObject,
    FileSpec,
    ManifestFiles,
    Query,
    doc_id,
    fix_form,
    manifest,
    pinned_files,
)
from rbench.dataset_adapters.serialize import Granularity, arm_row_objects, table_objects

COMMIT = "2ab782ba42b5808076ac91fec846473aa5315a79"
RAW = f"https://raw.githubusercontent.com/wenhuchen/Table-Fact-Checking/{COMMIT}"


TARGET_TITLE = "none"
"""The row name ``form: target`` takes unless ``title`` is given: the measured candidate that the
ARM report's printed cells support (see :class:`TabfactParams`)."""


class TabfactParams(BaseModel):
    """``split``: sample (40 validation tables, default), test, val or train (the full release);
    ``tables``: the corpus of a full split: ``all`` 16,573 tables (default) or only the split's;
    ``granularity`` for tables; ``statements``: all, or only the entailed ones (label 1);
    ``title``: what heads each row: ``page`` (the Wikipedia page title, else the caption;
    default), ``caption``, or ``none``. ``form``: ``rbench`` (default) or ``target``, the corpus
    the ARM report searched: the split's tables alone (test: 1,695 tables, 22,768 rows, the
    report's Table 1), one object per row as ARM's ``scripts/target/serialize_tables.py`` writes it
    (``name [SEP] [H] col: val , ...``); it fixes ``tables`` and ``granularity``. TARGET's code does
    not show what TabFact's ``context`` holds, so the row's name is the ``title`` setting, which
    ``form: target`` defaults to ``none`` (``[H] col: val , ...``, no name and no ``[SEP]``): of
    the three candidates, the one the ARM report's printed BM25 cells support (TabFact test,
    ``protocol: arm``: ``none`` 4 of 12 cells equal and 8 one query off; ``page`` and ``caption``
    all 12 far above; ``evaluation/published/notes/arm-report-table6.yaml``). The statements are
    the ``statements`` setting."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    split: Literal["sample", "test", "val", "train"] = "sample"
    form: Literal["rbench", "target"] = "rbench"
    tables: Literal["all", "split"] = "all"
    granularity: Granularity = "row"
    """What an object of a table is: a ``row``, the whole ``table``, a ``cell``, or its ``schema``."""
    statements: Literal["all", "entailed"] = "all"
    title: Literal["page", "caption", "none"] = "page"

    @model_validator(mode="after")
    def _target_form(self) -> "TabfactParams":
        if self.form == "target":
            fix_form(self, {"tables": "split", "granularity": "row"})
            if "title" not in self.model_fields_set:
                object.__setattr__(self, "title", TARGET_TITLE)
        return self


class _Layout:
    """Where a split's files lie in the download folder and the mirror."""

    def __init__(self, split: str):
        if split == "sample":
            self.folder, self.examples, self.pages = "tabfact_sample", "val_examples_sample.json", "table_to_page_sample.json"
        else:
            self.folder, self.examples, self.pages = "tabfact", f"{split}_examples.json", "table_to_page.json"
        self.split = split

    def table(self, table_id: str) -> str:
        return f"{self.folder}/all_csv/{table_id}"

    def files(self, tables: str = "all") -> list[FileSpec | ManifestFiles]:
        """The split's files; with ``tables: split`` only the tables its examples file names
        (the download reads that file first), not the other splits' thousands."""
        if self.split == "sample":
            return pinned_files("tabfact_sample", _url)
        examples = f"{self.folder}/{self.examples}"
        listed = {"listed_in": examples, "listed_under": f"{self.folder}/all_csv/"} if tables == "split" else {}
        return [ManifestFiles.of("tabfact", url=f"{RAW}/data/{{path}}", exclude="_examples.json", **listed),
                FileSpec(name=examples, sha256=manifest("tabfact").get(examples), url=_url(examples))]


def _url(name: str) -> str | None:
    folder, _, rest = name.partition("/")
    if rest.startswith("all_csv/"):
        return f"{RAW}/data/{rest}"
    if folder == "tabfact" and rest == "table_to_page.json":
        return f"{RAW}/data/{rest}"
    if folder == "tabfact" and rest.endswith("_examples.json"):
        return f"{RAW}/tokenized_data/{rest}"
    return None


def _load_json(path: Path):
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise DataError(f"{path} is not a readable TabFact JSON file ({e})") from None


def _examples(raw: Path, layout: _Layout) -> dict[str, list]:
    path = raw / layout.folder / layout.examples
    examples = _load_json(path)
    if not isinstance(examples, dict):
        raise DataError(f"{path} must map table ids to [statements, labels, caption]")
    for table_id, entry in examples.items():
        if not (isinstance(entry, list) and len(entry) == 3):
            raise DataError(f"{path}: entry {table_id!r} must be [statements, labels, caption]")
    return examples


def _caption(entry: list) -> str:
    return entry[2] if str(entry[2]).strip().lower() != "none" else ""


@ADAPTERS.register
class Tabfact(Adapter):
    """TabFact: the 40-table validation sample, or a full split over the full table set."""

    name = "tabfact"
    description = ("TabFact (wenhuchen/Table-Fact-Checking): 40-table validation sample (default), "
                   "or test/val/train over all 16,573 tables")
    Params = TabfactParams
    version = 2

    def files(self, params: TabfactParams) -> list[FileSpec | ManifestFiles]:
        return _Layout(params.split).files(params.tables)

    def _tables(self, raw: Path, params: TabfactParams, examples: dict[str, list]) -> list[tuple[str, str, str]]:
        """``(table_id, page title or caption, caption)`` of each corpus table."""
        layout = _Layout(params.split)
        pages = _load_json(raw / layout.folder / layout.pages)
        if params.split == "sample" or params.tables == "split":
            ids = list(examples)
        else:
            ids = sorted(Path(n).name for n in manifest("tabfact") if "/all_csv/" in n)
        tables = []
        for table_id in ids:
            caption = _caption(examples[table_id]) if table_id in examples else ""
            page = pages[table_id][0] if table_id in pages else caption
            tables.append((table_id, page, caption))
        return tables

    def objects(self, raw: Path, params: TabfactParams) -> Iterator[CorpusObject]:
        layout = _Layout(params.split)
        for table_id, page, caption in self._tables(raw, params, _examples(raw, layout)):
            path = raw / layout.table(table_id)
            try:
                with open(path, encoding="utf-8", newline="") as f:
                    header, *rows = list(csv.reader(f, delimiter="#"))
            except (OSError, ValueError) as e:
                raise DataError(f"TabFact table {table_id} cannot be read from {path} ({e})") from None
            title = {"page": page, "caption": caption, "none": ""}[params.title]
            objects = (arm_row_objects(title, header, rows) if params.form == "target"
                       else table_objects(title, header, rows, params.granularity))
            for modality, position, text, meta in objects:
                yield CorpusObject(text=text, doc_id=doc_id(page, table_id), page_title=page,
                                   source=table_id, modality=modality, position=position, metadata=meta)

    def queries(self, raw: Path, params: TabfactParams) -> Iterator[Query]:
        examples = _examples(raw, _Layout(params.split))
        pages = {table_id: page for table_id, page, _ in self._tables(raw, params, examples)}
        for table_id in examples:  # the examples file's order, statements as listed: what a sampler reads
            if table_id not in pages:
                raise DataError(f"TabFact statement table {table_id!r} is not in the table set; "
                                "the examples file and the tables are from different releases")
            statements, labels, _ = examples[table_id]
            for i, (statement, label) in enumerate(zip(statements, labels)):
                if params.statements == "entailed" and label != 1:
                    continue
                yield Query(query_id=f"{table_id}#{i}", text=statement,
                            gold_doc_ids=[doc_id(pages[table_id], table_id)])
