"""BRIGHT (xlangai/BRIGHT): reasoning-intensive retrieval, 12 tasks, in its published layout.

The dataset's Parquet files: ``documents/<task>-00000-of-00001.parquet`` and
``long_documents/...`` (columns ``id``, ``content``), and ``examples/...`` (``id``, ``query``,
``gold_ids``, ``gold_ids_long``, ``excluded_ids``). Each query's ``excluded_ids`` (``N/A`` is
no id) are removed from its ranking before scoring, as BRIGHT's own evaluation does; BRIGHT
reports nDCG@10.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator, Literal

import pyarrow.parquet as pq
from pydantic import BaseModel, ConfigDict

from rbench.core.configfile import ConfigPath
from rbench.core.errors import DataError
from rbench.tasks.datasets.base import ADAPTERS, Adapter, CorpusObject, FileSpec, Query, local_file, text_value
from rbench.tasks.datasets.chunking import ChunkerConfig, chunk_text

REPO = "xlangai/BRIGHT"
Task = Literal["biology", "earth_science", "economics", "psychology", "robotics", "stackoverflow",
               "sustainable_living", "leetcode", "pony", "aops", "theoremqa_theorems", "theoremqa_questions"]
NO_ID = "N/A"
BATCH = 4096


class BrightParams(BaseModel):
    """``task``: one of BRIGHT's 12 tasks; ``long_documents``: whole web pages and their gold
    (``gold_ids_long``) instead of passages (StackExchange tasks and pony only); ``path``: a
    local copy of the dataset folder in the published layout (else the mirror's ``bright/``,
    else the Hugging Face hub); ``chunker``: how documents are split (default: kept whole, as
    BRIGHT scores them)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    task: Task
    long_documents: bool = False
    path: ConfigPath | None = None
    chunker: ChunkerConfig = ChunkerConfig(kind="none")

    def part(self, kind: str) -> str:
        """The file of this task in folder ``kind`` (documents, long_documents, examples)."""
        return f"{kind}/{self.task}-00000-of-00001.parquet"

    def corpus_part(self) -> str:
        """The file of this task's documents (or long documents)."""
        return self.part("long_documents" if self.long_documents else "documents")


def _columns(path: Path, shown: str, needed: tuple[str, ...]) -> pq.ParquetFile:
    try:
        table = pq.ParquetFile(path)
    except Exception as e:
        raise DataError(f"{shown} is not a readable Parquet file ({e}); fetch it again") from None
    missing = [c for c in needed if c not in table.schema_arrow.names]
    if missing:
        raise DataError(f"{shown} lacks BRIGHT column(s) {missing}; has {table.schema_arrow.names}: is it a file of "
                        f"{REPO} (documents/, long_documents/ or examples/)?")
    return table


def _rows(path: Path, shown: str, needed: tuple[str, ...]) -> Iterator[tuple[str, dict]]:
    """``(where, row)`` for each row of a Parquet file, read in batches of its ``needed`` columns."""
    row_no = 0
    for batch in _columns(path, shown, needed).iter_batches(batch_size=BATCH, columns=list(needed)):
        for row in batch.to_pylist():
            row_no += 1
            yield f"{shown} row {row_no}", row


def _ids(value, where: str, field: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise DataError(f"{where} field {field!r} must be a list of document ids, got {value!r}")
    return [v for v in value if v != NO_ID]


@ADAPTERS.register
class Bright(Adapter):
    """BRIGHT's documents (or long documents) and examples; excluded ids leave each ranking."""

    name = "bright"
    description = "BRIGHT (xlangai/BRIGHT): 12 reasoning-intensive tasks; excluded ids dropped; nDCG@10"
    Params = BrightParams
    excludes = True

    def files(self, params: BrightParams) -> list[FileSpec]:
        specs = []
        for part in (params.corpus_part(), params.part("examples")):
            if params.path is None:
                specs.append(FileSpec(name=f"bright/{part}", hf_repo=REPO, hf_path=part))
                continue
            local = params.path / part
            if not local.is_file():
                raise DataError(f"BRIGHT folder {params.path} has no {part}: give the folder that holds documents/, "
                                "long_documents/ and examples/ as published (huggingface.co/datasets/xlangai/BRIGHT)")
            specs.append(local_file(f"bright/{part}", local))
        return specs

    def _shown(self, raw: Path, params: BrightParams, part: str) -> tuple[Path, str]:
        return raw / "bright" / part, str(params.path / part if params.path else f"bright/{part}")

    def objects(self, raw: Path, params: BrightParams) -> Iterator[CorpusObject]:
        path, shown = self._shown(raw, params, params.corpus_part())
        for where, row in _rows(path, shown, ("id", "content")):
            doc = text_value(row["id"], where, "id")
            text = text_value(row["content"], where, "content")
            for position, chunk in enumerate(chunk_text(text, params.chunker)):
                yield CorpusObject(text=chunk, doc_id=doc, page_title="", source=params.task, modality="text",
                                   position=position, origin=where)

    def queries(self, raw: Path, params: BrightParams) -> Iterator[Query]:
        gold_field = "gold_ids_long" if params.long_documents else "gold_ids"
        path, shown = self._shown(raw, params, params.part("examples"))
        for where, row in _rows(path, shown, ("id", "query", gold_field, "excluded_ids")):
            gold = _ids(row[gold_field], where, gold_field)
            excluded = _ids(row["excluded_ids"], where, "excluded_ids")
            both = sorted(set(gold) & set(excluded))
            if both:
                raise DataError(f"{where}: {both} are both gold ({gold_field}) and excluded (excluded_ids); "
                                "an id can only be one of them")
            yield Query(query_id=text_value(row["id"], where, "id"), text=text_value(row["query"], where, "query"),
                        gold_doc_ids=list(dict.fromkeys(gold)), excluded_doc_ids=sorted(set(excluded)),
                        origin=where)
