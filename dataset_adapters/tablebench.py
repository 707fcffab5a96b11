"""TableBench (Hugging Face ``Multilingual-Multimodal-NLP/TableBench``, ``TableBench.jsonl``) as the
ARM reproduction's scripts turn it into a corpus and a benchmark (apostolhskouk/ARM at 5a6cb92,
``scripts/table_bench/``), from the upstream file:

- ``append_table_ids.py``: each distinct table (its columns and its cells as text, lines 13-18)
  gets ``table_<n>`` in order of first appearance (lines 20-23); a question without a table gets
  none (line 27);
- ``serialize_tables.py``: a table is serialized once, under the ``qtype + qsubtype`` of the first
  question that shows it (lines 16-17, 37-39), one object per row whose length is the header's
  (line 24), ``[SEP] [H] col: val , [H] col: val`` (lines 28-32), and nothing for a table without
  columns (lines 22-23);
- ``generate_benchmark_all.py``: every question, its gold document ``qtype + qsubtype + "_" +
  table_id`` (lines 16-22; ``None`` for a question without a table).

So a question whose table an earlier question of another type showed first has its gold outside the
corpus, as in ARM's release: the prepare stage counts them and ``rbench compare`` prints the ceiling.
The file names those scripts read and write do not chain (``append_table_ids.py`` writes
``TableBench_new.jsonl``, the next two read ``TableBench_with_id.jsonl``): the three are run in that
order on one file, as the release's objects show. Cells are Python's ``str`` of the JSON values
(``None``, ``True``, ``2.5``), as those scripts write them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

from pydantic import BaseModel, ConfigDict

from rbench.core.errors import DataError
from rbench.dataset_adapters.base import ADAPTERS, Adapter, CorpusObject, FileSpec, Query, read_jsonl

REPO = "Multilingual-Multimodal-NLP/TableBench"
FILE = "table_bench/TableBench.jsonl"


class TableBenchParams(BaseModel):
    """``revision``: a commit of the Hugging Face dataset (pin it for stable keys)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    revision: str = "main"


def _records(raw: Path) -> Iterator[tuple[int, dict, str | None]]:
    """``(line, record, table id)`` of each question, the ids as ``append_table_ids.py`` assigns them."""
    path = raw / FILE
    ids: dict[tuple, str] = {}
    for line_no, record in read_jsonl(path):
        table = record.get("table")
        if table and not isinstance(table, dict):
            raise DataError(f"{path}:{line_no}: 'table' is {type(table).__name__}, not an object with 'columns' "
                            "and 'data': is this TableBench.jsonl?")
        if not table:
            yield line_no, record, None
            continue
        signature = (tuple(table.get("columns", [])),
                     tuple(tuple(str(cell) for cell in row) for row in table.get("data", [])))
        yield line_no, record, ids.setdefault(signature, f"table_{len(ids) + 1}")


def _kind(record: dict) -> str:
    return str(record.get("qtype", "")) + str(record.get("qsubtype", ""))


@ADAPTERS.register
class TableBench(Adapter):
    """TableBench's questions and tables, serialized as the ARM reproduction's scripts do."""

    name = "tablebench"
    description = f"TableBench ({REPO}, TableBench.jsonl) as the ARM reproduction serializes it: rows of each table"
    Params = TableBenchParams

    def files(self, params: TableBenchParams) -> list[FileSpec]:
        return [FileSpec(name=FILE, hf_repo=REPO, hf_path="TableBench.jsonl", revision=params.revision)]

    def objects(self, raw: Path, params: TableBenchParams) -> Iterator[CorpusObject]:
        done: set[str] = set()
        for line_no, record, table_id in _records(raw):
            if table_id is None or table_id in done:
                continue
            done.add(table_id)
            columns, kind = record["table"].get("columns", []), _kind(record)
            position = 0
            for row in record["table"].get("data", []) if columns else []:
                if len(row) != len(columns):
                    continue
                text = "[SEP] " + " , ".join(f"[H] {c}: {v}" for c, v in zip(map(str, columns), map(str, row)))
                yield CorpusObject(text=text, doc_id=f"{kind}_{table_id}", page_title=kind, source=table_id,
                                   modality="table", position=position, origin=f"{raw / FILE}:{line_no}")
                position += 1

    def queries(self, raw: Path, params: TableBenchParams) -> Iterator[Query]:
        for i, (line_no, record, table_id) in enumerate(_records(raw)):
            yield Query(query_id=str(i), text=str(record.get("question", "")),
                        gold_doc_ids=[f"{_kind(record)}_{table_id}"], origin=f"{raw / FILE}:{line_no}")
