"""MS MARCO v2.1 segmented documents (the TREC RAG 2024 corpus) with TREC RAG 2024 topics and qrels.

The corpus is the published ``msmarco_v2.1_doc_segmented/`` folder: 59 gzipped JSON-lines
shards ``msmarco_v2.1_doc_segmented_NN.json.gz`` (about 113.5 million segments), one segment
per line with ``docid`` (``msmarco_v2.1_doc_00_0#3_12345``: document, then segment number and
offset), ``url``, ``title``, ``headings``, ``segment``, ``start_char`` and ``end_char``. Each
segment is an object of the document named before ``#``, so rankings collapse on documents
as the seed pipeline does; a document's grade is the highest grade of its judged segments.
Topics are ``qid<TAB>query`` lines, qrels TREC lines (``qid Q0 docid grade``, graded 0-3).
"""

from __future__ import annotations

import gzip
import json
import logging
from pathlib import Path
from typing import Iterator

import pyarrow as pa
import pyarrow.compute as pc
from pydantic import BaseModel, ConfigDict, field_validator

from rbench.core.configfile import ConfigPath
from rbench.core.errors import DataError
from rbench.core.hashing import fast_fingerprint
from rbench.dataset_adapters.base import (
    ADAPTERS,
    OBJECT_SCHEMA,
    Adapter,
    CorpusObject,
    FileSpec,
    Query,
    RowByRow,
    text_value,
)
from rbench.dataset_adapters.columnar import is_blank, json_blocks
from rbench.dataset_adapters.qrels import read_qrels
from rbench.dataset_adapters.serialize import SEP, serialize_text

CORPUS = "msmarco_v2.1_doc_segmented"
SHARDS = 59
TOPICS = "trec_rag_2024/topics.rag24.test.txt"
QRELS = "trec_rag_2024/qrels.rag24.test-umbrela-all.txt"
log = logging.getLogger("rbench")
FIELDS = ("docid", "url", "title", "segment")
SEGMENT_ID = r'^[^#"\\\x00-\x1f]+#[0-9]{1,18}(_[^"\\\x00-\x1f]*)?$'
"""A segment id whose document and number Arrow can split as :func:`document_of` does, and
that JSON writes without escapes."""


def shard_name(n: int) -> str:
    """The published name of corpus shard ``n``."""
    return f"{CORPUS}/{CORPUS}_{n:02d}.json.gz"


def document_of(segment_id: str) -> tuple[str, int]:
    """``(document id, segment number)`` of a segment id ``<doc>#<n>_<offset>``."""
    doc, sep, rest = segment_id.partition("#")
    number = rest.split("_", 1)[0]
    if not sep or not doc or not number.isdigit():
        raise ValueError(segment_id)
    return doc, int(number)


class MsmarcoParams(BaseModel):
    """``shards``: which of the 59 corpus shards (default: all); ``corpus``: the folder that holds
    them (default: the mirror's ``msmarco_v2.1_doc_segmented/``); ``topics`` and ``qrels``:
    the TREC RAG 2024 files (default: the mirror's ``trec_rag_2024/topics.rag24.test.txt`` and
    ``qrels.rag24.test-umbrela-all.txt``)."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    shards: list[int] | None = None
    corpus: ConfigPath | None = None
    topics: ConfigPath | None = None
    """The TREC RAG 2024 topics file; default: the mirror's ``trec_rag_2024/topics.rag24.test.txt``."""
    qrels: ConfigPath | None = None

    @field_validator("shards")
    @classmethod
    def _shards(cls, shards: list[int] | None) -> list[int] | None:
        if shards is not None and (not shards or len(set(shards)) != len(shards)
                                   or not all(0 <= n < SHARDS for n in shards)):
            raise ValueError(f"shards {shards} must be distinct numbers from 0 to {SHARDS - 1}")
        return shards

    def shard_numbers(self) -> list[int]:
        """The chosen shards, or all of them."""
        return list(range(SHARDS)) if self.shards is None else self.shards


def _local(name: str, path: Path, link: bool = False) -> FileSpec:
    """A user's file, keyed by its fast fingerprint (hashing 25 GB per run would cost minutes);
    ``link``: a corpus shard, hard-linked into the store rather than copied."""
    if not path.is_file():
        raise DataError(f"MS MARCO v2.1 file {path} does not exist (expected {name.rsplit('/', 1)[-1]})")
    return FileSpec(name=name, local=path, observed=fast_fingerprint(path), link=link)


