"""ReAct and ARM through the benchmark flow: the n-gram index is a cached index stage, the
agents' traces are kept with the run and logged, and the report shows costs and traces."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest
import yaml

from rbench.flows.benchmark import benchmark
from tests.conftest import tiny_dataset

SMOL = {"backend": "transformers", "model": "smollm2-135m"}
STATIC = {"name": "dense", "params": {"model": "static-64d"}}


pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("prefect_server")]  # one Prefect test server per session


def test_agents_run_in_the_flow_with_traces_costs_and_a_report(tmp_path, tiny_files):
    from rbench.evaluation.report import write_report
    from rbench.evaluation.report_experiment import experiment_tables
    from rbench.tracking.read import load_costs_and_traces, load_results

    corpus, queries = tiny_files
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump({
        "name": "agents", "store": str(tmp_path / "store"), "depth": 10, "subsample": {"size": 3},
        "metrics": {"k": [1, 3]}, "mlflow": {"experiment": "agents"}, "execution": {"runner": "sequential"},
        "llms": {"smol": SMOL}, "datasets": [tiny_dataset(corpus, queries)],
        "retrievers": [
            {"name": "bm25s"},
            {"name": "react", "params": {"llm": "smol", "max_iterations": 2, "k_search": 2, "max_tokens": 48,
                                         "thought_chars": 60}},
            {"name": "arm", "params": {"llm": "smol", "dense": STATIC, "max_keywords": 3, "keyword_rephrasing_beams": 2,
                                       "corpus_ngram_max_len": 3, "max_ngrams": 5, "alignment_retrieval_k": 3,
                                       "query_retrieval_k": 3, "mip_k_select": 3, "mip_candidates": 6,
                                       "max_tokens": 32}}]}))
    result = benchmark(str(path))
    stages = {(s.stage, s.label): s for s in result.stages}
    assert stages[("index", "tiny/ngrams")].status == "ran"
    react_run = tmp_path / "store" / "retrieve" / stages[("retrieve", "tiny/react")].key
    traces = pq.read_table(react_run / "traces.parquet").to_pylist()
    assert len(traces) == 3 and all('"turns"' in t["trace"] for t in traces)
    assert not (tmp_path / "store" / "retrieve" / stages[("retrieve", "tiny/arm")].key / "traces.parquet").exists()

    uri = f"sqlite:///{tmp_path / 'store' / 'mlflow.db'}"
    _, rows, scores = load_results(uri, ["latest"], "agents", per_query=True)
    costs, sampled = load_costs_and_traces(uri, ["latest"], "agents", traces_per_run=2)
    names = {(c["retriever"], c["name"]) for c in costs}
    assert {("arm", "arm_seconds_selection"), ("arm", "arm_mip_optimal"), ("react", "react_turns_mean"),
            ("react", "queries_per_second")} <= names
    assert len(sampled) == 2 and {t["retriever"] for t in sampled} == {"react"}
    md, _ = write_report("agents", rows, experiment_tables(scores, [("recall", 3)], trials=200),
                         tmp_path / "report", costs=costs, traces=sampled)
    text = md.read_text()
    assert "## Cost and time per retriever" in text and "arm_seconds_alignment" in text
    assert "## Agent traces" in text and "Thought:" in text

    again = benchmark(str(path))  # every stage cached, the LLM asked nothing
    assert {s.status for s in again.stages} == {"cached"}
