"""The whole flow on a tiny dataset: which stages run, which are cached, and why."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
import yaml

import rbench
from rbench.flows.benchmark import benchmark
from tests.conftest import CORPUS, QUERIES, tiny_dataset, write_jsonl

pytestmark = pytest.mark.usefixtures("prefect_server")  # one Prefect test server per session


def _config(tmp_path, corpus, queries, model="static-64d", standard=("map", "success", "rprec")):
    cfg = {
        "name": "tiny", "store": str(tmp_path / "store"), "depth": 10,
        "subsample": {"size": 4, "seed": 0}, "metrics": {"k": [1, 3], "standard": list(standard)},
        "mlflow": {"experiment": "tiny", "headline": ["recall", "ndcg", "map@all"]},
        "datasets": [tiny_dataset(corpus, queries)],
        "retrievers": [{"name": "bm25"}, {"name": "dense", "params": {"model": model}}],
    }
    path = tmp_path / f"exp-{model.replace('/', '_')}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return str(path)


def _status(result) -> dict[tuple[str, str], str]:
    return {(s.stage, s.label): s.status for s in result.stages}


@pytest.fixture(scope="module")
def finished(tmp_path_factory, prefect_server) -> tuple[Path, dict]:
    """The tiny bm25 + static-64d run, with trec_eval's standard measures, built once for the
    tests that read it: its folder (with ``store``) and its result. A test that changes a store
    works on :func:`_copy`."""
    folder = tmp_path_factory.mktemp("finished")
    corpus = write_jsonl(folder / "corpus.jsonl", CORPUS)
    queries = write_jsonl(folder / "queries.jsonl", QUERIES)
    result = benchmark(_config(folder, corpus, queries))
    assert set(_status(result).values()) == {"ran"}
    return folder, result


def _copy(store: Path, to: Path) -> None:
    """A copy of ``store``'s artifacts and Prefect records at ``to`` (its MLflow database, whose
    artifact folder names the original, is left behind: the copy makes its own)."""
    shutil.copytree(store, to, ignore=shutil.ignore_patterns("mlflow.db", "mlflow-artifacts"))


def test_caching_end_to_end(tmp_path, tiny_files):
    corpus, queries = tiny_files
    config = _config(tmp_path, corpus, queries)

    first = benchmark(config)
    # download, prepare, subsample; bm25 index, retrieve, evaluate; dense encode (one shard), index, retrieve, evaluate
    assert set(_status(first).values()) == {"ran"} and len(first.stages) == 3 + 3 + 4
    recall = {(m.retriever, m.k): m.value for m in first.metrics if m.metric == "recall"}
    assert recall[("bm25", 3)] > 0.5

    again = benchmark(config)
    assert set(_status(again).values()) == {"cached"}
    assert again.metrics == first.metrics

    # only the embedding model changes: dense index/retrieve/evaluate rerun, nothing else
    other_model = _config(tmp_path, corpus, queries, model="sentence-transformers/all-MiniLM-L6-v2")
    changed = benchmark(other_model)
    ran = {key for key, status in _status(changed).items() if status == "ran"}
    assert ran == {("encode", "tiny/dense:all-MiniLM-L6-v2[0:6]"), ("index", "tiny/dense:all-MiniLM-L6-v2"),
                   ("retrieve", "tiny/dense"), ("evaluate", "tiny/dense")}

    # a deleted file in an artifact: that stage rebuilds, under the same key; what reads it follows its
    # content: a Lucene index is not byte-reproducible (segment ids), so the run is searched again, and
    # comes back byte-identical, so its evaluation stays cached
    bm25_index = next(s for s in again.stages if s.stage == "index" and s.label == "tiny/bm25")
    index_dir = tmp_path / "store" / "index" / bm25_index.key
    for f in index_dir.rglob("*"):
        if f.is_file() and f.name != "_manifest.json":
            f.unlink()
            break
    rebuilt = benchmark(config)
    assert {k for k, s in _status(rebuilt).items() if s == "ran"} == {("index", "tiny/bm25"), ("retrieve", "tiny/bm25")}
    assert rebuilt.metrics == first.metrics

    # a corrupted byte in the evaluation output is detected and rebuilt
    evaluation = next(s for s in again.stages if s.stage == "evaluate" and s.label == "tiny/dense")
    trec = tmp_path / "store" / "evaluate" / evaluation.key / "run.trec"
    data = bytearray(trec.read_bytes())
    data[0] ^= 1
    trec.write_bytes(bytes(data))
    repaired = benchmark(config)
    assert {k for k, s in _status(repaired).items() if s == "ran"} == {("evaluate", "tiny/dense")}
    assert repaired.metrics == first.metrics

    # one changed byte in the corpus reruns everything that reads the corpus; the query
    # subsample reads only the queries, whose content did not change
    corpus.write_text(corpus.read_text().replace("lava", "Lava", 1))
    touched = benchmark(config)
    assert {k for k, s in _status(touched).items() if s == "cached"} == {("subsample", "tiny")}


def test_mlflow_has_the_printed_numbers(finished, tmp_path):
    from mlflow.tracking import MlflowClient

    from rbench.tracking.write import group_filter

    _, result = finished
    client = MlflowClient(tracking_uri=result.tracking_uri)
    parent = client.get_run(result.mlflow_run_id)
    children = client.search_runs(
        [parent.info.experiment_id], filter_string=f"tags.mlflow.parentRunId = '{parent.info.run_id}'"
    )
    assert {c.info.run_name for c in children} == {"tiny/bm25", "tiny/dense"}
    grouped = client.search_runs([parent.info.experiment_id], group_filter(parent.info.run_id))  # the printed link's
    assert {r.info.run_name for r in grouped} == {parent.info.run_name, "tiny/bm25", "tiny/dense"}  # issue 81, item 7
    flow_run_name = parent.data.tags["prefect.flow_run_name"]  # on 4abb1ba every parent was named after its file
    assert parent.info.run_name == flow_run_name and re.fullmatch(r"tiny-\d{8}-\d{6}", flow_run_name), flow_run_name
    assert parent.data.tags["rbench.experiment"] == "tiny"  # reports label the systems by it
    ran = [s for s in result.stages if s.status == "ran"]
    first_start = min(s.finished - s.seconds for s in ran) * 1000
    assert abs(parent.info.start_time - first_start) < 2  # MLflow's duration starts with the first stage
    for child in children:
        label = child.data.tags["rbench.retriever"]
        own = [s for s in ran if s.label in (f"tiny/{label}",) or s.stage == "index" and label in s.label]
        took = child.info.end_time - child.info.start_time
        assert took >= 1000 * max(s.seconds for s in own) - 2, (label, took, own)  # the stages' time
        assert child.info.end_time <= parent.info.end_time
        assert child.data.tags.get("mlflow.source.name") == parent.data.tags.get("mlflow.source.name")
    assert parent.data.tags.get("mlflow.user") and parent.data.tags.get("mlflow.source.type")  # as start_run tags
    experiment = client.get_experiment(parent.info.experiment_id)  # the UI opens it on its runs, not on traces
    assert experiment.tags["mlflow.experimentKind"] == "custom_model_development"
    assert parent.data.tags["prefect.flow_run_url"].startswith("http"), parent.data.tags  # never "None/..."
    headline = {(m.retriever, m.metric, m.k): m.value for m in result.metrics
                if m.metric in ("recall", "ndcg") or (m.metric, m.k) == ("map", 0)}  # mlflow.headline
    assert {k: v for k, v in parent.data.metrics.items() if k.startswith("tiny.")} == pytest.approx(
        {f"tiny.{r}.{metric}_at_{k}" if k else f"tiny.{r}.{metric}": v
         for (r, metric, k), v in headline.items()})  # runs compare at parent level
    assert {(m.metric, m.k) for m in result.metrics} >= {("map", 0), ("map", 3), ("success", 1),
                                                                   ("rprec", 0)}
    for child in children:
        label = child.data.tags["rbench.retriever"]
        for m in result.metrics:
            if m.retriever == label:
                name = f"{m.metric}_at_{m.k}" if m.k else m.metric  # map and rprec over the whole ranking
                assert child.data.metrics[name] == pytest.approx(m.value)
        artifacts = {a.path for a in client.list_artifacts(child.info.run_id)}
        assert {"per_query.parquet", "aggregate.parquet", "run.trec", "qrels.trec"} <= artifacts
        logged = Path(client.download_artifacts(child.info.run_id, "run.trec", str(tmp_path)))
        assert {line.split()[-1] for line in logged.read_text().splitlines()} == {label}  # the system's own tag
        assert child.data.params["retriever.name"] == label
        stats = child.data.metrics  # every numeric stat of the pair's stages, under the stage's name
        assert stats["retrieve.queries_with_fewer_than_depth"] == 4  # depth 10 on a 6-object corpus
        assert stats["retrieve.queries"] == 4 and stats["retrieve.rows"] > 0
        assert stats["evaluate.queries"] == 4 and "evaluate.queries_with_fewer_docs_than_max_k" in stats
        measures = {m.metric for m in result.metrics}  # one name per metric: no stage-prefixed copy
        copies = [k for k in stats if (m := re.match(r"^\w+\.([a-z_]+?)(?:_at_|_|@)\d+$", k)) and m.group(1) in measures]
        assert not copies and re.match(r"^\w+\.([a-z_]+?)(?:_at_|_|@)\d+$", "evaluate.recall_5").group(1) == "recall"
        assert any(k.startswith("index.") for k in stats)


def test_rbench_export_writes_named_run_files_that_pytrec_eval_scores_as_rbench(finished, tmp_path, capsys):
    from rbench.cli import main
    from rbench.dataset_adapters.qrels import read_qrels
    from tests.conftest import need, read_trec_run

    pytrec_eval = need("pytrec_eval")
    _, result = finished
    out = tmp_path / "export"
    assert main(["export", result.mlflow_run_id, "--tracking-uri", result.tracking_uri, "--out", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["tiny.bm25.per_query.tsv", "tiny.bm25.trec",
                                                     "tiny.dense.per_query.tsv", "tiny.dense.trec", "tiny.qrels"]
    qrels = read_qrels(out / "tiny.qrels")
    compared = 0
    for system in ("bm25", "dense"):
        assert {line.split()[-1] for line in (out / f"tiny.{system}.trec").read_text().splitlines()} == {system}
        run = read_trec_run(out / f"tiny.{system}.trec")
        scored = pytrec_eval.RelevanceEvaluator(qrels, {"recall.1,3", "ndcg_cut.3"}).evaluate(run)
        for m in result.metrics:
            name = {"recall": "recall", "ndcg": "ndcg_cut"}.get(m.metric)
            if m.retriever == system and name and m.k in (1, 3) and (name, m.k) != ("ndcg_cut", 1):
                theirs = sum(q[f"{name}_{m.k}"] for q in scored.values()) / len(qrels)
                assert theirs == pytest.approx(m.value), (system, m)
                compared += 1
    assert compared == 6  # recall@1, recall@3, nDCG@3 of each system


def test_cli_show_prints_the_logged_table(finished, capsys):
    """``show latest`` finds the run without being told its experiment (the config named it
    ``tiny``); ``runs`` lists it with its systems; an unknown run id is a named error."""
    from rbench.cli import main

    _, result = finished
    capsys.readouterr()
    recall3 = next(m.value for m in result.metrics
                   if m.retriever == "bm25" and m.metric == "recall" and m.k == 3)
    for experiment in (["--experiment", "tiny"], []):
        assert main(["show", "latest", "--tracking-uri", result.tracking_uri, *experiment]) == 0
        out = capsys.readouterr().out
        assert result.mlflow_run_id in out
        assert f"{recall3:.4f}" in out and "tiny / dense" in out
        assert "@all" in out and "rprec" in out
    assert main(["runs", "--tracking-uri", result.tracking_uri]) == 0
    line = next(li for li in capsys.readouterr().out.splitlines() if li.startswith(result.mlflow_run_id))
    assert "FINISHED" in line and " tiny " in line and "tiny.bm25, tiny.dense" in line
    assert main(["show", "0123456789abcdef", "--tracking-uri", result.tracking_uri]) == 2
    assert "cannot read run '0123456789abcdef'" in capsys.readouterr().err


def test_a_copied_store_reads_and_writes_its_own_mlflow_artifacts(finished, tmp_path, capsys):
    """MLflow records a store's artifact folder as an absolute address; a copy of the store
    read the original's artifacts (and wrote beside them). The copy's locations now follow it."""
    from mlflow.tracking import MlflowClient

    from rbench.cli import main

    folder, result = finished
    copy = tmp_path / "copy"
    shutil.copytree(folder / "store", copy)
    away = folder / "store-away"
    (folder / "store").rename(away)  # the original gone while the copy is read
    try:
        assert main(["export", "latest", "--store", str(copy), "--out", str(tmp_path / "export")]) == 0
    finally:
        away.rename(folder / "store")
    assert sorted(p.name for p in (tmp_path / "export").iterdir() if p.suffix != ".tsv") == [
        "tiny.bm25.trec", "tiny.dense.trec", "tiny.qrels"]
    client = MlflowClient(f"sqlite:///{copy / 'mlflow.db'}")
    parent = client.get_run(result.mlflow_run_id)
    assert parent.info.artifact_uri.startswith((copy / "mlflow-artifacts").as_uri() + "/")
    experiment = client.get_experiment(parent.info.experiment_id)
    assert experiment.artifact_location == (copy / "mlflow-artifacts").as_uri()
    original = MlflowClient(result.tracking_uri).get_run(result.mlflow_run_id)
    assert original.info.artifact_uri.startswith((folder / "store" / "mlflow-artifacts").resolve().as_uri())


def test_a_copy_mlflows_store_damaged_is_refused_by_show_measures_and_export(finished, tmp_path, capsys):
    """One byte changed in the middle of MLflow's copy of a run file (size kept): ``show --measures``
    and ``export`` read it back from MLflow's artifact store, and on c92c985 printed and wrote other
    numbers than the run's own table; each copy's sha256 is logged with it and checked when read
    (issue 81, item 1)."""
    from rbench.cli import main

    folder, result = finished
    copy = tmp_path / "copy"
    shutil.copytree(folder / "store", copy)
    (logged,) = [p for p in (copy / "mlflow-artifacts").rglob("run.trec")
                 if p.read_text().split("\n", 1)[0].endswith(" bm25")]  # the system's tag ends each line
    data = bytearray(logged.read_bytes())
    middle = len(data) // 2 + data[len(data) // 2:].index(b" ") + 1  # the first field after the middle
    data[middle] = ord("9") if data[middle] != ord("9") else ord("8")
    logged.write_bytes(bytes(data))
    capsys.readouterr()
    assert main(["show", "latest", "--store", str(copy), "--measures", "nDCG@3"]) == 2  # ir_measures': from run.trec
    err = capsys.readouterr().err
    assert "MLflow's copy of run.trec" in err and "tiny/bm25" in err and "Rerun the experiment's config" in err, err
    assert main(["export", "latest", "--store", str(copy), "--out", str(tmp_path / "export")]) == 2
    assert "MLflow's copy of run.trec" in capsys.readouterr().err
    assert not (tmp_path / "export" / "tiny.bm25.trec").exists()


def test_embedding_benchmark_compares_models(tmp_path, tiny_files):
    from rbench.flows.embedding_benchmark import embedding_benchmark

    corpus, queries = tiny_files
    path = tmp_path / "emb.yaml"
    path.write_text(yaml.safe_dump({
        "store": str(tmp_path / "store"), "depth": 10, "subsample": {"size": 5}, "metrics": {"k": [1, 5]},
        "datasets": [tiny_dataset(corpus, queries)],
        "retrievers": [{"name": "dense", "label": "static", "params": {"model": "static-64d"}},
                       {"name": "dense", "label": "minilm", "params": {"model": "minilm"}}],
    }))
    result = embedding_benchmark(str(path))
    rows = {r["retriever"]: r for r in result.models}
    assert set(rows) == {"static", "minilm"}
    assert rows["minilm"]["dim"] == 384 and rows["static"]["dim"] == 64
    assert all(r["passages_per_second"] > 0 and r["queries_per_second"] > 0 for r in rows.values())
    recall = {m.retriever: m.value for m in result.metrics if m.metric == "recall" and m.k == 5}
    assert rows["minilm"]["recall@5"] == recall["minilm"]
    folder = tmp_path / "store" / "reports"
    assert {p.name for p in next(folder.iterdir()).iterdir()} == {
        "models.csv", "models.md", "recall_vs_qps.png", "recall_per_dataset.png"}


def test_two_stores_never_share_artifacts(tmp_path, tiny_files, finished):
    corpus, queries = tiny_files
    folder, first = finished  # store a: the finished run's, with the same content keys
    second = benchmark(_config(tmp_path, corpus, queries))
    assert set(_status(second).values()) == {"ran"}  # same content keys, but this store is empty
    away = folder / "store-away"
    (folder / "store").rename(away)  # store a gone while this one reruns
    try:
        again = benchmark(_config(tmp_path, corpus, queries))
    finally:
        away.rename(folder / "store")
    assert set(_status(again).values()) == {"cached"}
    assert again.metrics == first.metrics


def test_rerank_and_fusion_run_in_the_flow_and_the_report(tmp_path, tiny_files):
    from mlflow.tracking import MlflowClient

    from rbench.cli import main
    from tests.conftest import tiny_cross_encoder

    corpus, queries = tiny_files
    path = tmp_path / "suite.yaml"
    path.write_text(yaml.safe_dump({
        "store": str(tmp_path / "store"), "depth": 10, "subsample": {"size": 5}, "metrics": {"k": [1, 3]},
        "mlflow": {"experiment": "suite"}, "datasets": [tiny_dataset(corpus, queries)],
        "retrievers": [
            {"name": "bm25s"},
            {"name": "dense", "label": "dense-thr", "params": {"model": "static-64d", "min_score": 0.2}},
            {"name": "rerank", "params": {"model": tiny_cross_encoder(tmp_path / "ce"), "first_stage": {"name": "bm25s"}}},
            {"name": "fusion", "params": {"retrievers": [{"name": "bm25s"}, {"name": "dense", "params": {"model": "static-64d"}}]}},
        ],
    }))
    result = benchmark(str(path))
    index_runs = [s for s in result.stages if s.stage == "index"]
    assert sum(s.status == "ran" for s in index_runs) == 2  # bm25s and static dense, shared by the composites
    client = MlflowClient(tracking_uri=result.tracking_uri)
    parent = client.get_run(result.mlflow_run_id)
    children = client.search_runs([parent.info.experiment_id], f"tags.mlflow.parentRunId = '{parent.info.run_id}'")
    assert {c.data.tags["rbench.retriever"] for c in children} == {"bm25s", "dense-thr", "rerank", "fusion"}
    assert main(["report", result.mlflow_run_id, "--tracking-uri", result.tracking_uri, "--measures", "recall@3",
                 "ndcg@3", "--baseline", "bm25s", "--trials", "200", "--out", str(tmp_path / "report")]) == 0
    text = (tmp_path / "report" / "report.md").read_text()
    assert text.count("| tiny | ") >= 6 and "| bm25s (baseline) |" in text and "| rerank |" in text
    assert "| system | recall@3 | ndcg@3 | p recall@3 | p ndcg@3 |" in text
    # a system scoring every query as the baseline does gets no test (nan) and is not counted
    untested = len(re.findall(r"^\| (?:dense-thr|rerank|fusion) \| (?:recall|ndcg)@3 \|.*\| nan \| nan \|$", text,
                              re.M))
    assert f"Holm-corrected over the table's {6 - untested} tests" in text, text
    assert r"\begin{tabular}{lrr}" in (tmp_path / "report" / "experiment.tex").read_text()


@pytest.mark.parametrize("apart", [False, True], ids=["in-process", "stage-processes"])
def test_a_cold_run_builds_each_retriever_once_per_stage_that_runs_it(tmp_path, tiny_files, monkeypatch, apart):
    """Every construction of a retriever object in this process is counted (``Retriever.__init__``),
    in a cold run: each stage that runs one here (an encode shard, an index, a retrieve) builds it
    once; with stage processes (the default) dense's stages build it there, and none builds one here
    to ask whether it loads a native runtime or how it is sharded. Started through a door, as
    ``rbench run`` and :func:`rbench.run` start it (the stage-processes cell), the plan asks the
    objects the experiment's checks built: one construction for both; the flow called by itself (a
    deployed run, the in-process cell) plans with the objects its own checks built, one too (two on
    ade7788). On 0fcf0bd: bm25 5 and dense 6 times in process, bm25 7 and dense 5 with stage processes
    (issue 80, item 1). The stage-processes cell also runs a fusion of the same two: the composite is
    built once and builds its parts once, for the plan to describe it (its retrieve runs in a stage
    process, its parts' indexes are the two above). About 70 s in process (torch loads in the test's
    process), 35 s with stage processes."""
    from collections import Counter

    from rbench.retrievers.base import Retriever

    built: Counter = Counter()
    init = Retriever.__init__

    def counted(self, params=None):
        built[type(self).name] += 1
        init(self, params)

    monkeypatch.setattr(Retriever, "__init__", counted)
    corpus, queries = tiny_files
    path = Path(_config(tmp_path, corpus, queries))
    cfg = yaml.safe_load(path.read_text())
    fused = [{"name": "fusion", "params": {"retrievers": cfg["retrievers"]}}] if apart else []
    path.write_text(yaml.safe_dump({**cfg, "retrievers": cfg["retrievers"] + fused,
                                    "execution": {"runner": "sequential", "stage_processes": apart}}))
    if apart:
        stages = rbench.run(str(path)).stages.select("stage", "status").rows()
    else:
        stages = [(s.stage, s.status) for s in benchmark(str(path)).stages]
    assert {status for _, status in stages} == {"ran"}
    ran = Counter(stage for stage, _ in stages if stage in ("encode", "index", "retrieve"))
    assert ran == {"encode": 1, "index": 2, "retrieve": 2 + len(fused)}
    here = {"bm25": 2, "dense": 0 if apart else 3}  # bm25's index and search run here (Lucene in its workers)
    expected = {name: 1 + n for name, n in here.items()}  # 1: the checks' and the plan's
    if apart:  # the fusion, once, and the two parts it builds, once each, for the plan to describe it
        expected = {"bm25": expected["bm25"] + 1, "dense": expected["dense"] + 1, "fusion": 1}
    assert dict(built) == expected, dict(built)


def test_a_run_where_no_pair_finished_logs_no_mlflow_run(tmp_path, tiny_files):
    corpus, queries = tiny_files
    corpus.write_text(corpus.read_text() + "{broken\n")
    state = benchmark(_config(tmp_path, corpus, queries), return_state=True)
    assert state.is_failed() and "is not valid JSON" in state.message  # the data phase's error, before any stage
    assert not (tmp_path / "store" / "mlflow.db").exists()


def test_a_report_of_two_runs_with_the_same_labels_keeps_both_and_shows_what_differs(tmp_path, tiny_files, capsys):
    """Change one parameter and compare: two runs of one experiment, both with a system labelled
    bm25s (k1 0.9, then 1.2). Their rows were merged under one label and one run's numbers lost."""
    from rbench.cli import main

    corpus, queries = tiny_files
    ids = []
    for k1 in (0.9, 1.2):
        path = tmp_path / f"k1-{k1}.yaml"
        path.write_text(yaml.safe_dump({
            "name": "k1", "store": str(tmp_path / "store"), "depth": 10, "subsample": {"size": 5},
            "metrics": {"k": [1, 3]}, "mlflow": {"experiment": "k1"}, "datasets": [tiny_dataset(corpus, queries)],
            "retrievers": [{"name": "bm25s", "params": {"k1": k1}}]}))
        result = benchmark(str(path))
        ids.append(result.mlflow_run_id)
    uri = result.tracking_uri
    capsys.readouterr()
    assert main(["report", *ids, "--tracking-uri", uri, "--measures", "recall@3", "--trials", "200",
                 "--out", str(tmp_path / "report")]) == 0
    out = capsys.readouterr().out
    systems = [f"k1@{i[:8]}:bm25s" for i in ids]
    text = (tmp_path / "report" / "report.md").read_text()
    for run_id, system, k1 in zip(ids, systems, ("0.9", "1.2")):
        assert f"| tiny | {system} | recall |" in text, text
        assert f"run k1@{run_id[:8]} ({run_id}): tiny/bm25s: retriever.params.k1={k1}" in out, out
    assert "## Runs compared" in text and "tiny/bm25s: retriever.params.k1" in text
    baseline, other = sorted(systems)
    assert f"{baseline} (baseline)" in out and f"\n{other} " in out  # the two runs' systems are tested
    assert main(["report", ids[1], "latest", "--experiment", "k1", "--tracking-uri", uri,
                 "--out", str(tmp_path / "again")]) == 2
    assert "is given twice" in capsys.readouterr().err


