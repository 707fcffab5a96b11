"""The Python API: ``rbench.run`` runs the same cached stages and flow as ``rbench run`` and
returns the numbers it prints, from a plain script too (no ``__main__`` guard, while the dense
encode runs in a spawned stage process); ``rbench.compare`` makes the experiment table of a
Results or of its MLflow run alike. Cost: one tiny flow (bm25s and static-64d) in a script,
about 30 s."""

from __future__ import annotations

import subprocess
import sys

import polars as pl
import pytest
import yaml

import rbench
from rbench.cli import main
from tests.conftest import tiny_dataset

pytestmark = pytest.mark.usefixtures("prefect_server")  # one Prefect test server per session


def test_rbench_run_returns_what_the_command_prints_and_compare_reads_it_or_its_mlflow_run(tmp_path, tiny_files,
                                                                                           capsys):
    corpus, queries = tiny_files
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump({
        "name": "api", "store": str(tmp_path / "store"), "depth": 10, "subsample": {"size": 5},
        "metrics": {"k": [1, 3]}, "mlflow": {"experiment": "api"}, "datasets": [tiny_dataset(corpus, queries)],
        "retrievers": [{"name": "bm25s"}, {"name": "dense", "params": {"model": "static-64d"}}]}))
    script = tmp_path / "script.py"  # no __main__ guard: spawned children must not run it again
    script.write_text(f"import rbench\nresults = rbench.run({str(path)!r})\nprint('TABLE')\nprint(results.table())\n"
                      "print('RUN', results.mlflow_run_id, sorted(set(results.stages['status'])))\n")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=150, cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert done.stdout.count("TABLE") == 1 and "Beginning flow run" in done.stderr
    printed_table = done.stdout.split("TABLE\n", 1)[1].split("\nRUN ", 1)[0]
    run_id = done.stdout.rsplit("RUN ", 1)[1].split()[0]
    assert done.stdout.rstrip().endswith("['ran']")

    results = rbench.run(path)  # every stage cached and logged: no flow, the script's run
    assert set(results.stages["status"]) == {"cached"} and results.mlflow_run_id == run_id
    assert results.table() == printed_table
    assert sorted(results.run_files) == [("tiny", "bm25s"), ("tiny", "dense")]
    assert all(f["run"].is_file() and f["qrels"].is_file() for f in results.run_files.values())
    means = results.per_query.group_by(["retriever", "metric", "k"]).agg(pl.col("value").mean())
    for row in results.aggregate.iter_rows(named=True):
        mean = means.filter((means["retriever"] == row["retriever"]) & (means["metric"] == row["metric"])
                            & (means["k"] == row["k"]))["value"].item()
        assert mean == pytest.approx(row["value"])

    capsys.readouterr()
    assert main(["run", str(path)]) == 0  # what the command prints
    printed = capsys.readouterr().out
    assert results.table() in printed and "stages: 0 ran" in printed and results.mlflow_run_id in printed

    table = rbench.compare(results, measures=["recall@3", "ndcg@3"], baseline="bm25s", trials=200)
    [doc] = table.tables
    assert doc["baseline"] == "bm25s" and [r["system"] for r in doc["rows"]] == ["bm25s", "dense"]
    recall = results.aggregate.filter((results.aggregate["retriever"] == "dense")
                                      & (results.aggregate["metric"] == "recall") & (results.aggregate["k"] == 3))
    assert doc["rows"][1]["cells"]["recall@3"]["mean"] == pytest.approx(recall["value"].item())
    from_mlflow = rbench.compare(results.mlflow_run_id, measures=["recall@3", "ndcg@3"], baseline="bm25s",
                                 trials=200, tracking_uri=results.tracking_uri)
    assert str(from_mlflow.tables) == str(table.tables)  # as text: a system scoring as the baseline has p nan
    assert "bm25s (baseline)" in repr(table) and r"\begin{tabular}{lrr}" in table.latex()
    with pytest.raises(ValueError, match="must be METRIC@K"):
        rbench.compare(results, measures=["recall"])

    outside = tmp_path / "other.trec"  # dense's run file, as if it came from elsewhere
    outside.write_text(results.run_files[("tiny", "dense")]["run"].read_text())
    mixed = rbench.compare(results, outside, measures=["P@3 nDCG@3", "recall@3"], baseline="other", test="t-test")
    frame = mixed.frame()
    assert sorted(set(frame["system"])) == ["bm25s", "dense", "other"] and frame.height == 9
    same = frame.filter((frame["system"] == "dense"))
    assert same["difference"].to_list() == [0.0] * 3 and same["ties"].to_list() == [5] * 3
    assert [p != p for p in same["p"].to_list()] == [True] * 3  # identical scores: no test (scipy: nan)
    import ir_measures

    from rbench.dataset_adapters.qrels import read_qrels
    from tests.conftest import read_trec_run

    files = results.run_files[("tiny", "bm25s")]
    p3 = ir_measures.calc_aggregate([ir_measures.P @ 3], read_qrels(files["qrels"]), read_trec_run(files["run"]))
    bm25s = frame.filter((frame["system"] == "bm25s") & (frame["measure"] == "P@3"))
    assert bm25s["mean"].item() == pytest.approx(p3[ir_measures.P @ 3])
    assert "<table>" in mixed._repr_html_() and "paired t-test" in repr(mixed)


