"""A user's own corpus and queries as JSONL files with any fields."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator, Literal

import pyarrow as pa
import pyarrow.compute as pc
from pydantic import BaseModel, ConfigDict, Field, field_validator

from rbench.core.configfile import ConfigPath
from rbench.core.errors import DataError
from rbench.dataset_adapters.base import (
    ADAPTERS,
    OBJECT_SCHEMA,
    Adapter,
    CorpusObject,
    FileSpec,
    Query,
    RowByRow,
    local_file,
    read_jsonl,
    text_value,
)
from rbench.dataset_adapters.chunking import ChunkerConfig, chunk_text
from rbench.dataset_adapters.columnar import Positions, is_blank, json_blocks, window_chunks
from rbench.dataset_adapters.serialize import SEP, serialize_text

CORPUS, QUERIES = "corpus.jsonl", "queries.jsonl"


class JsonlParams(BaseModel):
    """Field mapping for a JSONL corpus (one object per line) and a JSONL queries file.

    The document id (the unit of evaluation) is the values of ``doc_id_fields``
    joined by ``doc_id_separator`` — ``[page_title, source]`` with ``_`` reads the ARM release.
    ``title_field`` fills ``page_title`` (default: the first doc id field);
    ``prefix_title`` writes text as ``title [SEP] passage``, per chunk.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    corpus: ConfigPath
    """The corpus file: one JSON object per line."""
    queries: ConfigPath
    """The queries file: one JSON object per line."""
    text_field: str = "text"
    """The corpus field whose text is indexed."""
    doc_id_fields: list[str] = Field(default_factory=lambda: ["doc_id"], min_length=1)
    """The corpus fields whose values, joined, make the document id (the unit of evaluation)."""
    doc_id_separator: str = " :: "
    """What joins the values of ``doc_id_fields``."""
    title_field: str | None = None
    """The corpus field that fills each object's ``page_title``; default: the first of ``doc_id_fields``."""
    prefix_title: bool = False
    """Write each object's text as ``title [SEP] text``."""
    metadata_fields: list[str] = Field(default_factory=list)
    """Corpus fields kept beside the text in each object's metadata (not indexed)."""
    modality: Literal["text", "row", "table", "cell"] = "text"
    """What each line is: ``text``, or a ``row``, ``table`` or ``cell`` already serialized."""
    chunker: ChunkerConfig = ChunkerConfig(kind="none")
    """How long texts are split; default: each object whole."""
    query_id_field: str | None = "query_id"
    """The queries field that holds the query id; null: the line number."""
    query_text_field: str = "text"
    """The queries field that holds the question."""
    gold_field: str = "gold_doc_ids"
    """The queries field that holds the relevant document ids (a list of strings)."""

    @field_validator("corpus", "queries")
    @classmethod
    def _exists(cls, path: Path) -> Path:
        if path.is_dir():
            raise ValueError(f"{path} is a folder; give the path of a JSONL file")
        if not path.is_file():
            raise ValueError(f"file {path} does not exist; give the path of a JSONL file")
        return path


def _field(record: dict, name: str, path: Path, line_no: int, param: str):
    if name not in record:
        raise DataError(
            f"{path}:{line_no} has no field {name!r} (set by '{param}'); "
            f"its fields are {sorted(record)}: set '{param}' to one of them"
        )
    return record[name]


def _text(record: dict, name: str, path: Path, line_no: int, param: str) -> str:
    """A field that must hold text (a string or a number): null, lists and objects are named errors."""
    return text_value(_field(record, name, path, line_no, param), f"{path}:{line_no}", name, f" (set by '{param}')")


