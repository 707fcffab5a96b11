"""Keys follow content and code: what shapes an output changes exactly the keys below it,
and nothing else does (paths, names, devices, batch sizes)."""

from __future__ import annotations

import shutil

import pytest
import yaml

from rbench.flows.benchmark import benchmark, summary_of
from tests.conftest import CORPUS, QUERIES, tiny_dataset, write_jsonl

pytestmark = pytest.mark.usefixtures("prefect_server")  # one Prefect test server per session


def _run(tmp_path, datasets, retrievers, name="exp.yaml", **options) -> dict:
    path = tmp_path / name
    path.write_text(yaml.safe_dump({
        "store": str(tmp_path / "store"), "depth": 10, "subsample": {"size": 5}, "metrics": {"k": [1, 3]},
        "mlflow": {"experiment": "keys"}, "datasets": datasets, "retrievers": retrievers}))
    return benchmark(str(path), **options)


def _ran(result) -> set[tuple[str, str]]:
    return {(s.stage, s.label) for s in result.stages if s.status == "ran"}


def _keys(result) -> dict[tuple[str, str], str]:
    return {(s.stage, s.label): s.key for s in result.stages}


STATIC = {"name": "dense", "params": {"model": "static-64d"}}


def test_the_same_corpus_reached_two_ways_is_indexed_once(tmp_path, tiny_files):
    corpus, queries = tiny_files
    renamed = write_jsonl(tmp_path / "other.jsonl", [
        {"title": r["page_title"], "section": r["source"], "body": r["object"], "language": "English"} for r in CORPUS])
    other = tiny_dataset(renamed, queries, name="other")
    other["params"].update({"text_field": "body", "doc_id_fields": ["title", "section"], "title_field": "title",
                            "metadata_fields": ["language"]})
    result = _run(tmp_path, [tiny_dataset(corpus, queries), other], [{"name": "bm25s"}, STATIC])
    keys = _keys(result)
    assert keys[("prepare", "tiny")] != keys[("prepare", "other")]  # other fields, other metadata
    for index in ("tiny/bm25s", "tiny/dense:tokenlearn-static-64d"):
        twin = index.replace("tiny/", "other/")
        assert keys[("index", index)] == keys[("index", twin)]
        assert {("index", index), ("index", twin)} & _ran(result) != {("index", index), ("index", twin)}
    by_dataset = {name: sorted((m.retriever, m.metric, m.k, m.value) for m in result.metrics
                               if m.dataset == name) for name in ("tiny", "other")}
    assert by_dataset["tiny"] == by_dataset["other"] and by_dataset["tiny"]


def _report(tmp_path, run_id: str, *args: str) -> tuple[int, str]:
    import contextlib
    import io

    from rbench.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        code = main(["report", run_id, "--store", str(tmp_path / "store"), "--no-log", "--measures", "recall@3",
                     "--out", str(tmp_path / "report"), *args])
    return code, out.getvalue()


def test_report_of_one_dataset_prints_that_datasets_table_alone(tmp_path, tiny_files):
    """Issue 70, item 9: on the main of 6e8e733 ``report --dataset X`` still printed the other dataset's
    table ("0 tests")."""
    corpus, queries = tiny_files
    result = _run(tmp_path, [tiny_dataset(corpus, queries), tiny_dataset(corpus, queries, name="other")],
                  [{"name": "bm25s"}, {"name": "bm25s", "label": "bm25s-b", "params": {"b": 0.3}}])
    code, both = _report(tmp_path, result.mlflow_run_id)
    assert code == 0 and "tiny: mean over queries" in both and "other: mean over queries" in both, both[-2000:]
    code, one = _report(tmp_path, result.mlflow_run_id, "--dataset", "other")
    assert code == 0 and "other: mean over queries" in one and "tiny: mean over queries" not in one, one[-2000:]
    code, none = _report(tmp_path, result.mlflow_run_id, "--dataset", "nowhere")
    assert code == 2 and "dataset 'nowhere' is not in the runs given; they hold ['other', 'tiny']" in none


