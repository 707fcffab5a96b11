"""BRIGHT (xlangai/BRIGHT): reasoning-intensive retrieval, 12 tasks, in its published layout.

The dataset's Parquet files: ``documents/<task>-00000-of-00001.parquet`` and
``long_documents/...`` (columns ``id``, ``content``), and ``examples/...`` (``id``, ``query``,
``gold_ids``, ``gold_ids_long``, ``excluded_ids``). Each query's ``excluded_ids`` (``N/A`` is
no id) are removed from its ranking before scoring, as BRIGHT's own evaluation does; BRIGHT
reports nDCG@10.

``layout: anserini`` reads the same task as Anserini and Pyserini publish it: the corpus of
``bright-corpus.tar`` (castorini/collections-bright; JSON lines ``{"id", "contents"}`` under
``bright/<task>/``, task names with hyphens), ``topics.bright-<task>.tsv.gz`` (``qid<TAB>query``)
and ``qrels.bright-<task>.txt`` (TREC) from anserini-tools. As Anserini's regressions do, a
query's ranking loses the document whose id is the query's (``-removeQuery``) and BRIGHT's
``excluded_ids`` (its ``filter_run.py``, which reads the examples file, or Anserini's own
``exclude.bright-<task>.txt``: ``query-id doc-id`` per line).
"""

from __future__ import annotations

import gzip
import logging
import tarfile
from pathlib import Path, PurePosixPath
from typing import IO, Iterator, Literal

import pyarrow.parquet as pq
from pydantic import BaseModel, ConfigDict, model_validator

from rbench.core.configfile import ConfigPath
from rbench.core.errors import DataError
from rbench.dataset_adapters.base import (
    ADAPTERS,
    Adapter,
    CorpusObject,
    FileSpec,
    Query,
    jsonl_records,
    local_file,
    text_value,
)
from rbench.dataset_adapters.chunking import ChunkerConfig, chunk_text
from rbench.dataset_adapters.pinned import pin
from rbench.dataset_adapters.qrels import read_qrels

log = logging.getLogger("rbench")

REPO = "xlangai/BRIGHT"
ANSERINI_CORPUS_REPO = "castorini/collections-bright"
ANSERINI_TOOLS = "anserini-tools"  # dataset_adapters/pins/anserini-tools.json: the commit and its files
CORPUS_TAR = "bright-anserini/bright-corpus.tar"
JSON_SUFFIXES = (".json", ".jsonl", ".json.gz", ".jsonl.gz")
Task = Literal["biology", "earth_science", "economics", "psychology", "robotics", "stackoverflow",
               "sustainable_living", "leetcode", "pony", "aops", "theoremqa_theorems", "theoremqa_questions"]
NO_ID = "N/A"
BATCH = 4096


