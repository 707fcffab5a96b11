"""The GPU-cluster study configs of the ARM report: each validates as shipped, and runs end to end
on tiny fixtures of its datasets with small stand-ins for its models (static-64d for every
embedding model, a tiny cross-encoder for every reranker, SmolLM2 in process for every LLM
server, rbench's own prompt for ARM's), then lines up against its published table, where every stand-in is not comparable."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from mlflow.tracking import MlflowClient

from rbench.cli import main
from rbench.config import load_config
from rbench.flows.benchmark import benchmark
from tests.conftest import tiny_cross_encoder, write_jsonl
from tests.unit.datasets.test_adapters import write_target_text2sql

REPO = Path(__file__).resolve().parents[3]
STUDIES = {"arm-table6-gpu.yaml": "arm-report-table6", "arm-table4-gpu.yaml": "arm-report-table4",
           "arm-table9-gpu.yaml": "arm-report-table9"}
KEEP = {"ottqa", "bird"}  # of the nine ARM-release benchmarks, the two the tiny run keeps
SMOL = {"backend": "transformers", "model": "smollm2-135m", "threads": 1, "batch_size": 4}

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("prefect_server")]


def write_arm_release(raw: Path, benchmark: str) -> None:
    """Three tables of two rows each and one question, in the ARM release's layout (one question
    is enough to run every retriever; each more adds ARM's, ReAct's and decomposition's LLM calls)."""
    (raw / "assets/all_data/serialized_data").mkdir(parents=True, exist_ok=True)
    (raw / "assets/all_data/benchmarks").mkdir(parents=True, exist_ok=True)
    tables = {"Lions": ("rank", ["1", "2"]), "Tigers": ("stripes", ["many", "few"]), "Bears": ("weight", ["300", "90"])}
    write_jsonl(raw / f"assets/all_data/serialized_data/{benchmark}.jsonl", [
        {"object": f"{title} [SEP] [H] {column} : {value}", "page_title": title, "source": "table_0"}
        for title, (column, values) in tables.items() for value in values])
    (raw / f"assets/all_data/benchmarks/{benchmark}.json").write_text(json.dumps([
        {"query": "How heavy are bears?", "document_ids": ["Bears_table_0"]}]))


def stand_ins(value, cross_encoder: str):
    """The study's settings with each model replaced by its small stand-in, all else as shipped."""
    if isinstance(value, list):
        return [stand_ins(v, cross_encoder) for v in value]
    if not isinstance(value, dict):
        return value
    out = {k: stand_ins(v, cross_encoder) for k, v in value.items()}
    if out.get("name") == "dense":
        out["params"] = {"model": "static-64d"}
    if "model" in out and str(out["model"]).startswith("mixedbread-ai/"):
        out["model"] = cross_encoder
    return out


def _own_prompt(retriever: dict) -> dict:
    """rbench's own prompt where the study reads ARM's from ARM's repository (not here in CI; the reference
    run, tests/reference/ottqa_decomp.py, checks ARM's)."""
    prompt = retriever.get("params", {}).get("prompt", "")
    return {"prompt": retriever["name"]} if prompt.startswith("arm:") else {}


@pytest.mark.parametrize("study", sorted(STUDIES))
def test_a_gpu_study_validates_and_runs_on_tiny_fixtures_with_stand_ins(tmp_path, study):
    shipped = load_config(REPO / "configs" / "studies" / study)  # as shipped: every model id and setting valid
    raw = yaml.safe_load((REPO / "configs" / "studies" / study).read_text())
    mirror = tmp_path / "mirror"
    for d in raw["datasets"]:
        if d.get("adapter") == "arm" and d["name"] in KEEP:
            write_arm_release(mirror, d["params"]["benchmark"])
    if any(d.get("adapter") == "target" for d in raw["datasets"]):
        write_target_text2sql(mirror, "spider", "test", {
            "database_id": ["zoo", "zoo", "zoo"], "table_id": ["lions", "tigers", "keepers"],
            "table": [[["name", "rank"], ["Leo", "1"]], [["name", "stripes"], ["Tia", "many"]],
                      [["keeper", "age"], ["Ann", "31"]]],
            "context": [{}] * 3},
            {"query_id": ["q2"], "query": ["How old is the keeper?"], "database_id": ["zoo"],
             "table_id": ["keepers"], "answer": ["31"]})
    raw["datasets"] = [d for d in raw["datasets"] if d.get("adapter") != "arm" or d["name"] in KEEP]
    raw = stand_ins(raw, tiny_cross_encoder(tmp_path / "ce"))
    raw["llms"] = {name: {**SMOL, **{k: v for k, v in llm.items() if k == "context_tokens"}}
                   for name, llm in raw.get("llms", {}).items()}
    raw["retrievers"] = [{**r, "params": {**r.get("params", {}), "max_tokens": 24, **_own_prompt(r)}}
                         if r["name"] in ("decompose", "react", "arm") else r for r in raw["retrievers"]]
    raw.update(store=str(tmp_path / "store"), mlflow={"experiment": study}, execution={"runner": "threads"})
    path = tmp_path / study
    path.write_text(yaml.safe_dump(raw))

    result = benchmark(str(path), mirror=str(mirror))
    datasets = {d.name for d in load_config(path).datasets}
    pairs = {(m.dataset, m.retriever) for m in result.metrics}
    assert pairs == {(d, r.label) for d in datasets for r in shipped.retrievers}
    client = MlflowClient(result.tracking_uri)
    children = client.search_runs([client.get_run(result.mlflow_run_id).info.experiment_id],
                                  f"tags.mlflow.parentRunId = '{result.mlflow_run_id}'")
    called: dict[str, float] = {}
    for child in children:  # SmolLM2 answered ReAct's and ARM's steps (fresh calls, or the same prompt's)
        name, metrics = child.data.params["retriever.name"], child.data.metrics
        if name in ("react", "arm"):
            assert metrics["retrieve.llm_calls"] + metrics["retrieve.llm_calls_cached"] > 0, child.info.run_name
            called[name] = called.get(name, 0) + metrics["retrieve.llm_calls"]
    assert all(calls > 0 for calls in called.values()), called
    if any(r.name == "decompose" for r in shipped.retrievers):  # decomposition is its own stage, shared by -D runs
        rewrites = [row for row in result.stages if row.stage == "rewrite" and row.status == "ran"]
        infos = [json.loads((tmp_path / "store" / "rewrite" / row.key / "_manifest.json").read_text())["info"]
                 for row in rewrites]
        assert infos and all(info["llm_calls"] > 0 for info in infos), infos

    against = STUDIES[study]
    assert main(["compare", result.mlflow_run_id, "--against", against, "--tracking-uri", result.tracking_uri,
                 "--trials", "200", "--out", str(tmp_path / "reproduction")]) == 0
    cells = json.loads((tmp_path / "reproduction" / f"{against}.json").read_text())["cells"]
    measured = [c for c in cells if c["measured"] is not None]
    assert measured and {c["run_dataset"] for c in measured} == datasets
    stand_in = [c for c in measured if c["system"] != "bm25"]
    assert stand_in and all(c["verdict"] == "not comparable" for c in stand_in)
