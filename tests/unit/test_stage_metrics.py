"""Every numeric stat a stage reports reaches MLflow under the stage's name, with no allow-list."""

from __future__ import annotations

from pathlib import Path

from rbench.config import RetrieverConfig
from rbench.core.store import Artifact
from rbench.results import PairResult
from rbench.tracking.write import stage_metrics

BM25 = RetrieverConfig(name="bm25s")


def _artifact(stage: str, **info) -> Artifact:
    return Artifact(stage, "k" * 32, Path("/nowhere"), info)


def test_every_numeric_stat_is_kept_under_its_stage():
    result = PairResult(
        "d", BM25, run=_artifact("retrieve", queries=5, queries_with_fewer_than_depth=2, my_new_method_steps=7.5,
                                 note="text", failed=True, missing=None, nested={"a": 1, "b": "x"}),
        rewrites=(_artifact("rewrite", llm_calls=5), _artifact("rewrite", llm_calls=3)),
        indexes=(_artifact("index", build_seconds=1.25), _artifact("index", passages_per_second=90)),
        evaluation=_artifact("evaluate", **{"recall@5": 0.5, "queries": 5}),
    )
    assert stage_metrics(result) == {
        "retrieve.queries": 5, "retrieve.queries_with_fewer_than_depth": 2, "retrieve.my_new_method_steps": 7.5,
        "retrieve.nested.a": 1, "rewrite.llm_calls": 5, "rewrite1.llm_calls": 3, "index.build_seconds": 1.25,
        "index1.passages_per_second": 90, "evaluate.queries": 5,
    }  # the evaluation's recall@5 is the child run's recall_at_5: one name per metric


def test_a_pair_without_a_run_logs_what_it_has():
    pair = PairResult("d", BM25, _artifact("evaluate", queries=3, nan=float("nan")))
    assert stage_metrics(pair) == {"evaluate.queries": 3}