def _beir_folder(folder: Path, seed: int = 7) -> Path:
    """A BEIR folder of 80 titled documents of random words and 12 queries, with graded qrels,
    grade-0 rows, and a query whose id is also a document's id and whose text is that document's."""
    import random

    rng = random.Random(seed)
    words = [f"w{i}" for i in range(300)]
    docs = {f"d{i}": (f"title {rng.choice(words)}", " ".join(rng.choices(words, k=rng.randint(8, 40))))
            for i in range(80)}
    (folder / "qrels").mkdir(parents=True)
    write_jsonl(folder / "corpus.jsonl", [{"_id": d, "title": t, "text": x} for d, (t, x) in docs.items()])
    queries, qrels = [], ["query-id\tcorpus-id\tscore"]
    for i in range(12):
        qid = "d5" if i == 0 else f"q{i}"
        relevant = rng.sample(sorted(docs), 3)
        queries.append({"_id": qid, "text": " ".join(rng.sample(docs[relevant[0]][1].split(), 4))
                        + (" " + docs["d5"][1] if qid == "d5" else "")})
        qrels += [f"{qid}\t{relevant[0]}\t2", f"{qid}\t{relevant[1]}\t1", f"{qid}\t{relevant[2]}\t0"]
    write_jsonl(folder / "queries.jsonl", queries)
    (folder / "qrels" / "test.tsv").write_text("\n".join(qrels) + "\n")
    return folder