def test_a_pair_is_its_dataset_and_retriever_even_where_two_pairs_display_alike(tmp_path, tiny_files):
    """Issue 67: on the main of 6e8e733 ``Results.per_query`` and ``run_files`` split the stage label at its
    first '/', keying dataset ``my/tiny`` as dataset ``my`` and retriever ``tiny/bm25s``. Issue 80, item 4: dataset
    ``a/b`` x retriever ``c`` and dataset ``a`` x retriever ``b/c`` both display ``a/b/c``; joined by that label,
    ``per_query`` showed 3 pairs of 4, ``run_files`` lost one and MLflow logged two pairs into one child run."""
    from mlflow.tracking import MlflowClient

    corpus, queries = tiny_files
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump({
        "name": "slash", "store": str(tmp_path / "store"), "depth": 10, "subsample": {"size": 5},
        "metrics": {"k": [1, 3]},
        "datasets": [tiny_dataset(corpus, queries, name="a/b"), tiny_dataset(corpus, queries, name="a")],
        "retrievers": [{"name": "bm25s", "label": "c"}, {"name": "bm25s", "label": "b/c", "params": {"b": 0.5}}]}))
    pairs = [("a", "b/c"), ("a", "c"), ("a/b", "b/c"), ("a/b", "c")]
    results = rbench.run(path)
    assert sorted(results.run_files) == pairs
    assert results.run_files[("a/b", "c")]["run"] != results.run_files[("a", "b/c")]["run"]
    assert sorted(set(results.per_query.select("dataset", "retriever").iter_rows())) == pairs
    evaluated = results.stages.filter(results.stages["stage"] == "evaluate")
    assert sorted(evaluated.select("dataset", "retriever").iter_rows()) == pairs
    assert sorted(evaluated["label"]) == ["a/b/b/c", "a/b/c", "a/b/c", "a/c"]
    client = MlflowClient(results.tracking_uri)
    parent = client.get_run(results.mlflow_run_id)
    children = client.search_runs([parent.info.experiment_id],
                                  filter_string=f"tags.mlflow.parentRunId = '{results.mlflow_run_id}'")
    assert sorted((c.data.tags["rbench.dataset"], c.data.tags["rbench.retriever"]) for c in children) == pairs
    assert rbench.run(path).run_files == results.run_files  # cached and logged: read back as the same pairs
    assert main(["export", results.mlflow_run_id, "--out", str(tmp_path / "out"), "--store",
                 str(tmp_path / "store")]) == 0
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        "a%2Fb.b%2Fc.per_query.tsv", "a%2Fb.b%2Fc.trec", "a%2Fb.c.per_query.tsv", "a%2Fb.c.trec", "a%2Fb.qrels",
        "a.b%2Fc.per_query.tsv", "a.b%2Fc.trec", "a.c.per_query.tsv", "a.c.trec", "a.qrels"]
    tables = rbench.compare(results, measures=["recall@3"], baseline="c", trials=100).tables
    assert [(t["dataset"], [r["system"] for r in t["rows"]]) for t in tables] == [("a", ["c", "b/c"]),
                                                                                  ("a/b", ["c", "b/c"])]


def test_a_notebook_that_deletes_its_store_between_two_runs_logs_both_to_mlflow(tmp_path, tiny_files, monkeypatch):
    """MLflow keeps one store per tracking URI for the process: its pooled connection to the store's
    database, deleted with the store, failed the second run's every write ("attempt to write a readonly
    database"; the logging was kept as pending). rbench makes the database again, and MLflow opens it
    afresh (``NullPool``), whether a run or a read opened it first. ~15 s."""
    import shutil

    from rbench.tracking.read import list_runs

    monkeypatch.delenv("MLFLOW_SQLALCHEMYSTORE_POOLCLASS", raising=False)  # as in a fresh kernel
    corpus, queries = tiny_files
    experiment = {"name": "again", "store": str(tmp_path / "store"), "depth": 10, "metrics": {"k": [1, 3]},
                  "datasets": [tiny_dataset(corpus, queries)], "retrievers": [{"name": "bm25s"}]}
    first = rbench.run(experiment)
    shutil.rmtree(tmp_path / "store")
    second = rbench.run(experiment)
    assert first.mlflow_run_id and second.mlflow_run_id and second.mlflow_run_id != first.mlflow_run_id
    assert not (tmp_path / "store" / "_mlflow-pending").exists()
    from mlflow.tracking import MlflowClient

    run = MlflowClient(f"sqlite:///{tmp_path / 'store' / 'mlflow.db'}").get_run(second.mlflow_run_id)
    assert run.info.status == "FINISHED" and run.data.metrics
    shutil.copytree(tmp_path / "store", tmp_path / "copy")  # a database this process has not opened yet
    monkeypatch.delenv("MLFLOW_SQLALCHEMYSTORE_POOLCLASS", raising=False)
    assert [r["id"] for r in list_runs(f"sqlite:///{tmp_path / 'copy' / 'mlflow.db'}")][:1] == [
        second.mlflow_run_id]  # opened by a read first (rbench.compare in a fresh kernel)
    shutil.rmtree(tmp_path / "copy")
    assert rbench.run({**experiment, "store": str(tmp_path / "copy")}).mlflow_run_id
