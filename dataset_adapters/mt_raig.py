"""MT-RAIG Bench (KWONDU/mt-raig: ``mt_raig_bench/table_corpus.json``, ``mt_raig_bench/benchmark.json``) as
the ARM reproduction's scripts turn it into a corpus and a benchmark (apostolhskouk/ARM at 5a6cb92,
``scripts/mt_raig/``):

- ``serialize_tables.py``: each table with a header (lines 17-18) is one object per row whose length
  is the header's (lines 22-24), ``title [SEP] [H] col: val , [H] col: val`` (lines 26-33), its
  ``page_title`` the table's title and its ``source`` ``table_<id>`` (lines 20, 35-39);
- ``create_benchmark_all.py``: every question (line 37), its gold documents ``<title>_table_<id>`` for
  the gold tables the serialized corpus holds with a title (lines 8-22, 40-49; a gold table that was
  not serialized is left out of the list, not counted as outside the corpus), de-duplicated and sorted
  (line 53).

``serialize_tables.py`` writes ``serialized_output/serialized_tables_by_row.jsonl`` and the benchmark
script reads ``serialized_data/mt_raig.jsonl``: the one file, moved into the release. The upstream
files are not pinned by digest (their git blobs: ``c0a24752`` and ``106ff8ae`` at the pinned commit).
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

from pydantic import BaseModel, ConfigDict

from rbench.dataset_adapters.base import ADAPTERS, Adapter, CorpusObject, FileSpec, Query, read_json_list

COMMIT = "1c264a6c92e6e2d251486207692d5971c885d883"
TABLES, QUESTIONS = "mt_raig/table_corpus.json", "mt_raig/benchmark.json"
WHAT = "an MT-RAIG Bench file (mt_raig_bench/)"


class MtRaigParams(BaseModel):
    """No settings: the corpus and the questions are MT-RAIG Bench's, as ARM's scripts serialize them."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def _rows(tables: list[dict]) -> Iterator[tuple[object, str, str]]:
    """``(title, source, object)`` of each row object ``serialize_tables.py`` writes."""
    for table in tables:
        title, header = table.get("title", ""), table.get("header", [])
        if not header:
            continue
        source = f"table_{table.get('id', '')}"
        for row in table.get("cell", []):
            if len(row) == len(header):
                cells = " , ".join(f"[H] {h}: {v}" for h, v in zip(map(str, header), map(str, row)))
                yield title, source, f"{title} [SEP] {cells}"


@ADAPTERS.register
class MtRaig(Adapter):
    """MT-RAIG Bench's tables and multi-table questions, serialized as the ARM reproduction does."""

    name = "mt_raig"
    description = "MT-RAIG Bench (KWONDU/mt-raig) as the ARM reproduction serializes it: rows of each table"
    Params = MtRaigParams

    def files(self, params: MtRaigParams) -> list[FileSpec]:
        base = f"https://raw.githubusercontent.com/KWONDU/mt-raig/{COMMIT}/mt_raig_bench"
        return [FileSpec(name=name, url=f"{base}/{Path(name).name}") for name in (TABLES, QUESTIONS)]

    def objects(self, raw: Path, params: MtRaigParams) -> Iterator[CorpusObject]:
        positions: dict[str, int] = {}
        for title, source, text in _rows(read_json_list(raw / TABLES, WHAT)):
            doc = f"{title}_{source}"
            positions[doc] = positions.get(doc, -1) + 1
            yield CorpusObject(text=text, doc_id=doc, page_title=str(title), source=source, modality="table",
                               position=positions[doc])

    def queries(self, raw: Path, params: MtRaigParams) -> Iterator[Query]:
        titles = {source: title for title, source, _ in _rows(read_json_list(raw / TABLES, WHAT)) if title}
        for i, entry in enumerate(read_json_list(raw / QUESTIONS, WHAT)):
            gold = {f"{titles[f'table_{t}']}_table_{t}" for t in entry.get("gold_table_id_set", [])
                    if f"table_{t}" in titles}
            yield Query(query_id=str(i), text=str(entry.get("question", "")), gold_doc_ids=sorted(gold))