def test_a_beir_folder_scores_by_default_as_beirs_own_evaluation(tmp_path):
    """BEIR's ``EvaluateRetrieval.evaluate`` (beir-cellar/beir at ef83d29,
    ``beir/retrieval/evaluation.py`` lines 69-115), written out: every qrels row kept (grade 0
    included), the retriever's hits with a query's own id popped (``ignore_identical_ids``),
    pytrec_eval's ``ndcg_cut.10`` and ``recall.10`` averaged over the scored queries, rounded to 5
    places. rbench's defaults for a BEIR folder give the same numbers from the same retrieval."""
    import pyarrow.parquet as pq

    from tests.conftest import need

    pytrec_eval = need("pytrec_eval")
    folder = _beir_folder(tmp_path / "beir")
    cfg = {"name": "beir-parity", "store": str(tmp_path / "store"), "depth": 100, "subsample": {"size": 100},
           "metrics": {"k": [10]}, "mlflow": {"experiment": "beir-parity"},
           "datasets": [{"name": "synthetic", "adapter": "beir", "params": {"path": str(folder)}}],
           "retrievers": [{"name": "bm25"}]}
    (tmp_path / "exp.yaml").write_text(yaml.safe_dump(cfg))
    result = benchmark(str(tmp_path / "exp.yaml"))
    ours = {m.metric: m.value for m in result.metrics if m.k == 10}

    qrels = {}
    for line in (folder / "qrels" / "test.tsv").read_text().splitlines()[1:]:
        qid, doc, score = line.split("\t")
        qrels.setdefault(qid, {})[doc] = int(score)
    [run_file] = (tmp_path / "store").glob("retrieve/*/run.parquet")
    run = pq.read_table(run_file).to_pylist()
    results: dict[str, dict[str, float]] = {}
    for hit in run:
        results.setdefault(hit["query_id"], {})[hit["doc_id"]] = hit["score"]
    assert "d5" in results["d5"], "the query whose id is a document's must retrieve that document"
    assert all(len(set(s.values())) == len(s) for s in results.values()), "ties would be sorted two ways"
    for qid in results:
        results[qid].pop(qid, None)
    scores = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10", "recall.10"}).evaluate(results)
    beir = {m: round(sum(s[f"{m}_10" if m == "recall" else "ndcg_cut_10"] for s in scores.values()) / len(scores), 5)
            for m in ("ndcg", "recall")}
    assert len(scores) == 12
    assert round(ours["ndcg"], 5) == beir["ndcg"] and round(ours["recall"], 5) == beir["recall"]


