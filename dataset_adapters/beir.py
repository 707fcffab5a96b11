"""Any dataset in the BEIR layout: corpus.jsonl, queries.jsonl and qrels/<split>.tsv."""

from __future__ import annotations

import logging
import re
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
from rbench.dataset_adapters.columnar import chunk_numbers, is_blank, json_blocks, window_chunks
from rbench.dataset_adapters.qrels import read_qrels
from rbench.dataset_adapters.serialize import SEP, serialize_text

SPLIT = re.compile(r"^[A-Za-z0-9][\w.-]*$")
log = logging.getLogger(__name__)


class BeirParams(BaseModel):
    """A BEIR folder, read and scored as BEIR's own code does by default (beir-cellar/beir at
    ef83d29): each document whole, its title and text joined by a space, and a hit whose id is
    its query's id left out. Grades > 0 are relevant; nDCG uses the grades themselves."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    path: ConfigPath = Field(description="The dataset folder: `corpus.jsonl`, `queries.jsonl` and `qrels/`.")
    split: str = Field("test", description="Which qrels file: `qrels/<split>.tsv`.")
    qrels: ConfigPath | None = Field(None, description="A qrels file of your own instead of `split`'s: BEIR TSV "
                                                       "(`query-id<TAB>corpus-id<TAB>score`) or TREC (`qid 0 docid "
                                                       "grade`).")
    title: Literal["space", "sep", "none"] = Field(
        "space", description="How a document's title joins its text: `space` as BEIR's encoders do "
                             "(`(title + \" \" + text).strip()`, `beir/retrieval/models/util.py` lines 8-22, the "
                             "separator `\" \"` of `sentence_bert.py` line 21); `sep`: `title [SEP] text`, rbench's "
                             "serialization of objects with a title; `none`: the text alone.")
    ignore_identical_ids: bool = Field(
        True, description="Leave a hit out of its query's ranking when its id is the query's id, as BEIR's "
                          "`EvaluateRetrieval.evaluate` does by default (`beir/retrieval/evaluation.py` lines "
                          "73-84); matters where queries are documents too (ArguAna, Quora).")
    chunker: ChunkerConfig = Field(ChunkerConfig(kind="none"),
                                   description="How long passages are split; BEIR keeps each whole (the default).")

    @field_validator("split")
    @classmethod
    def _split_name(cls, split: str) -> str:
        if not SPLIT.match(split):
            raise ValueError(f"split {split!r} must be the name of a file in qrels/ (such as test, dev, train), "
                             "not a path: for qrels elsewhere, set qrels")
        return split

    @field_validator("path")
    @classmethod
    def _layout(cls, path: Path) -> Path:
        if not path.is_dir():
            raise ValueError(f"BEIR folder {path} {'is a file, not a folder' if path.exists() else 'does not exist'}; "
                             "give the folder that holds corpus.jsonl, queries.jsonl and qrels/ (a relative path is "
                             "read from the experiment file's folder)")
        missing = [n for n in ("corpus.jsonl", "queries.jsonl") if not (path / n).is_file()]
        if missing:
            raise ValueError(f"BEIR folder {path} lacks {missing}; expected corpus.jsonl, queries.jsonl, qrels/")
        return path




@ADAPTERS.register
class Beir(Adapter):
    """BEIR-format corpus, queries and graded relevance judgements; grade > 0 counts as gold."""

    name = "beir"
    description = "any BEIR-layout folder (corpus.jsonl, queries.jsonl, qrels/<split>.tsv or TREC qrels)"
    Params = BeirParams
    graded = True
    excludes = True
    every_query = True
    version = 3

    def files(self, params: BeirParams) -> list[FileSpec]:
        qrels = params.qrels or params.path / "qrels" / f"{params.split}.tsv"
        if not qrels.is_file():
            raise DataError(f"BEIR split {params.split!r} has no qrels file {qrels}" if params.qrels is None
                            else f"qrels file {qrels} does not exist")
        sources = {"corpus.jsonl": params.path / "corpus.jsonl", "queries.jsonl": params.path / "queries.jsonl",
                   "qrels.tsv": qrels}
        return [local_file(n, p) for n, p in sources.items()]

    def objects(self, raw: Path, params: BeirParams) -> Iterator[CorpusObject]:
        for line_no, doc in read_jsonl(raw / "corpus.jsonl"):
            where = f"{params.path / 'corpus.jsonl'}:{line_no}"
            if "_id" not in doc or "text" not in doc:
                raise DataError(f"{where} needs '_id' and 'text', has {sorted(doc)}")
            text = text_value(doc["text"], where, "text")
            title = str(doc.get("title") or "")
            for position, chunk in enumerate(chunk_text(text, params.chunker)):
                yield CorpusObject(text=with_title(title, chunk, params.title), doc_id=str(doc["_id"]),
                                   page_title=title, source=str(doc["_id"]), modality="text", position=position,
                                   origin=where)

    def object_batches(self, raw: Path, params: BeirParams) -> Iterator[pa.RecordBatch]:
        """:meth:`objects` read by column (Arrow parses blocks of lines; only passages longer than
        a window go through the chunker), except with a chunker other than word windows."""
        if not params.chunker.word_windows:
            return super().object_batches(raw, params)
        return self._columns(raw, params)

    def _columns(self, raw: Path, params: BeirParams) -> Iterator[pa.RecordBatch]:
        for batch in json_blocks(raw / "corpus.jsonl", ["_id", "text", "title"], optional=("title",),
                                 shown=raw / "corpus.jsonl"):
            ids = batch.column("_id")
            if is_blank(ids).any():
                raise RowByRow("an empty _id")
            rows, chunks = window_chunks(batch.column("text"), params.chunker, keep_blank=False)
            titles = pc.fill_null(batch.column("title"), "")
            if rows is not None:
                ids, titles = ids.take(rows), titles.take(rows)
            n = len(chunks)
            texts = chunks
            if params.title == "space":
                texts = pc.utf8_trim_whitespace(pc.binary_join_element_wise(titles, chunks, " "))
            elif params.title == "sep":
                texts = pc.if_else(pc.greater(pc.binary_length(titles), 0),
                                   pc.binary_join_element_wise(titles, chunks, f" {SEP} "), chunks)
            yield pa.RecordBatch.from_arrays([texts, ids, titles, ids, pa.repeat("text", n),
                                              pa.array(chunk_numbers(rows, n)), pa.repeat("{}", n),
                                              pa.nulls(n, pa.string())], schema=OBJECT_SCHEMA)

    def queries(self, raw: Path, params: BeirParams) -> Iterator[Query]:
        judged = read_qrels(raw / "qrels.tsv", params.qrels or params.path / "qrels" / f"{params.split}.tsv")
        gold = {q: {d: g for d, g in docs.items() if g > 0} for q, docs in judged.items()}
        unjudged = sorted(q for q, docs in gold.items() if not docs)
        if unjudged:
            log.warning("beir %s: %d queries of the qrels (such as %r) have no document graded > 0 and are left "
                        "out; BEIR's evaluate counts them, each scoring 0", params.path, len(unjudged), unjudged[0])
        asked = set()
        for line_no, q in read_jsonl(raw / "queries.jsonl"):
            where = f"{params.path / 'queries.jsonl'}:{line_no}"
            if "_id" not in q or "text" not in q:
                raise DataError(f"{where} needs '_id' and 'text', has {sorted(q)}")
            text = text_value(q["text"], where, "text")
            asked.add(str(q["_id"]))
            relevant = gold.get(str(q["_id"]))
            if relevant:
                yield Query(query_id=str(q["_id"]), text=text, gold_doc_ids=list(relevant),
                            gold_grades=list(relevant.values()), origin=where,
                            nonrelevant_doc_ids=[d for d, g in judged[str(q["_id"])].items() if g <= 0],
                            excluded_doc_ids=[str(q["_id"])] if params.ignore_identical_ids else [])
        unknown = sorted(set(judged) - asked)
        if unknown:
            log.warning("beir %s: %d queries of the qrels (such as %r) are not in queries.jsonl: their %d judgements "
                        "are left out; check that the qrels file belongs to this folder", params.path, len(unknown),
                        unknown[0], sum(len(judged[q]) for q in unknown))


def with_title(title: str, text: str, join: str) -> str:
    """``text`` with its document's ``title`` joined as :attr:`BeirParams.title` says."""
    if join == "space":
        return f"{title} {text}".strip()
    if join == "sep" and title:
        return serialize_text(title, text)
    return text