class BrightParams(BaseModel):
    """``task``: one of BRIGHT's 12 tasks; ``long_documents``: whole web pages and their gold
    (``gold_ids_long``) instead of passages (StackExchange tasks and pony only); ``path``: a
    local copy of the dataset folder in the published layout (else the mirror's ``bright/``,
    else the Hugging Face hub); ``chunker``: how documents are split (default: kept whole, as
    BRIGHT scores them).

    ``layout: anserini``: ``path`` is the task's unpacked corpus folder
    (``collections/bright/<task>``) or ``bright-corpus.tar`` itself (else the mirror's
    ``bright-anserini/bright-corpus.tar``, else the hub); ``topics``, ``qrels``: Anserini's
    files (else the mirror's ``bright-anserini/``, else anserini-tools on GitHub at the commit
    ``pins/anserini-tools.json`` names, its ``topics/`` and ``qrels/`` folders);
    ``examples``: BRIGHT's examples file, read for ``excluded_ids`` (else as in the published
    layout); ``exclude``: Anserini's ``exclude.bright-<task>.txt`` instead of the examples file
    (``query-id doc-id`` per line), so that no file of BRIGHT's own is needed."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    task: Task
    long_documents: bool = False
    layout: Literal["bright", "anserini"] = "bright"
    """``bright``: the dataset as BRIGHT publishes it; ``anserini``: the corpus, topics and qrels as Anserini and
    Pyserini publish them."""
    path: ConfigPath | None = None
    topics: ConfigPath | None = None
    """``anserini``: the topics file (``topics.bright-<task>.tsv.gz``, ``qid<TAB>query``)."""
    qrels: ConfigPath | None = None
    examples: ConfigPath | None = None
    exclude: ConfigPath | None = None
    chunker: ChunkerConfig = ChunkerConfig(kind="none")

    @model_validator(mode="after")
    def _layout_fields(self) -> "BrightParams":
        given = [f for f in ("topics", "qrels", "examples", "exclude") if getattr(self, f) is not None]
        if self.layout == "bright" and given:
            raise ValueError(f"{given} are files of layout 'anserini'; set layout: anserini, or leave them out")
        if self.examples is not None and self.exclude is not None:
            raise ValueError("examples and exclude both give the excluded ids: give one of them")
        if self.layout == "anserini" and self.long_documents:
            raise ValueError("Anserini publishes BRIGHT's passages only: long_documents needs layout: bright")
        return self

    def anserini_task(self) -> str:
        """The task's name in Anserini's files: hyphens for underscores (``earth-science``)."""
        return self.task.replace("_", "-")

    def anserini_file(self, kind: Literal["topics", "qrels"]) -> str:
        """The download name of Anserini's topics or qrels file of this task."""
        return f"bright-anserini/{PurePosixPath(self.upstream_path(kind)).name}"

    def upstream_path(self, kind: Literal["topics", "qrels"]) -> str:
        """The path of Anserini's topics or qrels file of this task in anserini-tools."""
        suffix = "tsv.gz" if kind == "topics" else "txt"
        return f"{kind}/{kind}.bright-{self.anserini_task()}.{suffix}"

    def exclude_file(self) -> str:
        """The download name of Anserini's exclusion file of this task."""
        return f"bright-anserini/exclude.bright-{self.anserini_task()}.txt"

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
        if params.layout == "anserini":
            return self._anserini_files(params)
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

    @staticmethod
    def _anserini_files(params: BrightParams) -> list[FileSpec]:
        corpus = params.path
        if corpus is None:
            specs = [FileSpec(name=CORPUS_TAR, hf_repo=ANSERINI_CORPUS_REPO, hf_path="bright-corpus.tar")]
        elif corpus.is_file():
            specs = [local_file(CORPUS_TAR, corpus)]
        else:
            found = sorted(f for f in corpus.iterdir() if f.is_file() and f.name.endswith(JSON_SUFFIXES)) \
                if corpus.is_dir() else []
            if not found:
                raise DataError(f"{corpus} holds no Anserini JSON-lines files ({', '.join(JSON_SUFFIXES)}): give "
                                f"the unpacked collections/bright/{params.anserini_task()} folder or bright-corpus.tar")
            specs = [local_file(f"bright-anserini/{params.anserini_task()}/{f.name}", f) for f in found]
        for kind in ("topics", "qrels"):
            name, local = params.anserini_file(kind), getattr(params, kind)
            upstream = params.upstream_path(kind)
            specs.append(local_file(name, local) if local else pin(ANSERINI_TOOLS).spec(name, upstream))
        if params.exclude:
            specs.append(local_file(params.exclude_file(), params.exclude))
            return specs
        examples = params.part("examples")
        specs.append(local_file(f"bright/{examples}", params.examples) if params.examples
                     else FileSpec(name=f"bright/{examples}", hf_repo=REPO, hf_path=examples))
        return specs

    def _shown(self, raw: Path, params: BrightParams, part: str) -> tuple[Path, str]:
        local = params.examples if params.layout == "anserini" else params.path / part if params.path else None
        return raw / "bright" / part, str(local or f"bright/{part}")

    def objects(self, raw: Path, params: BrightParams) -> Iterator[CorpusObject]:
        if params.layout == "anserini":
            records = _anserini_corpus(raw, params)
        else:
            path, shown = self._shown(raw, params, params.corpus_part())
            records = ((where, row["id"], row["content"], "content")
                       for where, row in _rows(path, shown, ("id", "content")))
        for where, doc_id, content, field in records:
            doc = text_value(doc_id, where, "id")
            text = text_value(content, where, field)
            for position, chunk in enumerate(chunk_text(text, params.chunker)):
                yield CorpusObject(text=chunk, doc_id=doc, page_title="", source=params.task, modality="text",
                                   position=position, origin=where)

    def queries(self, raw: Path, params: BrightParams) -> Iterator[Query]:
        if params.layout == "anserini":
            yield from self._anserini_queries(raw, params)
            return
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

    def _anserini_queries(self, raw: Path, params: BrightParams) -> Iterator[Query]:
        qrels_shown = str(params.qrels or params.anserini_file("qrels"))
        judged = read_qrels(raw / params.anserini_file("qrels"), qrels_shown)
        if params.exclude:
            shown = str(params.exclude)
            excluded = _exclusions(raw / params.exclude_file(), shown)
        else:
            path, shown = self._shown(raw, params, params.part("examples"))
            excluded = {str(row["id"]): _ids(row["excluded_ids"], where, "excluded_ids")
                        for where, row in _rows(path, shown, ("id", "excluded_ids"))}
        topics_shown = str(params.topics or params.anserini_file("topics"))
        unjudged = 0
        for line_no, line in enumerate(_text_lines(raw / params.anserini_file("topics"), topics_shown), 1):
            if not line.strip():
                continue
            qid, tab, text = line.rstrip("\n").partition("\t")
            where = f"{topics_shown}:{line_no}"
            if not tab:
                raise DataError(f"{where} must be 'query-id<TAB>query' (Anserini's TsvString), got {line[:80]!r}")
            gold = [d for d, grade in judged.get(qid, {}).items() if grade > 0]
            if not gold:
                unjudged += 1
                continue
            dropped = set(excluded.get(qid, [])) | {qid}
            both = sorted(dropped & set(gold))
            if both:
                raise DataError(f"{where}: {both} are gold in {qrels_shown} and excluded for query {qid!r} "
                                f"(in {shown}, or the query's own id); an id can only be one of them")
            yield Query(query_id=qid, text=text, gold_doc_ids=gold, excluded_doc_ids=sorted(dropped), origin=where)
        if unjudged:
            log.warning("bright %s: %d topics of %s have no relevant document in %s and are left out",
                        params.task, unjudged, topics_shown, qrels_shown)