def test_a_beir_folder_is_scored_on_every_judged_query_by_default_and_a_sample_says_so(tmp_path, capsys):
    """BEIR's evaluation scores every query with judgements; so does rbench for a BEIR folder unless
    the file sets ``subsample.size``. 520 queries (rbench's default sample is 500): all 520 scored;
    with ``size: 500`` the run's output says it scored a sample and how to score all."""
    from rbench.cli import main

    folder = tmp_path / "beir"
    (folder / "qrels").mkdir(parents=True)
    write_jsonl(folder / "corpus.jsonl", [{"_id": f"d{i}", "title": "", "text": f"topic{i} w{i % 7} w{i % 11}"}
                                          for i in range(520)])
    write_jsonl(folder / "queries.jsonl", [{"_id": f"q{i}", "text": f"topic{i} w{i % 7}"} for i in range(520)])
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(
        f"q{i}\td{i}\t1\n" for i in range(520)))
    cfg = {"name": "beir-all", "store": str(tmp_path / "store"), "metrics": {"k": [10]},
           "mlflow": {"experiment": "beir-all"}, "retrievers": [{"name": "bm25"}],
           "datasets": [{"name": "many", "adapter": "beir", "params": {"path": str(folder)}}]}
    (tmp_path / "all.yaml").write_text(yaml.safe_dump(cfg))
    result = benchmark(str(tmp_path / "all.yaml"))
    assert {m.queries for m in result.metrics} == {520}
    hnsw = {"name": "dense", "label": "hnsw", "params": {"model": "static-64d", "index": "hnsw", "ef_search": 1}}
    (tmp_path / "sample.yaml").write_text(yaml.safe_dump({**cfg, "subsample": {"size": 500},
                                                          "retrievers": [*cfg["retrievers"], hnsw]}))
    capsys.readouterr()
    assert main(["run", str(tmp_path / "sample.yaml")]) == 0
    printed = capsys.readouterr().out
    assert "many: scored on a sample, 500 of its 520 queries (subsample.size 500); `subsample: all` scores" in printed
    line = re.search(r"many/hnsw: an approximate index \(hnsw, ef_search 1\): its top 100 holds (\S+) of an exhaustive "
                     r"search's \(over every stored vector\) on 100 queries; `index: flat` searches exactly", printed)
    assert line, printed  # the approximation said beside the table, and in MLflow
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{tmp_path / 'store' / 'mlflow.db'}")
    (child,) = client.search_runs([client.get_experiment_by_name("beir-all").experiment_id],
                                  "tags.`rbench.retriever` = 'hnsw'")
    assert child.data.tags["rbench.approximate_index"] == "hnsw (ef_search 1)"
    assert f"{child.data.metrics['retrieve.approximate.recall_of_exhaustive']:.4f}" == line.group(1)


