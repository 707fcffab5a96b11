"""Evaluate stage: document-level metrics per query and macro-averaged, plus a TREC run file."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import pyarrow as pa
import pyarrow.parquet as pq

from rbench.config import MetricsConfig
from rbench.core.store import Artifact, Stage, write_atomic
from rbench.evaluation.metrics_per_query import evaluate_queries, macro_average
from rbench.evaluation.metrics_trec import standard_measures
from rbench.evaluation.runs import (
    dedup_documents,
    drop_excluded,
    to_qrels,
    to_trec,
    to_trec_qrels,
    trec_eval_order,
)
from rbench.results import PairResult


def build_evaluate(folder: Path, inputs: list[Artifact], config: MetricsConfig) -> dict:
    """Write ``per_query.parquet``, ``aggregate.parquet``, ``run.trec`` and ``qrels.trec``
    (document level; nDCG uses graded judgements where the dataset has them; a query's excluded
    documents, where the dataset has them, leave its ranking first; the qrels keep the documents
    judged not relevant, at grade 0)."""
    queries_artifact, run_artifact = inputs
    queries = pq.read_table(queries_artifact.file("queries.parquet"))
    gold = dict(zip(queries.column("query_id").to_pylist(), queries.column("gold_doc_ids").to_pylist()))
    grades = None
    if "gold_grades" in queries.column_names:
        grades = {q: dict(zip(gold[q], g)) for q, g in zip(gold, queries.column("gold_grades").to_pylist()) if g}
    run = pq.read_table(run_artifact.file("run.parquet"), columns=["query_id", "doc_id", "rank", "score"])
    ranking = dedup_documents(zip(*(run.column(i).to_pylist() for i in range(4))))
    if config.ties == "trec_eval":
        ranking = trec_eval_order(ranking)
    nonrelevant = {}
    if "nonrelevant_doc_ids" in queries.column_names:
        nonrelevant = {q: n for q, n in zip(gold, queries.column("nonrelevant_doc_ids").to_pylist()) if n}
    excluded = {}
    if "excluded_doc_ids" in queries.column_names:
        excluded = {q: e for q, e in zip(gold, queries.column("excluded_doc_ids").to_pylist()) if e}
    ranking, dropped = drop_excluded(ranking, excluded)
    rows = evaluate_queries(ranking, gold, config.k, config.precision_denominator, config.recall_denominator, grades)
    rows += standard_measures(ranking, gold, config.k, config.standard)
    aggregate = macro_average(rows)
    pq.write_table(pa.Table.from_pylist(rows), folder / "per_query.parquet")
    pq.write_table(pa.Table.from_pylist(aggregate), folder / "aggregate.parquet")
    write_atomic(folder / "run.trec", to_trec(ranking, "rbench"))
    write_atomic(folder / "qrels.trec", to_trec_qrels(to_qrels(gold, grades, nonrelevant)))
    short = sum(1 for q in gold if len(ranking.get(q, [])) < max(config.k))
    found = queries.column("gold_found").to_pylist() if "gold_found" in queries.column_names else None
    return {
        **{f"recall@{a['k']}": round(a["value"], 4) for a in aggregate if a["metric"] == "recall"},
        "queries": len(gold), "queries_with_fewer_docs_than_max_k": short,
        **({"excluded_documents_dropped": dropped} if excluded else {}),
        **(ceilings(gold, dict(zip(gold, found))) if found is not None else {}),
    }


def ceilings(gold: dict[str, list[str]], found: dict[str, int]) -> dict:
    """What no retriever can pass where gold documents are not in the corpus, over the queries with
    gold: ``gold_outside_corpus`` (queries missing some), ``recall_ceiling`` (the mean share of a
    query's gold documents the corpus has: recall when all of them are found) and
    ``perfect_recall_ceiling`` (the share of queries whose gold the corpus has whole)."""
    shares = [found[q] / len(set(g)) for q, g in gold.items() if g]
    if not shares:
        return {}
    return {"gold_outside_corpus": sum(s < 1 for s in shares), "recall_ceiling": round(sum(shares) / len(shares), 4),
            "perfect_recall_ceiling": round(sum(s == 1 for s in shares) / len(shares), 4)}


EVALUATE = Stage("evaluate", 3, build_evaluate)


def read_aggregate(evaluation: Artifact) -> list[dict]:
    """The macro-averaged metrics of an evaluate artifact: ``{metric, k, value, queries}`` rows."""
    return pq.read_table(evaluation.file("aggregate.parquet")).to_pylist()


def read_ir_values(evaluation: Artifact, name: str) -> list[float]:
    """Per-query values of the ir_measures measure ``name`` on an evaluate artifact's run file and
    qrels (:func:`rbench.evaluation.metrics_files.file_values`)."""
    from rbench.dataset_adapters.qrels import read_qrels
    from rbench.evaluation.metrics_files import file_values
    from rbench.evaluation.runs import read_trec_run

    ranking = read_trec_run(evaluation.file("run.trec").read_text(encoding="utf-8"), str(evaluation.file("run.trec")))
    return list(file_values(ranking, read_qrels(evaluation.file("qrels.trec")), [(name, None)]).values())


def model_rows(results: Sequence[PairResult], k: int = 5) -> list[dict]:
    """One row per dense (model, dataset) result of ``rbench.flows.benchmark.run_stages``.

    Reads recall@k from the evaluation, queries/s from the run, passages/s and build time from
    the dense index summary, and the model from the retriever's params (no retriever is built).
    """
    rows = []
    for r in results:
        index_info = next((i.info for i in r.indexes if "passages_per_second" in i.info), None)
        if index_info is None:
            continue
        recall = next((a["value"] for a in read_aggregate(r.evaluation) if a["metric"] == "recall" and a["k"] == k),
                      None)
        model = getattr(r.retriever.typed_params(), "model", None)
        rows.append({
            "dataset": r.dataset, "retriever": r.retriever.label, "model": model,
            f"recall@{k}": recall, "queries_per_second": r.run.info.get("queries_per_second") if r.run else None,
            "passages_per_second": index_info["passages_per_second"], "dim": index_info.get("dim"),
            "index_build_seconds": round((index_info.get("encode_seconds") or 0) + (index_info.get("build_seconds") or 0), 2),
        })
    return rows