@ADAPTERS.register
class Jsonl(Adapter):
    """Generic JSONL corpus + queries, as the ARM reproduction's ``index(...)`` took them."""

    name = "jsonl"
    version = 2
    description = "your own corpus.jsonl + queries.jsonl with configurable field names"
    Params = JsonlParams
    unique_positions = True

    def files(self, params: JsonlParams) -> list[FileSpec]:
        return [
            local_file(CORPUS, params.corpus),
            local_file(QUERIES, params.queries),
        ]

    def objects(self, raw: Path, params: JsonlParams) -> Iterator[CorpusObject]:
        path = params.corpus
        positions: dict[str, int] = {}
        for line_no, record in read_jsonl(raw / CORPUS, shown=path):
            parts = [_text(record, f, path, line_no, "doc_id_fields") for f in params.doc_id_fields]
            doc = params.doc_id_separator.join(parts)
            text = _text(record, params.text_field, path, line_no, "text_field")
            title = _text(record, params.title_field, path, line_no, "title_field") if params.title_field else parts[0]
            metadata = {f: _field(record, f, path, line_no, "metadata_fields") for f in params.metadata_fields}
            pieces = chunk_text(text, params.chunker) if params.modality == "text" and text.strip() else [text]
            for piece in pieces:
                position = positions.get(doc, 0)
                positions[doc] = position + 1
                body = serialize_text(title, piece) if params.prefix_title and piece.strip() else piece
                yield CorpusObject(
                    text=body, doc_id=doc, page_title=title,
                    source=parts[-1] if len(parts) > 1 else "", modality=params.modality,
                    position=position, metadata=metadata, origin=f"{path}:{line_no}",
                )

    def object_batches(self, raw: Path, params: JsonlParams) -> Iterator[pa.RecordBatch]:
        """:meth:`objects` read by column (Arrow parses blocks of lines; the per-row work left is
        chunking the passages longer than a window), except with ``metadata_fields`` or a
        chunker other than word windows."""
        if params.metadata_fields or not params.chunker.word_windows:
            return super().object_batches(raw, params)
        return self._columns(raw, params)

    def _columns(self, raw: Path, params: JsonlParams) -> Iterator[pa.RecordBatch]:
        fields = list(dict.fromkeys([*params.doc_id_fields, params.text_field, *filter(None, [params.title_field])]))
        positions = Positions()
        for batch in json_blocks(raw / CORPUS, fields, shown=params.corpus):
            parts = [batch.column(f) for f in params.doc_id_fields]
            docs = parts[0] if len(parts) == 1 else pc.binary_join_element_wise(*parts, params.doc_id_separator)
            if is_blank(docs).any():
                raise RowByRow("an empty document id")
            rows, texts = (None, batch.column(params.text_field)) if params.modality != "text" else \
                window_chunks(batch.column(params.text_field), params.chunker, keep_blank=True)
            titles = batch.column(params.title_field or params.doc_id_fields[0])
            source = parts[-1] if len(parts) > 1 else pa.repeat("", len(titles))
            if rows is not None:
                docs, titles, source = docs.take(rows), titles.take(rows), source.take(rows)
            if params.prefix_title:
                texts = pc.if_else(pa.array(is_blank(texts)), texts,
                                   pc.binary_join_element_wise(titles, texts, f" {SEP} "))
            n = len(texts)
            yield pa.RecordBatch.from_arrays([texts, docs, titles, source, pa.repeat(params.modality, n),
                                              pa.array(positions.take(docs)), pa.repeat("{}", n),
                                              pa.nulls(n, pa.string())], schema=OBJECT_SCHEMA)

    def queries(self, raw: Path, params: JsonlParams) -> Iterator[Query]:
        path = params.queries
        for line_no, record in read_jsonl(raw / QUERIES, shown=path):
            gold = _field(record, params.gold_field, path, line_no, "gold_field")
            gold = [gold] if isinstance(gold, str) else gold
            if not isinstance(gold, list) or not all(isinstance(g, str) for g in gold):
                raise DataError(
                    f"{path}:{line_no} field {params.gold_field!r} must be a list of document ids "
                    f"(strings), got {gold!r}"
                )
            qid = _text(record, params.query_id_field, path, line_no, "query_id_field") if params.query_id_field else str(line_no)
            text = _text(record, params.query_text_field, path, line_no, "query_text_field")
            yield Query(query_id=qid, text=text, gold_doc_ids=gold, origin=f"{path}:{line_no}")