def test_copies_of_one_document_tie_and_are_scored_as_pytrec_eval_scores_the_run_under_protocol_trec(tmp_path):
    """A graded and an ungraded copy of one text (NFCorpus has such pairs): dense gives them one vector, so
    they tie exactly. Under ``protocol: trec`` rbench's nDCG@10 and R@10 are pytrec_eval's on each run's raw
    scores (trec_eval orders a tie by id, descending: the graded copy, ``dz``, first); under ``standard`` they
    are the retriever's own order's (FAISS put the copy it holds last, ``da``, first: measured), so the two
    protocols differ for dense. Lucene's BM25 scores of the two copies differ in their last float bits
    (measured 2.7160001 and 2.7159991: its sum of the query's term scores is not always made in one order), so
    there is no tie to order and both protocols give pytrec_eval's numbers. About 100 s."""
    import pyarrow.parquet as pq

    from tests.conftest import need

    pytrec_eval = need("pytrec_eval")
    folder = tmp_path / "beir"
    (folder / "qrels").mkdir(parents=True)
    docs = [{"_id": f"d{i:02d}", "title": "", "text": f"topic{i} w{i % 5} w{i % 3}"} for i in range(30)]
    docs += [{"_id": copy, "title": "", "text": "volcano lava ash"} for copy in ("dz", "da")]
    write_jsonl(folder / "corpus.jsonl", docs)
    write_jsonl(folder / "queries.jsonl", [{"_id": "q1", "text": "volcano lava"}, {"_id": "q2", "text": "topic3 w3"}])
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\tdz\t2\nq1\tda\t0\nq1\td07\t1\n"
                                              "q2\td03\t1\n")
    cfg = {"name": "copies", "store": str(tmp_path / "store"), "protocol": "trec", "metrics": {"k": [10]},
           "mlflow": {"experiment": "copies"},
           "datasets": [{"name": "c", "adapter": "beir", "params": {"path": str(folder)}}],
           "retrievers": [{"name": "bm25"}, {"name": "dense", "params": {"model": "static-64d"}}]}
    (tmp_path / "trec.yaml").write_text(yaml.safe_dump(cfg))
    (tmp_path / "standard.yaml").write_text(yaml.safe_dump({**cfg, "protocol": "standard"}))
    trec, standard = benchmark(str(tmp_path / "trec.yaml")), benchmark(str(tmp_path / "standard.yaml"))
    qrels = {"q1": {"dz": 2, "da": 0, "d07": 1}, "q2": {"d03": 1}}
    measures = {"ndcg_cut.10": ("ndcg", 10), "recall.10": ("recall", 10)}
    for label in ("bm25", "dense"):
        (key,) = [s.key for s in trec.stages if s.stage == "retrieve" and s.label == f"c/{label}"]
        hits = pq.read_table(tmp_path / "store" / "retrieve" / key / "run.parquet").to_pylist()
        raw = {q: {h["doc_id"]: h["score"] for h in hits if h["query_id"] == q} for q in qrels}
        in_order = {q: {h["doc_id"]: -float(h["rank"]) for h in hits if h["query_id"] == q} for q in qrels}
        for result, run in ((trec, raw), (standard, in_order)):
            theirs = pytrec_eval.RelevanceEvaluator(qrels, set(measures)).evaluate(run)
            ours = {(m.metric, m.k): m.value for m in result.metrics if m.retriever == label}
            for measure, metric in measures.items():
                expected = sum(t[measure.replace(".", "_")] for t in theirs.values()) / len(theirs)
                assert ours[metric] == pytest.approx(expected), (label, result is trec, measure)
        if label == "dense":
            assert raw["q1"]["da"] == raw["q1"]["dz"]
            assert [h["doc_id"] for h in sorted(hits, key=lambda h: h["rank"]) if h["query_id"] == "q1"][0] == "da"
    ndcg = {(result is trec, m.retriever): m.value for result in (trec, standard) for m in result.metrics
            if (m.metric, m.k) == ("ndcg", 10)}
    assert ndcg[(True, "dense")] > ndcg[(False, "dense")]
    assert ndcg[(True, "bm25")] == ndcg[(False, "bm25")]