def test_moved_files_renamed_datasets_devices_and_batch_sizes_keep_every_key(tmp_path, tiny_files):
    corpus, queries = tiny_files
    first = _run(tmp_path, [tiny_dataset(corpus, queries)], [{"name": "bm25s"}, STATIC])
    moved = tmp_path / "elsewhere"
    moved.mkdir()
    shutil.move(corpus, moved / "c.jsonl")
    shutil.move(queries, moved / "q.jsonl")
    dense = {"name": "dense", "params": {"model": "static-64d", "device": "cpu", "batch_size": 7}}
    strict = {**tiny_dataset(moved / "c.jsonl", moved / "q.jsonl", name="renamed"), "max_missing_gold": 0.0}
    again = _run(tmp_path, [strict], [{"name": "bm25s", "label": "relabelled"}, dense], "again.yaml")
    assert _ran(again) == set()
    assert sorted(_keys(first).values()) == sorted(_keys(again).values())


def test_a_stricter_max_missing_gold_refuses_a_cached_table(tmp_path, tiny_files):
    corpus, queries = tiny_files
    one_lost = write_jsonl(tmp_path / "lost.jsonl", [{**QUERIES[0], "document_ids": ["Nowhere :: x"]}, *QUERIES[1:]])
    first = _run(tmp_path, [tiny_dataset(corpus, one_lost)], [{"name": "bm25s"}])
    assert ("prepare", "tiny") in _ran(first)
    strict = {**tiny_dataset(corpus, one_lost), "max_missing_gold": 0.1}
    state = _run(tmp_path, [strict], [{"name": "bm25s"}], "strict.yaml", return_state=True)
    assert state.is_failed() and "1 of 5 queries (20%)" in state.message and "allowed: 10%" in state.message


def test_code_versions_and_model_weights_change_exactly_the_keys_below_them(tmp_path, tiny_files, monkeypatch):
    import numpy as np
    from safetensors.numpy import load_file, save_file

    from rbench.dataset_adapters.jsonl import Jsonl
    from rbench.retrievers.bm25_sparse import BM25s
    from rbench.retrievers.models import MODELS, packaged_path

    corpus, queries = tiny_files
    model = tmp_path / "model"
    shutil.copytree(packaged_path(MODELS["tokenlearn-static-64d"]), model)
    datasets = [tiny_dataset(corpus, queries)]
    retrievers = [{"name": "bm25s"}, {"name": "dense", "params": {"model": str(model)}}]
    _run(tmp_path, datasets, retrievers)

    weights = load_file(model / "model.safetensors")
    save_file({k: (np.flip(v, axis=0).copy() if v.ndim == 2 else v) for k, v in weights.items()},
              str(model / "model.safetensors"))  # in this process: the new weights are seen without a restart
    new_weights = _run(tmp_path, datasets, retrievers)
    assert {stage for stage, _ in _ran(new_weights)} == {"encode", "index", "retrieve", "evaluate"}
    assert all(label.startswith("tiny/dense") for _, label in _ran(new_weights))

    monkeypatch.setattr(BM25s, "version", BM25s.version + 1)
    new_search = _run(tmp_path, datasets, retrievers)
    assert _ran(new_search) == {("retrieve", "tiny/bm25s"), ("evaluate", "tiny/bm25s")}

    monkeypatch.setattr(Jsonl, "version", Jsonl.version + 1)
    new_adapter = _run(tmp_path, datasets, retrievers)
    assert ("download", "tiny") not in _ran(new_adapter) and ("prepare", "tiny") in _ran(new_adapter)
    # the adapter's output is unchanged, so the corpus and query digests (and all below) are too
    assert _ran(new_adapter) == {("prepare", "tiny")}


def test_changed_queries_rerun_only_what_reads_them(tmp_path, tiny_files):
    corpus, queries = tiny_files
    datasets = [tiny_dataset(corpus, queries)]
    _run(tmp_path, datasets, [{"name": "bm25s"}])
    write_jsonl(queries, [{**q, "query": q["query"] + " please"} if q["query_id"] == "q1" else q for q in QUERIES])
    changed = _run(tmp_path, datasets, [{"name": "bm25s"}])
    assert _ran(changed) == {("download", "tiny"), ("prepare", "tiny"), ("subsample", "tiny"),
                             ("retrieve", "tiny/bm25s"), ("evaluate", "tiny/bm25s")}  # the index is kept


