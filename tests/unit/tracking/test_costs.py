"""`rbench report`'s cost table counts a retriever's rewrite stage: decomposition's LLM calls are
made while rewriting, none while retrieving."""

from __future__ import annotations

from rbench.tracking.read import load_costs_and_traces


def test_the_rewrite_stage_costs_are_read_beside_the_retrieval_ones(tmp_path):
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(uri)
    experiment = client.create_experiment("costs")
    parent = client.create_run(experiment, run_name="exp")
    child = client.create_run(experiment, run_name="tiny/decompose", tags={
        "mlflow.parentRunId": parent.info.run_id, "rbench.dataset": "tiny", "rbench.retriever": "decompose"})
    for key, value in {"retrieve.llm_calls": 0, "retrieve.queries_per_second": 12.5, "rewrite.llm_calls": 6,
                       "rewrite.llm_prompt_tokens": 420, "rewrite1.llm_calls": 2, "rewrite.build_seconds": 3.0,
                       "index.llm_calls": 9, "recall_at_5": 0.5}.items():
        client.log_metric(child.info.run_id, key, value)
    for run in (child, parent):
        client.set_terminated(run.info.run_id)
    costs, traces = load_costs_and_traces(uri, ["latest"], "costs")
    assert {(c["name"], c["value"]) for c in costs} == {
        ("llm_calls", 0), ("queries_per_second", 12.5), ("rewrite.llm_calls", 6), ("rewrite.llm_prompt_tokens", 420),
        ("rewrite1.llm_calls", 2)}
    assert {(c["dataset"], c["retriever"]) for c in costs} == {("tiny", "decompose")} and traces == []