def _pyserini_file(export: Path, to: Path) -> Path:
    """A run file as Pyserini writes one (tag ``Anserini``), of another system than the run's:
    bm25's ranking of each query reversed, so that it differs query by query. The tiny corpus's
    ids hold spaces, which no TREC file can: they are percent-encoded, as rbench encodes them."""
    from rbench.evaluation.runs import trec_id
    from tests.conftest import read_trec_run

    lines = []
    for qid, docs in read_trec_run(export / "tiny.bm25.trec").items():
        ranked = [d for d, _ in sorted(docs.items(), key=lambda item: -item[1])][::-1]
        lines += [f"{trec_id(qid)} Q0 {trec_id(doc)} {rank} {10.0 - rank:.4f} Anserini"
                  for rank, doc in enumerate(ranked, 1)]
    to.write_text("\n".join(lines) + "\n")
    return to


def test_a_run_file_from_elsewhere_shares_the_report_table_and_its_t_tests_match_scipy_and_holm(finished, tmp_path,
                                                                                                capsys):
    """Issue 61: a Pyserini run file and the run's two systems in one `rbench report` table;
    ir_measures names beside rbench's; each paired t-test p-value is scipy's on the per-query values
    ir_measures (and rbench's export, for recall@3) give, Holm-corrected by hand over the table's
    eight tests. About 3 s on the module's run."""
    import ir_measures
    from scipy import stats

    from rbench.cli import main
    from rbench.dataset_adapters.qrels import read_qrels
    from rbench.evaluation.report_experiment import p_text
    from tests.conftest import read_trec_run

    _, result = finished
    uri, run_id = result.tracking_uri, result.mlflow_run_id
    export = tmp_path / "export"
    assert main(["export", run_id, "--tracking-uri", uri, "--out", str(export)]) == 0
    outside = _pyserini_file(export, tmp_path / "run.pyserini.bm25.txt")
    out = tmp_path / "report"
    capsys.readouterr()
    assert main(["report", run_id, "--tracking-uri", uri, "--run-file", f"pyserini={outside}", "--measures",
                 "P@3 AP nDCG@3", "recall@3", "--test", "t-test", "--baseline", "pyserini", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "paired t-test" in printed and "seed" not in printed.split("paired t-test")[1].split("\n")[0]
    called = rbench.report(run_id, tracking_uri=uri, run_files=[f"pyserini={outside}"], test="t-test", log=False,
                           measures=["P@3", "AP", "nDCG@3", "recall@3"], baseline="pyserini", out=tmp_path / "api")
    assert called.markdown.read_text() == (out / "report.md").read_text().replace(str(out), str(tmp_path / "api"))
    assert called.logged is None and [t["dataset"] for t in called.tables] == ["tiny"]

    qrels = read_qrels(export / "tiny.qrels")
    runs = {"pyserini": read_trec_run(outside), **{s: read_trec_run(export / f"tiny.{s}.trec") for s in ("bm25", "dense")}}
    per_query = {}
    for system, run in runs.items():
        for m in ir_measures.iter_calc([ir_measures.P @ 3, ir_measures.AP, ir_measures.nDCG @ 3], qrels, run):
            per_query[(system, str(m.measure), m.query_id)] = m.value
    for line in (export / "tiny.bm25.per_query.tsv").read_text().splitlines()[1:]:
        qid, metric, k, value = line.split("\t")
        if (metric, k) == ("recall", "3"):
            per_query[("bm25", "recall@3", qid)] = float(value)
    for line in (export / "tiny.dense.per_query.tsv").read_text().splitlines()[1:]:
        qid, metric, k, value = line.split("\t")
        if (metric, k) == ("recall", "3"):
            per_query[("dense", "recall@3", qid)] = float(value)
    for qid in qrels:
        relevant = {d for d, g in qrels[qid].items() if g > 0}
        top = [d for d, _ in sorted(runs["pyserini"][qid].items(), key=lambda item: -item[1])][:3]
        per_query[("pyserini", "recall@3", qid)] = len(relevant & set(top)) / len(relevant)
    queries = sorted(qrels)
    tests = []
    for system in ("bm25", "dense"):
        for measure in ("P@3", "AP", "nDCG@3", "recall@3"):
            a = [per_query[(system, measure, q)] for q in queries]
            b = [per_query[("pyserini", measure, q)] for q in queries]
            p = stats.ttest_rel(a, b).pvalue  # scipy: nan for a == b, and then no test to correct
            tests.append((system, measure, float("nan") if a == b else p, sum(a) / len(a)))
    order = sorted((i for i in range(len(tests)) if tests[i][2] == tests[i][2]), key=lambda i: tests[i][2])
    holm, running = {i: float("nan") for i in range(len(tests))}, 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(order) - rank) * tests[i][2]))
        holm[i] = running
    md = (out / "report.md").read_text()
    for i, (system, measure, p, mean) in enumerate(tests):
        row = next(line for line in md.splitlines() if line.startswith(f"| {system} | {measure} |"))
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert cells[-2:] == [p_text(p), p_text(holm[i])], (row, p, holm[i])
        table_row = next(line for line in md.splitlines() if line.startswith(f"| {system} | ") and "/" not in line
                         and line.count("|") == 10)
        assert f"{mean:.4f}" in table_row, (table_row, measure, mean)
    assert "| pyserini (baseline) |" in md and "rbench report: tiny" in md and "pyserini (run.pyserini.bm25.txt)" in md
    assert "![per query](per_query_0.png)" in md and (out / "per_query_0.png").stat().st_size > 1000
    from mlflow.tracking import MlflowClient

    (folder,) = [a.path for a in MlflowClient(uri).list_artifacts(run_id, "report")]
    logged = {a.path for a in MlflowClient(uri).list_artifacts(run_id, folder)}
    assert folder.startswith("report/") and folder.endswith("-t-test")
    assert logged == {f"{folder}/{n}" for n in ("report.md", "report.html", "experiment.tex", "recall_at_k_0.png",
                                                "per_query_0.png")}, logged
    # a second report is logged beside the first (issue 70: on main of 6e8e733 it replaced it)
    assert main(["report", run_id, "--tracking-uri", uri, "--measures", "AP", "--test", "wilcoxon",
                 "--out", str(tmp_path / "report2")]) == 0
    folders = sorted(a.path for a in MlflowClient(uri).list_artifacts(run_id, "report"))
    assert len(folders) == 2 and folder in folders and any(f.endswith("-wilcoxon") for f in folders)
    assert {a.path for a in MlflowClient(uri).list_artifacts(run_id, folder)} == logged


