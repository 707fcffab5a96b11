"""Any dataset in the BEIR layout: corpus.jsonl, queries.jsonl and qrels/<split>.tsv."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Iterator

from pydantic import BaseModel, ConfigDict, field_validator

from rbench.errors import DataError
from tasks.cache import file_digest
from tasks.datasets.base import Adapter, CorpusObject, FileSpec, Query, read_jsonl
from tasks.datasets.chunking import ChunkerConfig, chunk_text
from tasks.datasets.serialize import serialize_text


class BeirParams(BaseModel):
    """``path``: the dataset folder; ``split``: which qrels file; ``chunker`` for long passages."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    path: Path
    split: str = "test"
    chunker: ChunkerConfig = ChunkerConfig()

    @field_validator("path")
    @classmethod
    def _layout(cls, path: Path) -> Path:
        missing = [n for n in ("corpus.jsonl", "queries.jsonl") if not (path / n).is_file()]
        if missing:
            raise ValueError(f"BEIR folder {path} lacks {missing}; expected corpus.jsonl, queries.jsonl, qrels/")
        return path


def _qrels(path: Path) -> dict[str, list[str]]:
    gold: dict[str, list[str]] = {}
    with open(path, encoding="utf-8", newline="") as f:
        rows = csv.reader(f, delimiter="\t")
        for line_no, row in enumerate(rows, 1):
            if line_no == 1 and row[:2] == ["query-id", "corpus-id"]:
                continue
            if len(row) != 3 or not row[2].lstrip("-").isdigit():
                raise DataError(f"{path}:{line_no} must be 'query-id<TAB>corpus-id<TAB>score', got {row}")
            if int(row[2]) > 0:
                gold.setdefault(row[0], []).append(row[1])
    return gold


class Beir(Adapter):
    """BEIR-format corpus, queries and relevance judgements; relevance > 0 counts as gold."""

    name = "beir"
    description = "any BEIR-layout folder (corpus.jsonl, queries.jsonl, qrels/<split>.tsv)"
    Params = BeirParams

    def files(self, params: BeirParams) -> list[FileSpec]:
        qrels = params.path / "qrels" / f"{params.split}.tsv"
        if not qrels.is_file():
            raise DataError(f"BEIR split {params.split!r} has no qrels file {qrels}")
        sources = {"corpus.jsonl": params.path / "corpus.jsonl", "queries.jsonl": params.path / "queries.jsonl",
                   "qrels.tsv": qrels}
        return [FileSpec(name=n, sha256=file_digest(p), local=p) for n, p in sources.items()]

    def objects(self, raw: Path, params: BeirParams) -> Iterator[CorpusObject]:
        for line_no, doc in read_jsonl(raw / "corpus.jsonl"):
            if "_id" not in doc or "text" not in doc:
                raise DataError(f"{raw / 'corpus.jsonl'}:{line_no} needs '_id' and 'text', has {sorted(doc)}")
            title = str(doc.get("title") or "")
            for position, chunk in enumerate(chunk_text(str(doc["text"]), params.chunker)):
                yield CorpusObject(text=serialize_text(title, chunk) if title else chunk, doc_id=str(doc["_id"]),
                                   page_title=title, source=str(doc["_id"]), modality="text", position=position)

    def queries(self, raw: Path, params: BeirParams) -> Iterator[Query]:
        gold = _qrels(raw / "qrels.tsv")
        for line_no, q in read_jsonl(raw / "queries.jsonl"):
            if "_id" not in q or "text" not in q:
                raise DataError(f"{raw / 'queries.jsonl'}:{line_no} needs '_id' and 'text', has {sorted(q)}")
            if str(q["_id"]) in gold:
                yield Query(query_id=str(q["_id"]), text=str(q["text"]), gold_doc_ids=gold[str(q["_id"])])