@ADAPTERS.register
class MsmarcoV21(Adapter):
    """MS MARCO v2.1 segments as objects of their documents, TREC RAG 2024 topics, graded qrels."""

    name = "msmarco_v21"
    description = "MS MARCO v2.1 segmented corpus (TREC RAG 2024), segments collapsed on documents, graded qrels"
    Params = MsmarcoParams
    graded = True
    repeated_record = ("segment #{position} of document {doc_id!r} appears twice: segment ids are unique in the "
                       "release, so a shard holds a repeated line (remove it, or fetch the shard again)")

    def files(self, params: MsmarcoParams) -> list[FileSpec]:
        corpus = [shard_name(n) for n in params.shard_numbers()]
        specs = [_local(name, params.corpus / name.split("/", 1)[1], link=True) if params.corpus
                 else FileSpec(name=name, link=True) for name in corpus]
        for name, path in ((TOPICS, params.topics), (QRELS, params.qrels)):
            specs.append(_local(name, path) if path else FileSpec(name=name))
        return specs

    def objects(self, raw: Path, params: MsmarcoParams) -> Iterator[CorpusObject]:
        for n in params.shard_numbers():
            name = shard_name(n)
            shown = params.corpus / name.split("/", 1)[1] if params.corpus else Path(name)
            try:
                with gzip.open(raw / name, "rt", encoding="utf-8") as lines:
                    for line_no, line in enumerate(lines, 1):
                        yield self._segment(line, f"{shown}:{line_no}")
            except (OSError, EOFError, UnicodeDecodeError) as e:
                raise DataError(f"{shown} is not a readable gzipped JSON-lines shard ({e}); fetch it again") from None

    def object_batches(self, raw: Path, params: MsmarcoParams) -> Iterator[pa.RecordBatch]:
        """:meth:`objects` read by column, a block of decompressed lines at a time."""
        for n in params.shard_numbers():
            for batch in json_blocks(raw / shard_name(n), list(FIELDS), gzip=True):
                segment_ids = batch.column("docid")
                if not pc.all(pc.match_substring_regex(segment_ids, SEGMENT_ID)).as_py():
                    raise RowByRow("a docid that is not a plain segment id")
                doc, rest = (pc.list_element(pc.split_pattern(segment_ids, "#", max_splits=1), i) for i in (0, 1))
                if is_blank(doc).any():
                    raise RowByRow("an empty document id")
                number = pc.cast(pc.list_element(pc.split_pattern(rest, "_", max_splits=1), 0), pa.int64())
                title, count = batch.column("title"), batch.num_rows
                yield pa.RecordBatch.from_arrays(
                    [pc.binary_join_element_wise(title, batch.column("segment"), f" {SEP} "), doc, title,
                     batch.column("url"), pa.repeat("text", count), number,
                     pc.binary_join_element_wise('{"segment_id": "', segment_ids, '"}', ""),
                     pa.nulls(count, pa.string())], schema=OBJECT_SCHEMA)

    @staticmethod
    def _segment(line: str, where: str) -> CorpusObject:
        try:
            record = json.loads(line)
        except json.JSONDecodeError as e:
            raise DataError(f"{where} is not valid JSON ({e})") from None
        missing = [f for f in FIELDS if not isinstance(record, dict) or f not in record]
        if missing:
            raise DataError(f"{where} lacks MS MARCO v2.1 field(s) {missing}; expected {list(FIELDS)}")
        segment_id = text_value(record["docid"], where, "docid")
        try:
            doc, number = document_of(segment_id)
        except ValueError:
            raise DataError(f"{where}: docid {segment_id!r} is not a segment id like "
                            "msmarco_v2.1_doc_00_0#3_12345") from None
        title = text_value(record["title"] or "", where, "title")
        return CorpusObject(text=serialize_text(title, text_value(record["segment"], where, "segment")), doc_id=doc,
                            page_title=title, source=text_value(record["url"], where, "url"), modality="text",
                            position=number, metadata={"segment_id": segment_id}, origin=where)

    def queries(self, raw: Path, params: MsmarcoParams) -> Iterator[Query]:
        qrels_shown = params.qrels or Path(QRELS)
        grades: dict[str, dict[str, int]] = {}
        for qid, judged in read_qrels(raw / QRELS, qrels_shown).items():
            for segment_id, grade in judged.items():
                try:
                    doc = document_of(segment_id)[0] if "#" in segment_id else segment_id
                except ValueError:
                    raise DataError(f"{qrels_shown}: {segment_id!r} (query {qid}) is not a segment or "
                                    "document id") from None
                grades.setdefault(qid, {})
                grades[qid][doc] = max(grades[qid].get(doc, 0), grade)
        shown = params.topics or Path(TOPICS)
        unjudged: list[str] = []
        with open(raw / TOPICS, encoding="utf-8") as f:
            for line_no, line in enumerate(f, 1):
                if not line.strip():
                    continue
                qid, tab, text = line.rstrip("\n").partition("\t")
                if not tab:
                    raise DataError(f"{shown}:{line_no} must be 'query-id<TAB>query', got {line.rstrip()!r}")
                relevant = {d: g for d, g in grades.get(qid, {}).items() if g > 0}
                if relevant:
                    yield Query(query_id=qid, text=text, gold_doc_ids=list(relevant),
                                gold_grades=list(relevant.values()), origin=f"{shown}:{line_no}",
                                nonrelevant_doc_ids=[d for d, g in grades[qid].items() if g <= 0])
                else:
                    unjudged.append(qid)
        if unjudged:
            log.warning("msmarco_v21: %d topics of %s have no relevant segment in %s and are left out, as TREC's "
                        "evaluation leaves them out (e.g. %s)", len(unjudged), shown, qrels_shown, unjudged[:3])