def test_show_takes_ir_measures_names_and_equals_ir_measures(finished, tmp_path, capsys):
    """`show --measures "P@10 AP nDCG@10 R@100"` prints ir_measures' own means of the exported files."""
    import ir_measures

    from rbench.cli import main
    from rbench.dataset_adapters.qrels import read_qrels
    from tests.conftest import read_trec_run

    _, result = finished
    uri, run_id = result.tracking_uri, result.mlflow_run_id
    assert main(["export", run_id, "--tracking-uri", uri, "--out", str(tmp_path / "x")]) == 0
    capsys.readouterr()
    assert main(["show", run_id, "--tracking-uri", uri, "--measures", "P@10 AP nDCG@10 R@100"]) == 0
    printed = capsys.readouterr().out
    qrels = read_qrels(tmp_path / "x" / "tiny.qrels")
    measures = [ir_measures.P @ 10, ir_measures.AP, ir_measures.nDCG @ 10, ir_measures.R @ 100]
    for system in ("bm25", "dense"):
        means = ir_measures.calc_aggregate(measures, qrels, read_trec_run(tmp_path / "x" / f"tiny.{system}.trec"))
        line = next(li for li in printed.splitlines() if li.startswith(f"tiny / {system} "))
        assert line.split()[3:] == [f"{means[m]:.4f}" for m in measures], (line, means)
    assert main(["show", run_id, "--tracking-uri", uri, "--measures", "XYZ@3"]) == 2
    assert "nor an ir_measures name" in capsys.readouterr().err


