"""Configuration search: strategies, cached reuse of finished trials, and bad spaces."""

from __future__ import annotations

import pytest
import yaml

from rbench.config.search import Dimension, SearchConfig, load_search_config, propose
from rbench.core.errors import ConfigError
from rbench.flows.config_search import config_search
from tests.conftest import tiny_dataset

pytestmark = pytest.mark.usefixtures("prefect_server")  # one Prefect test server per session


def _config(tmp_path, corpus, queries, **search):
    path = tmp_path / f"search-{search.get('budget', 0)}-{search.get('strategy', 'x')}.yaml"
    path.write_text(yaml.safe_dump({
        "store": str(tmp_path / "store"), "depth": 10, "subsample": {"size": 5}, "metrics": {"k": [1, 3]},
        "mlflow": {"experiment": "search"}, "datasets": [tiny_dataset(corpus, queries)],
        "retrievers": [{"name": "bm25s"}],
        "search": {"retriever": "bm25s", "metric": "recall", "k": 3,
                   "space": {"k1": {"low": 1.2, "high": 2.0}, "b": {"low": 0.0, "high": 1.0}}, **search},
    }))
    return str(path)


def test_strategies_are_deterministic_and_bounded():
    space = {"x": Dimension(low=0, high=1), "n": Dimension(low=1, high=3, integer=True)}
    for strategy in ("grid", "random", "tpe"):
        cfg = SearchConfig(retriever="r", space=space, strategy=strategy, budget=4, grid_points=2)
        a = propose(cfg, lambda p: p["x"] + p["n"])
        b = propose(cfg, lambda p: p["x"] + p["n"])
        assert a == b and len(a) == 4
        assert all(0 <= p["x"] <= 1 and p["n"] in (1, 2, 3) for p, _ in a)
    grid = propose(SearchConfig(retriever="r", space=space, strategy="grid", budget=100, grid_points=2), lambda p: 0.0)
    # 2 grid points: the range ends (integers too, when there are more of them than points)
    assert [p for p, _ in grid] == [{"x": 0.0, "n": 1}, {"x": 0.0, "n": 3}, {"x": 1.0, "n": 1}, {"x": 1.0, "n": 3}]


def test_search_reuses_finished_trials(tmp_path, tiny_files):
    corpus, queries = tiny_files
    first = config_search(_config(tmp_path, corpus, queries, strategy="random", budget=3, seed=1))
    assert len(first.trials) == 3 and first.best["value"] == max(t["value"] for t in first.trials)
    # bm25s fixes k1 and b in its index: later trials build index, retrieve and evaluate only
    assert [t["stages_ran"] for t in first.trials[1:]] == [3, 3]
    larger = config_search(_config(tmp_path, corpus, queries, strategy="random", budget=5, seed=1))
    assert [t["params"] for t in larger.trials[:3]] == [t["params"] for t in first.trials]
    assert all(t["stages_ran"] == 0 for t in larger.trials[:3])
    assert all(t["stages_ran"] == 3 for t in larger.trials[3:])
    from mlflow.tracking import MlflowClient

    tags = MlflowClient(larger.tracking_uri).get_run(larger.mlflow_run_id).data.tags
    assert tags["rbench.kind"] == "search" and {"rbench.config_sha256", "rbench.device"} <= set(tags)


def test_bad_search_sections_are_named(tmp_path, tiny_files):
    corpus, queries = tiny_files
    with pytest.raises(ConfigError, match="space"):
        load_search_config(_config(tmp_path, corpus, queries, space={}))
    with pytest.raises(ConfigError, match="low <= high"):
        load_search_config(_config(tmp_path, corpus, queries, space={"k1": {"low": 2, "high": 1}}))
    with pytest.raises(ConfigError, match="search.retriever 'bm25' is not a retriever label"):
        load_search_config(_config(tmp_path, corpus, queries, retriever="bm25"))


def test_a_search_maximises_an_ir_measures_name_computed_on_each_trial(tmp_path, tiny_files):
    """`metric: nDCG@3` (ir_measures' name): each trial's value is ir_measures' mean on that trial's
    run file and qrels; k is then unused (not among metrics.k here). A name that is neither is
    refused with both forms."""
    import ir_measures

    from rbench.core.store import Store
    from rbench.dataset_adapters.qrels import read_qrels
    from tests.conftest import read_trec_run

    corpus, queries = tiny_files
    result = config_search(_config(tmp_path, corpus, queries, strategy="grid", budget=2, grid_points=2,
                                   metric="nDCG@3", k=7, space={"k1": {"low": 0.9, "high": 1.5}}))
    evaluations = [a for a in Store(tmp_path / "store").artifacts() if a[0] == "evaluate"]
    assert len(result.trials) == 2 and len(evaluations) == 2
    expected = set()
    for _, key in evaluations:
        folder = tmp_path / "store" / "evaluate" / key
        qrels, run = read_qrels(folder / "qrels.trec"), read_trec_run(folder / "run.trec")
        values = [m.value for m in ir_measures.iter_calc([ir_measures.nDCG @ 3], qrels, run)]
        expected.add(round(sum(values) / len(qrels), 10))
    assert {round(t["value"], 10) for t in result.trials} == expected
    with pytest.raises(ConfigError, match="neither one of rbench's .* nor an ir_measures name"):
        load_search_config(_config(tmp_path, corpus, queries, metric="XYZ@3"))