def _exclusions(path: Path, shown: str) -> dict[str, list[str]]:
    """Anserini's exclusion file: ``query-id doc-id`` per line, as ``{query id: [doc ids]}``."""
    excluded: dict[str, list[str]] = {}
    for line_no, line in enumerate(_text_lines(path, shown), 1):
        fields = line.split()
        if not fields:
            continue
        if len(fields) != 2:
            raise DataError(f"{shown}:{line_no} must be 'query-id doc-id' (Anserini's exclusion file), "
                            f"got {line.strip()[:80]!r}")
        excluded.setdefault(fields[0], []).append(fields[1])
    return excluded


def _text_lines(path: Path, shown: str) -> Iterator[str]:
    """The lines of a text file, gzipped when its name ends in ``.gz``; a file that cannot be
    read or decoded (a truncated download) is a DataError naming ``shown``."""
    opener = gzip.open if path.name.endswith(".gz") else open
    try:
        with opener(path, "rt", encoding="utf-8") as f:
            yield from f
    except (OSError, EOFError, UnicodeDecodeError) as e:
        raise DataError(f"{shown} cannot be read ({e}); fetch it again") from None


def _anserini_corpus(raw: Path, params: BrightParams) -> Iterator[tuple[str, object, object, str]]:
    """``(where, id, contents, field)`` of every document of the task in Anserini's JSON lines:
    from ``bright-corpus.tar`` (its ``bright/<task>/`` members) or from the copied folder."""
    task = params.anserini_task()
    tar = raw / CORPUS_TAR
    if tar.exists():
        shown = str(params.path or CORPUS_TAR)
        try:
            with tarfile.open(tar, "r:*") as archive:
                members = 0
                for member in archive:
                    name = PurePosixPath(member.name)
                    if not (member.isfile() and name.parent.name == task and name.name.endswith(JSON_SUFFIXES)):
                        continue
                    members += 1
                    stream = archive.extractfile(member)
                    if name.name.endswith(".gz"):
                        stream = gzip.open(stream)
                    yield from _documents(stream, f"{shown}:{member.name}")
        except (tarfile.TarError, OSError, EOFError) as e:
            raise DataError(f"{shown} is not a readable tar archive ({e}); fetch it again") from None
        if not members:
            raise DataError(f"{shown} has no JSON-lines files under bright/{task}/: "
                            "is it Anserini's bright-corpus.tar?")
        return
    for file in sorted((raw / "bright-anserini" / task).iterdir()):
        shown = str(params.path / file.name if params.path else file)
        try:
            with (gzip.open(file) if file.name.endswith(".gz") else open(file, "rb")) as stream:
                yield from _documents(stream, shown)
        except (OSError, EOFError) as e:
            raise DataError(f"{shown} cannot be read ({e}); fetch it again") from None


def _documents(lines: IO[bytes], shown: str) -> Iterator[tuple[str, object, object, str]]:
    for line_no, record in jsonl_records(lines, shown):
        where = f"{shown}:{line_no}"
        missing = [f for f in ("id", "contents") if f not in record]
        if missing:
            raise DataError(f"{where} lacks field(s) {missing} of Anserini's JsonCollection; has {sorted(record)}")
        yield where, record["id"], record["contents"], "contents"