def _damage_the_middle(folder, name: str) -> None:
    """Zero the second half of ``folder/name`` and make its manifest's fast fingerprint (size and ends) match
    again, as damage in the middle of a large file leaves it."""
    import json

    from rbench.core.hashing import fast_fingerprint

    path = folder / name
    data = bytearray(path.read_bytes())
    data[len(data) // 2:] = bytes(len(data) - len(data) // 2)
    path.write_bytes(bytes(data))
    manifest = json.loads((folder / "_manifest.json").read_text())
    manifest["files"][name]["fast"] = fast_fingerprint(path)
    (folder / "_manifest.json").write_text(json.dumps(manifest))


def test_a_cached_evaluation_damaged_in_the_middle_never_reaches_mlflow_or_the_summary(tmp_path, tiny_files):
    """Issue 81, item 1: on main a bit flipped in the middle of a cached evaluate artifact's run.trec (size kept)
    was copied into MLflow and handed out by `export`, and `show --measures` scored it. Now the pair fails with
    DamagedArtifact naming the repair; its damaged file is logged nowhere; the clean pair is logged as before."""
    import mlflow

    corpus, queries = tiny_files
    datasets = [tiny_dataset(corpus, queries)]
    clean = _run(tmp_path, datasets, [{"name": "bm25s"}, {"name": "bm25"}])
    evaluation = tmp_path / "store" / "evaluate" / _keys(clean)[("evaluate", "tiny/bm25s")]
    _damage_the_middle(evaluation, "run.trec")
    again = summary_of(_run(tmp_path, datasets, [{"name": "bm25s"}, {"name": "bm25"}], name="again.yaml",
                            return_state=True))
    assert _ran(again) == set()  # every stage a cache hit: only the full check sees the damage
    (failure,) = again.failures
    assert (failure.dataset, failure.retriever) == ("tiny", "bm25s")
    assert "DamagedArtifact" in failure.error and str(evaluation) in failure.error
    assert "rbench verify --remove" in failure.error
    assert {m.retriever for m in again.metrics} == {"bm25"}
    client = mlflow.MlflowClient(again.tracking_uri)
    children = client.search_runs([client.get_run(again.mlflow_run_id).info.experiment_id],
                                  f"tags.mlflow.parentRunId = '{again.mlflow_run_id}'")
    assert [c.data.tags["rbench.retriever"] for c in children] == ["bm25"]


def test_a_damaged_index_never_becomes_a_result_and_verify_remove_repairs_it(tmp_path, tiny_files, capsys):
    """Issue 68, A/A': a stored bm25s index damaged where a cache hit's fingerprint does not look (its
    manifest's fast fingerprint made to match, as for bytes in the middle of a large file), then a run
    needing it under a new key (another depth). On the main of 6e8e733 that run ended rc 0 with the
    damaged index's numbers, logged and cached, and `verify --remove` left what was built from it."""
    import json

    from rbench.cli import main

    corpus, queries = tiny_files
    datasets, bm25s = [tiny_dataset(corpus, queries)], [{"name": "bm25s"}]
    clean = _run(tmp_path, datasets, bm25s)
    index = tmp_path / "store" / "index" / _keys(clean)[("index", "tiny/bm25s")]
    files = json.loads((index / "_manifest.json").read_text())["files"]
    name = max(files, key=lambda n: files[n]["size"])
    _damage_the_middle(index, name)

    deeper = tmp_path / "deeper.yaml"
    damaged = _run(tmp_path, datasets, bm25s, name="deeper.yaml")  # depth 10 again: every stage cached
    assert _ran(damaged) == set()
    spec = yaml.safe_load(deeper.read_text())
    deeper.write_text(yaml.safe_dump({**spec, "depth": 20}))
    failed = summary_of(benchmark(str(deeper), return_state=True))
    (failure,) = failed.failures
    assert "DamagedArtifact" in failure.error and "rbench verify --remove" in failure.error
    assert str(index) in failure.error and failed.metrics == ()

    assert main(["verify", "--store", str(tmp_path / "store"), "--remove"]) == 0
    out = capsys.readouterr().out
    assert f"index/{index.name}: damaged {name}" in out and "built from index/" in out
    repaired = benchmark(str(deeper))
    assert ("index", "tiny/bm25s") in _ran(repaired)
    assert sorted(repaired.metrics, key=str) == sorted(clean.metrics, key=str)  # k <= 3: depth 20 scores as 10