def test_rbench_fuse_equals_ranx_on_run_files_and_on_a_logged_run(finished, tmp_path, capsys):
    """`rbench fuse` by RRF, CombSUM and CombMNZ equals `ranx.fuse` at 4 decimals, from the exported
    run files and from the MLflow run itself."""
    from ranx import Run, fuse

    from rbench.cli import main
    from tests.conftest import read_trec_run

    _, result = finished
    uri, run_id = result.tracking_uri, result.mlflow_run_id
    export = tmp_path / "export"
    assert main(["export", run_id, "--tracking-uri", uri, "--out", str(export)]) == 0
    files = [str(export / "tiny.bm25.trec"), str(export / "tiny.dense.trec")]
    ranx_runs = [Run(read_trec_run(Path(f))) for f in files]
    for method, ranx_method in (("rrf", "rrf"), ("combsum", "sum"), ("combmnz", "mnz")):
        theirs = fuse(ranx_runs, method=ranx_method).to_dict()
        for inputs in (files, [run_id]):
            out = tmp_path / f"{method}-{len(inputs)}.trec"
            assert main(["fuse", *inputs, "--method", method, "--tracking-uri", uri, "--out", str(out)]) == 0
            assert rbench.fuse(*inputs, method=method, tracking_uri=uri).trec() == out.read_text()  # the command's verb
            mine = read_trec_run(out)
            assert mine.keys() == theirs.keys()
            for qid in theirs:
                assert {d: round(s, 4) for d, s in mine[qid].items()} == \
                    {d: round(s, 4) for d, s in theirs[qid].items()}, (method, qid)
    assert "fused 2 runs by combmnz" in capsys.readouterr().out
    assert main(["fuse", files[0], "--out", str(tmp_path / "one.trec")]) == 2
    assert "fusion needs two runs or more, got 1" in capsys.readouterr().err
