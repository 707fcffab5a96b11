"""Checks on a prepared corpus and query set: what makes a benchmark meaningless is refused.

Computed with polars' streaming engine over the Parquet files, so the checks do not
hold the corpus in Python memory.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa

from rbench.core.errors import DataError

EXAMPLES = 5


def repeated_keys(keys: np.ndarray) -> np.ndarray:
    """The values that occur more than once in ``keys``, once each (``keys`` is sorted in place)."""
    keys.sort()
    return np.unique(keys[1:][keys[1:] == keys[:-1]])


def duplicate_ids(corpus: Path, keys: np.ndarray) -> pl.DataFrame:
    """The object ids of ``corpus`` that repeat, with their counts (``len``, most repeated
    first). ``keys`` holds each object's id as a 64-bit number (its first 16 hex digits): they
    are sorted in place, and only the ids whose number repeats are read back and counted."""
    repeated = repeated_keys(keys)
    return (pl.scan_parquet(corpus).select("object_id")
            .filter(pl.col("object_id").str.slice(0, 16).is_in([f"{k:016x}" for k in repeated.tolist()]))
            .group_by("object_id").len().filter(pl.col("len") > 1).sort(["len", "object_id"], descending=[True, False])
            .collect(engine="streaming"))


def row_hashes(batch: pa.RecordBatch, columns: list[str]) -> np.ndarray:
    """A 64-bit hash of each row's values in ``columns``, to find repeats without holding the
    values (polars' hash: the same within one process, not across versions)."""
    frame = pl.from_arrow(pa.table({c: batch.column(c) for c in columns}))
    return frame.select(pl.struct(*columns).hash()).to_series().to_numpy()


def validate(corpus: Path, queries: Path, dataset: str, empty_skipped: int, keys: np.ndarray,
             records: np.ndarray) -> tuple[dict, dict[str, int]]:
    """Report duplicate object ids (``keys``: see :func:`duplicate_ids`), repeated records
    (``records``: the :func:`row_hashes` of every object's document and text; both arrays are
    sorted in place), empty texts and queries whose gold documents are absent; and, per query
    with gold documents, how many of them the corpus has.

    Raises DataError when the corpus or the query set is empty, object ids repeat, every
    query's gold list is empty, or no query has a gold document in the corpus (the share a
    user allows is checked by :func:`check_missing_gold`, on built and reused tables alike).
    """
    objects = pl.scan_parquet(corpus)
    counts = objects.select(
        pl.len().alias("objects"), pl.col("doc_id").n_unique().alias("documents")
    ).collect(engine="streaming").row(0, named=True)
    duplicates = duplicate_ids(corpus, keys)
    records.sort()
    repeated = int(np.count_nonzero(records[1:] == records[:-1]))
    empty_gold = (pl.scan_parquet(queries).filter(pl.col("gold_doc_ids").list.len() == 0)
                  .select("query_id").collect(engine="streaming")["query_id"].to_list())
    docs = objects.select("doc_id").unique()
    gold = (pl.scan_parquet(queries).filter(pl.col("gold_doc_ids").list.len() > 0)
            .select("query_id", "gold_doc_ids").explode("gold_doc_ids").unique())
    found = (
        gold.join(docs.with_columns(pl.lit(True).alias("present")), left_on="gold_doc_ids", right_on="doc_id",
                  how="left")
        .group_by("query_id")
        .agg(pl.len().alias("gold"), pl.col("present").fill_null(False).sum().alias("found"),
             pl.col("gold_doc_ids").filter(pl.col("present").is_null()).alias("absent"))
        .sort("query_id")
        .collect(engine="streaming")
    )
    n_queries = pl.scan_parquet(queries).select(pl.len()).collect().item()
    none = found.filter(pl.col("found") == 0)
    partial = found.filter((pl.col("found") > 0) & (pl.col("found") < pl.col("gold")))
    report = {
        **counts,
        "queries": n_queries,
        "empty_texts_skipped": empty_skipped,
        "duplicate_object_ids": duplicates.height,
        "duplicate_records": repeated,
        "queries_with_empty_gold": len(empty_gold),
        "empty_gold_examples": empty_gold[:EXAMPLES],
        "duplicate_examples": duplicates.head(EXAMPLES)["object_id"].to_list(),
        "queries_without_gold_in_corpus": none.height,
        "queries_with_some_gold_missing": partial.height,
        "missing_gold_examples": [
            {"query_id": r["query_id"], "absent": r["absent"][:3]}
            for r in pl.concat([none, partial]).head(EXAMPLES).iter_rows(named=True)
        ],
    }
    _refuse(report, dataset)
    return report, dict(zip(found["query_id"].to_list(), found["found"].to_list()))


def _refuse(report: dict, dataset: str) -> None:
    if report["objects"] == 0:
        raise DataError(f"dataset {dataset!r} produced an empty corpus: check its files and field names")
    if report["queries"] == 0:
        raise DataError(f"dataset {dataset!r} has no queries: check its queries file")
    if report["duplicate_object_ids"]:
        raise DataError(
            f"dataset {dataset!r}: {report['duplicate_object_ids']} object ids repeat "
            f"(e.g. {report['duplicate_examples']}); an adapter emitted the same object twice"
        )
    if report["queries_with_empty_gold"] == report["queries"]:
        raise DataError(f"dataset {dataset!r}: all {report['queries']} queries have an empty gold list: "
                        "check the gold field of the queries file (for jsonl: gold_field)")
    if report["queries_without_gold_in_corpus"] == report["queries"]:
        raise DataError(
            f"dataset {dataset!r}: {report['queries']} of {report['queries']} queries have no gold document in the "
            f"corpus, e.g. {report['missing_gold_examples'][:2]}. Check that gold ids match the corpus doc ids "
            "(for jsonl: doc_id_fields, doc_id_separator and gold_field)"
        )


def check_missing_gold(report: dict, dataset: str, max_missing_gold: float) -> None:
    """Refuse a query set where more than ``max_missing_gold`` of the queries have no gold
    document in the corpus."""
    share = report["queries_without_gold_in_corpus"] / report["queries"]
    if share <= max_missing_gold:
        return
    raise DataError(
        f"dataset {dataset!r}: {report['queries_without_gold_in_corpus']} of {report['queries']} queries "
        f"({share:.0%}) have no gold document in the corpus (allowed: {max_missing_gold:.0%}), e.g. "
        f"{report['missing_gold_examples'][:2]}. Check that gold ids match the corpus doc ids "
        "(for jsonl: doc_id_fields, doc_id_separator and gold_field), or raise max_missing_gold"
    )
