"""The ARM reproduction's processed release (Hugging Face ``ApostolosK/arm_reproduction_data_processed``).

Per benchmark: ``assets/all_data/serialized_data/<name>.jsonl`` (``object``, ``page_title``,
``source``) and ``assets/all_data/benchmarks/<name>.json`` (entries with ``query`` and
``document_ids``). Document ids are ``page_title + "_" + source``, as the release builds them.

``bird_schema`` and ``spider_schema`` are the corpora the report's Table 6 searched for BIRD and
Spider: one metadata object per table, written beside the row files by
``scripts/run_extract_schemas.py`` (apostolhskouk/ARM at 5a6cb92, lines 5-6: ``<base>_schema.jsonl``),
indexed with every file of ``serialized_data`` (``scripts/run_all_indexing.py`` lines 7, 25),
evaluated as ``bird_schema.json`` and ``spider_schema.json`` (``scripts/run_all_evaluation.py`` lines
33-34; ``bird.json`` is commented out at line 24), sampled from ``benchmarks/``
(``scripts/run_benchmark_subsampling.py`` lines 4-13) and uploaded with both folders
(``scripts/run_upload_data.sh`` lines 14-16).
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator, Literal

from pydantic import BaseModel, ConfigDict, model_validator

from rbench.core.errors import DataError
from rbench.dataset_adapters.base import (
    ADAPTERS,
    Adapter,
    CorpusObject,
    FileSpec,
    Query,
    read_json_list,
    read_jsonl,
)
from rbench.dataset_adapters.serialize import serialize_schema_arm

REPO = "ApostolosK/arm_reproduction_data_processed"
Benchmark = Literal[
    "bird", "bird_schema", "fetaqa", "feverous", "mt_raig", "multi_hop_rag", "ottqa", "spider", "spider_schema",
    "tabfact", "table_bench"
]


class ArmParams(BaseModel):
    """``benchmark``: one of the nine (BIRD and Spider as rows, or as the ``_schema`` corpora Table 6
    searched); ``revision``: a commit of the release (pin it for stable keys); ``schema_from``: for
    ``bird_schema`` and ``spider_schema``, read the release's ``_schema`` files (``release``, default:
    what ARM's evaluation read), or make the metadata objects from the row file (``rows``: the 2.0 GB
    ``bird.jsonl``) as ``scripts/run_extract_schemas.py`` does, with the row benchmark's queries (the
    same document ids), for a copy of the release without the ``_schema`` files (its README's file
    table lists none); ``queries``: every query of ``benchmarks/`` (``all``, default; ``protocol: arm``
    samples 100 of them as ARM's code does), or the release's own sample, ``benchmarks_subsampled/``
    (``sample``): the files ``scripts/run_all_evaluation.py`` evaluates (line 22), written by
    ``scripts/run_benchmark_subsampling.py`` (lines 4-13, ``k=100``) and uploaded with the release
    (``scripts/run_upload_data.sh`` line 15). Its queries are numbered in that file's order."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    benchmark: Benchmark
    revision: str = "main"
    schema_from: Literal["release", "rows"] = "release"
    queries: Literal["all", "sample"] = "all"

    @model_validator(mode="after")
    def _schema_only(self) -> "ArmParams":
        if self.schema_from == "rows" and not self.benchmark.endswith("_schema"):
            raise ValueError(f"schema_from: rows makes the metadata objects of bird_schema or spider_schema; "
                             f"benchmark {self.benchmark!r} has its own objects: leave schema_from out")
        return self

    @property
    def from_rows(self) -> bool:
        """Whether the metadata objects are made here from the row file."""
        return self.schema_from == "rows"

    def paths(self) -> tuple[str, str]:
        """The objects file and the benchmark file read from the release."""
        name = self.benchmark.removesuffix("_schema") if self.from_rows else self.benchmark
        folder = "benchmarks_subsampled" if self.queries == "sample" else "benchmarks"
        return f"assets/all_data/serialized_data/{name}.jsonl", f"assets/all_data/{folder}/{name}.json"


def released(path: Path) -> Iterator[tuple[str, str, str]]:
    """``(page_title, source, object)`` of each line of a release's objects file."""
    for line_no, record in read_jsonl(path):
        missing = [k for k in ("object", "page_title", "source") if k not in record]
        if missing:
            raise DataError(f"{path}:{line_no} lacks ARM field(s) {missing}; found {sorted(record)}")
        yield str(record["page_title"]), str(record["source"]), str(record["object"])


def schema_objects(rows: Iterator[tuple[str, str, str]]) -> Iterator[tuple[str, str, str]]:
    """Each table's metadata object from its row objects (:func:`released`), as
    ``scripts/run_extract_schemas.py`` (apostolhskouk/ARM at 5a6cb92) writes it: one per ``(page_title,
    source)``, from the table's first row (lines 9-16, 35), the table name the source without ``table_``
    (line 17, every occurrence), the columns the text between ``[H]`` and the first ``:`` (lines 19-20)."""
    seen: set[tuple[str, str]] = set()
    for title, source, text in rows:
        if (title, source) not in seen:
            seen.add((title, source))
            yield title, source, serialize_schema_arm(title, source.replace("table_", ""), text)


@ADAPTERS.register
class Arm(Adapter):
    """All nine ARM benchmarks from one release; the objects come pre-serialized."""

    name = "arm"
    description = (f"ARM reproduction release ({REPO}): bird, bird_schema, fetaqa, feverous, mt_raig, multi_hop_rag, "
                   "ottqa, spider, spider_schema, tabfact, table_bench")
    Params = ArmParams

    def files(self, params: ArmParams) -> list[FileSpec]:
        return [FileSpec(name=p, hf_repo=REPO, revision=params.revision) for p in params.paths()]

    def objects(self, raw: Path, params: ArmParams) -> Iterator[CorpusObject]:
        path = raw / params.paths()[0]
        positions: dict[str, int] = {}
        rows = released(path)
        for title, source, text in schema_objects(rows) if params.from_rows else rows:
            doc = f"{title}_{source}"
            positions[doc] = positions.get(doc, -1) + 1
            modality = ("schema" if params.benchmark.endswith("_schema")
                        else "table" if source.lower().startswith("table") else "text")
            yield CorpusObject(text=text, doc_id=doc, page_title=title, source=source, modality=modality,
                               position=positions[doc])

    def queries(self, raw: Path, params: ArmParams) -> Iterator[Query]:
        path = raw / params.paths()[1]
        for i, entry in enumerate(read_json_list(path, "an ARM benchmark file (entries with query and document_ids)")):
            if "query" not in entry or "document_ids" not in entry:
                raise DataError(f"{path} entry {i} needs 'query' and 'document_ids'")
            yield Query(query_id=str(i), text=str(entry["query"]), gold_doc_ids=[str(d) for d in entry["document_ids"]])
