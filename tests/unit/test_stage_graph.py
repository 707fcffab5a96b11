"""The stage graph without Prefect (issue 58, item 7; issue 67, item 1): the experiment's plan
(:func:`plan_experiment`) is submitted to a fake submitter that records each submission and fails
the stages it is told to, so that index sharing, shard counts, repeated labels and which stage a
failed pair names are checked in milliseconds; the system tests keep one case each for what needs
Prefect itself."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from rbench.config import parse_config
from rbench.core.store import Artifact
from rbench.orchestration.plan import plan_experiment, run_plan
from rbench.results import Failure, StageRow
from tests.conftest import tiny_dataset

MODEL = "tiny/dense:tokenlearn-static-64d"  # the label of a static-64d index on dataset "tiny"
DENSE = {"name": "dense", "params": {"model": "static-64d"}}


@dataclass
class Handle:
    """A submitted stage: its artifact, unless it (or a stage it reads) failed."""

    stage: str
    label: str
    inputs: list
    gpu: bool
    failed: bool = False
    options: dict = field(default_factory=dict)


class FakeSubmitter:
    """Runs nothing: every stage succeeds at once except those in ``failing`` (``(stage, label)``),
    whose dependants are skipped, as Prefect reports them."""

    def __init__(self, failing: set[tuple[str, str]] = frozenset()):
        self.failing, self.rows, self.handles = failing, [], []

    def submit(self, stage, inputs, config, label, gpu=False, key=None, **options) -> Handle:
        upstream = any(isinstance(i, Handle) and i.failed for i in inputs)
        here = (stage.name, label) in self.failing
        handle = Handle(stage.name, label, list(inputs), gpu, upstream or here, options)
        self.handles.append(handle)
        self.rows.append(StageRow(stage=stage.name, label=label, key=key, seconds=None, error="boom" if here else None,
                                  status="failed" if here else "skipped" if upstream else "ran"))
        return handle

    def artifact(self, handle: Handle) -> Handle | None:
        return None if handle.failed else handle

    def report(self) -> list[StageRow]:
        return list(self.rows)

    def submitted(self, stage: str) -> list[str]:
        return [h.label for h in self.handles if h.stage == stage]


@pytest.fixture
def corpus(tmp_path) -> Path:
    """A corpus of 600 rows (only its row count is read)."""
    path = tmp_path / "corpus.parquet"
    pq.write_table(pa.table({"object_id": [f"o{i}" for i in range(600)]}), path)
    return path


def _graph(tmp_path, tiny_files, corpus, retrievers, failing=frozenset(), **execution):
    files = tiny_files
    cfg = parse_config({"store": str(tmp_path / "store"), "depth": 10, "metrics": {"k": [1, 3]},
                        "datasets": [tiny_dataset(*files)], "retrievers": retrievers,
                        "execution": {"shard_size": 150, **execution}})
    sub = FakeSubmitter(set(failing))
    prepared = Artifact("prepare", "k", corpus.parent, {"digests": {"corpus": "c", "queries": "q"}})
    results, failures, report = run_plan(plan_experiment(cfg, {"tiny": prepared}), sub)
    return sub, results, failures, report


def test_each_index_is_built_once_per_dataset_whoever_searches_it(tmp_path, tiny_files, corpus):
    fusion = {"name": "fusion", "params": {"retrievers": [{"name": "bm25s"}, DENSE]}}
    sub, results, failures, _ = _graph(tmp_path, tiny_files, corpus, [{"name": "bm25s"}, DENSE, fusion])
    assert sub.submitted("index") == ["tiny/bm25s", MODEL]  # each for two retrievers
    assert sub.submitted("retrieve") == ["tiny/bm25s", "tiny/dense", "tiny/fusion"]
    assert not failures and [r.retriever.label for r in results] == ["bm25s", "dense", "fusion"]
    fused = next(r for r in results if r.retriever.label == "fusion")
    assert [i.label for i in fused.indexes] == ["tiny/bm25s", MODEL]  # the very handles the others read


def test_a_dense_index_is_encoded_in_shards_of_shard_size_rows(tmp_path, tiny_files, corpus):
    sub, *_ = _graph(tmp_path, tiny_files, corpus, [DENSE])
    assert sub.submitted("encode") == [f"{MODEL}[{a}:{a + 150}]" for a in (0, 150, 300, 450)]
    (index,) = [h for h in sub.handles if h.stage == "index"]
    assert [i.label for i in index.inputs[1:]] == sub.submitted("encode")  # the index reads every shard
    whole, *_ = _graph(tmp_path, tiny_files, corpus, [DENSE], shard_size=1000)
    assert whole.submitted("encode") == [f"{MODEL}[0:600]"]


def test_two_indexes_under_one_name_are_told_apart(tmp_path, tiny_files, corpus):
    hnsw = {"name": "dense", "label": "dense-hnsw", "params": {"model": "static-64d", "index": "hnsw"}}
    sub, *_ = _graph(tmp_path, tiny_files, corpus, [DENSE, hnsw], shard_size=1000)
    assert sub.submitted("index") == [MODEL, f"{MODEL}#2"]
    assert sub.submitted("encode") == [f"{MODEL}[0:600]", f"{MODEL}#2[0:600]"]


def test_a_failed_pair_names_the_first_stage_that_failed_under_it(tmp_path, tiny_files, corpus):
    fusion = {"name": "fusion", "params": {"retrievers": [{"name": "bm25s"}, DENSE]}}
    shard = f"{MODEL}[150:300]"
    sub, results, failures, report = _graph(tmp_path, tiny_files, corpus, [{"name": "bm25s"}, DENSE, fusion],
                                            failing={("encode", shard)})
    assert [r.retriever.label for r in results] == ["bm25s"]  # the pair that needs no dense index
    assert failures == [Failure("tiny", r, f"encode[{shard}]: boom")
                        for r in ("dense", "fusion")]
    skipped = {(row.stage, row.label) for row in report if row.status == "skipped"}
    assert ("index", MODEL) in skipped and ("evaluate", "tiny/fusion") in skipped


def test_every_stage_reads_the_stages_before_it(tmp_path, tiny_files, corpus):
    """Each node of the plan gets its inputs' handles: prepare reads the download (the plan's data
    nodes come from :func:`data_nodes`, which knows no positions), and so on down to evaluate."""
    sub, *_ = _graph(tmp_path, tiny_files, corpus, [{"name": "bm25s"}])
    inputs = {h.stage: [i.stage for i in h.inputs] for h in sub.handles}
    assert inputs == {"download": [], "prepare": ["download"], "subsample": ["prepare"], "index": ["prepare"],
                      "retrieve": ["prepare", "subsample", "index"], "evaluate": ["subsample", "retrieve"]}


def test_a_failed_prepare_fails_every_pair_of_its_dataset_by_name(tmp_path, tiny_files, corpus):
    sub, results, failures, report = _graph(tmp_path, tiny_files, corpus, [{"name": "bm25s"}, DENSE],
                                       failing={("prepare", "tiny")})
    assert not results and {row.status for row in report if row.stage in ("index", "retrieve")} == {"skipped"}
    assert failures == [Failure("tiny", r, "prepare[tiny]: boom") for r in ("bm25s", "dense")]


def test_a_run_warms_up_only_the_indexes_it_will_build_here(tmp_path, tiny_files, monkeypatch):
    """``warm_up_index_builds`` (a Lucene worker starts while the flow's server does): each index
    the run will build in this process once, none that is in the store, none built from encode
    shards, none on a cluster's workers."""
    from rbench.core.store import Store
    from rbench.orchestration.graph import check_data, warm_up_index_builds
    from rbench.retrievers.base import RETRIEVERS
    from rbench.tasks.index import INDEX, IndexConfig

    warmed = []
    for name in ("bm25s", "bm25", "dense"):
        monkeypatch.setattr(RETRIEVERS.get(name), "warm_up", lambda self: warmed.append(self.name))
    fusion = {"name": "fusion", "params": {"retrievers": [{"name": "bm25s"}, {"name": "bm25"}]}}

    def config(**execution):
        return parse_config({"store": str(tmp_path / "store"), "datasets": [tiny_dataset(*tiny_files)],
                             "retrievers": [{"name": "bm25s"}, {"name": "bm25"}, DENSE, fusion],
                             "execution": execution})

    cfg = config()
    assert warm_up_index_builds(plan_experiment(cfg)) == 0 and warmed == []  # nothing prepared yet: no key to look up
    corpora = check_data(cfg).corpora
    assert warm_up_index_builds(plan_experiment(cfg, corpora)) == 2 and warmed == ["bm25s", "bm25"]  # fusion's too
    warmed.clear()
    (corpus,) = corpora.values()
    INDEX.run(Store(cfg.store), [corpus], IndexConfig.all_of(cfg.retrievers[0])[0])  # bm25s's index is stored now
    assert warm_up_index_builds(plan_experiment(cfg, corpora)) == 1 and warmed == ["bm25"]
    warmed.clear()
    assert warm_up_index_builds(plan_experiment(config(runner="dask"), corpora)) == 0 and warmed == []


def test_each_failed_pair_names_its_own_failure_not_an_earlier_pairs(tmp_path, tiny_files, corpus):
    """Issue 67: on the main of 6e8e733 dropping the filter to the pair's own stages passed every test."""
    sub, results, failures, _ = _graph(tmp_path, tiny_files, corpus, [{"name": "bm25s"}, DENSE],
                                       failing={("index", "tiny/bm25s"), ("retrieve", "tiny/dense")})
    assert not results
    assert failures == [Failure("tiny", "bm25s", "index[tiny/bm25s]: boom"),
                        Failure("tiny", "dense", "retrieve[tiny/dense]: boom")]
