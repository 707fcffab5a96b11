"""Execution model: failure isolation, task runners, concurrent runs on one store, resumable builds."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from rbench.flows.benchmark import benchmark, summary_of
from rbench.tracking.read import load_results
from tests.conftest import (
    CORPUS,
    QUERIES,
    REPO,
    prefect_home,
    tiny_cross_encoder,
    tiny_dataset,
    write_jsonl,
)
from tests.system.deployments.conftest import stop_group

pytestmark = pytest.mark.usefixtures("prefect_server")  # one Prefect test server per session


def _write(tmp_path: Path, cfg: dict, name: str = "exp.yaml") -> str:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(cfg))
    return str(path)


def _base(tmp_path, corpus, queries, retrievers, **extra) -> dict:
    return {"name": "exec", "store": str(tmp_path / "store"), "depth": 10, "subsample": {"size": 5},
            "metrics": {"k": [1, 3]}, "mlflow": {"experiment": "exec"},
            "datasets": [tiny_dataset(corpus, queries)], "retrievers": retrievers, **extra}


def _status(result) -> dict[tuple[str, str], str]:
    return {(s.stage, s.label): s.status for s in result.stages}


def test_a_failing_pair_fails_alone_and_a_retry_reruns_only_it(tmp_path, tiny_files):
    from mlflow.tracking import MlflowClient

    corpus, queries = tiny_files
    broken = tmp_path / "ce"
    broken.mkdir()  # an existing folder without a model: the reranker fails when it loads
    config = _write(tmp_path, _base(tmp_path, corpus, queries, [
        {"name": "bm25s"},
        {"name": "rerank", "params": {"model": str(broken), "first_stage": {"name": "bm25s"}}},
        {"name": "dense", "params": {"model": "static-64d"}},
    ]))
    state = benchmark(config, return_state=True)
    assert state.is_failed()
    assert "1 of 3 dataset x retriever pairs failed: tiny/rerank" in state.message
    from prefect.states import get_state_exception

    assert "1 of 3" in str(get_state_exception(state))  # an exception Prefect can resolve, no TypeError
    summary = summary_of(state)
    assert {m.retriever for m in summary.metrics} == {"bm25s", "dense"}
    assert [f.retriever for f in summary.failures] == ["rerank"]
    assert "retrieve[tiny/rerank]" in summary.failures[0].error
    statuses = _status(summary)
    assert statuses[("retrieve", "tiny/rerank")] == "failed"
    assert statuses[("evaluate", "tiny/rerank")] == "skipped"
    client = MlflowClient(summary.tracking_uri)
    parent = client.get_run(summary.mlflow_run_id)
    assert parent.info.status == "FAILED" and parent.data.metrics["pairs_failed"] == 1
    children = client.search_runs([parent.info.experiment_id], f"tags.mlflow.parentRunId = '{parent.info.run_id}'")
    assert {c.data.tags["rbench.retriever"] for c in children} == {"bm25s", "dense"}

    tiny_cross_encoder(broken)  # the cause is fixed; the rerun builds only what failed or never ran
    again = benchmark(config)
    ran = {key for key, status in _status(again).items() if status == "ran"}
    assert ran == {("retrieve", "tiny/rerank"), ("evaluate", "tiny/rerank")}
    assert again.failures == ()


def test_sharded_and_whole_dense_index_agree(tmp_path, tiny_files, thread_run):
    corpus, queries = tiny_files
    _, whole = thread_run  # one shard of 50,000 rows
    dense = [{"name": "dense", "params": {"model": "static-64d"}}]
    sharded = benchmark(_write(tmp_path, _base(tmp_path, corpus, queries, dense, execution={"shard_size": 2})))
    encoded = [s.label for s in sharded.stages if s.stage == "encode"]
    assert encoded == [f"tiny/dense:tokenlearn-static-64d[{a}:{a + 2}]" for a in (0, 2, 4)]
    assert sharded.metrics == tuple(m for m in whole.metrics if m.retriever == "dense")


TWO_RETRIEVERS = [{"name": "bm25s"}, {"name": "dense", "params": {"model": "static-64d"}}]


@pytest.fixture(scope="module")
def thread_run(tmp_path_factory, prefect_server) -> tuple[Path, dict]:
    """One uninterrupted run of bm25s and static-64d on the thread runner, built once per test
    process for the tests that only read it: its folder (with ``store``) and its result."""
    root = tmp_path_factory.mktemp("reference")
    corpus, queries = write_jsonl(root / "corpus.jsonl", CORPUS), write_jsonl(root / "queries.jsonl", QUERIES)
    return root, benchmark(_write(root, _base(root, corpus, queries, TWO_RETRIEVERS), "reference.yaml"))


@pytest.mark.slow
@pytest.mark.parametrize("runner", ["dask", "ray"])
def test_cluster_runners_match_the_thread_runner(tmp_path, tiny_files, runner, thread_run):
    corpus, queries = tiny_files
    _, threads = thread_run
    cluster_cfg = _base(tmp_path / "c", corpus, queries, TWO_RETRIEVERS, execution={"runner": runner, "max_workers": 2})
    cluster = benchmark(_write(tmp_path, cluster_cfg, f"{runner}.yaml"))
    assert cluster.metrics == threads.metrics
    assert set(_status(cluster).values()) == {"ran"}
    again = benchmark(_write(tmp_path, cluster_cfg, f"{runner}.yaml"))
    assert set(_status(again).values()) == {"cached"}


def _cli(args: list[str], home: Path, extra_env: dict | None = None, script: str | None = None) -> subprocess.Popen:
    """``rbench`` in a process of its own, as on another node: its own Prefect home and server
    (``script``: a Python script given ``args`` instead)."""
    env = {**os.environ, "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "PREFECT_LOGGING_LEVEL": "WARNING",
           "PREFECT_HOME": prefect_home(home)}
    env.pop("PREFECT_API_URL", None)
    env.pop("MLFLOW_TRACKING_URI", None)
    env.update(extra_env or {})
    hang_up = signal.signal(signal.SIGHUP, signal.SIG_DFL)  # as from a terminal, even if the suite runs under nohup
    try:
        command = ["-c", script] if script else ["-m", "rbench.cli"]
        return subprocess.Popen([sys.executable, *command, *args], cwd=REPO, env=env, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    finally:
        signal.signal(signal.SIGHUP, hang_up)


NATIVE = ("torch", "sentence_transformers", "faiss", "jnius", "pyserini")
LOADED = ("import sys; from rbench.cli import main; rc = main(['run', sys.argv[1]]); "
          f"print('LOADED', [m for m in {NATIVE!r} if m in sys.modules]); sys.exit(rc)")


@pytest.mark.slow
def test_the_flows_process_loads_no_native_runtime(tmp_path, tiny_files):
    """Text chunked by chonky, BM25 (Lucene), a MiniLM encoder with FAISS and a cross-encoder
    reranking BM25: with stage processes (the default) the process that holds the flow (and
    prepares the dataset before it) imports none of torch, sentence-transformers, FAISS,
    Pyserini or the JVM, and every stage runs."""
    from tests.integration.tasks.test_chonky import _tiny_model

    corpus, queries = tiny_files
    ce = tiny_cross_encoder(tmp_path / "ce")
    cfg = _base(tmp_path, corpus, queries, [
        {"name": "bm25"}, {"name": "dense", "params": {"model": "sentence-transformers/all-MiniLM-L6-v2"}},
        {"name": "rerank", "params": {"model": ce, "first_stage": {"name": "bm25"}}}])
    chonky = _tiny_model(tmp_path / "chonky", separator_bias=0.0)
    cfg["datasets"][0]["params"]["chunker"] = {"kind": "chonky", "model": chonky, "size": 8, "overlap": 0}
    config = _write(tmp_path, cfg)
    env = {**os.environ, "PREFECT_HOME": prefect_home(tmp_path / "home")}
    env.pop("PREFECT_API_URL", None)
    proc = subprocess.run([sys.executable, "-c", LOADED, config], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "LOADED []" in proc.stdout, proc.stdout[-2000:]
    assert re.search(r"^stages: [1-9]\d* ran, \d+ cached, 0 failed", proc.stdout, re.M), proc.stdout[-2000:]


def _stage_counts(out: str) -> tuple[int, int]:
    line = next(line for line in out.splitlines() if line.startswith("stages: "))
    parts = line.split()
    return int(parts[1]), int(parts[3])


@pytest.mark.slow
def test_two_runs_on_one_store_at_once_build_each_artifact_once(tmp_path, tiny_files):
    corpus, queries = tiny_files
    config = _write(tmp_path, _base(tmp_path, corpus, queries, [
        {"name": "bm25"}, {"name": "dense", "params": {"model": "static-64d"}}]))
    procs = [_cli(["run", config], tmp_path / f"node{i}") for i in range(2)]
    outputs = [p.communicate(timeout=600) for p in procs]
    for p, (out, err) in zip(procs, outputs):
        assert p.returncode == 0, err[-3000:]
        assert "replacing incomplete or corrupt artifact" not in err
    ran = [_stage_counts(out)[0] for out, _ in outputs]
    cached = [_stage_counts(out)[1] for out, _ in outputs]
    assert sum(ran) == 10 and [r + c for r, c in zip(ran, cached)] == [10, 10]  # each of the 10 stages built once
    tables = [[line for line in out.splitlines() if line.startswith("tiny / ")] for out, _ in outputs]
    assert tables[0] == tables[1] and len(tables[0]) == 2 * 6
    store = tmp_path / "store"
    assert not list(store.glob("*/.tmp-*")) and not list(store.glob("*/.partial-*"))


def _variants(n: int) -> list[dict]:
    """``n`` corpus rows: the tiny corpus repeated, each object text made distinct."""
    return [{**CORPUS[i % len(CORPUS)], "object": f"{CORPUS[i % len(CORPUS)]['object']} variant {i}"} for i in range(n)]


def _dense_build_under_way(tmp_path: Path, execution: dict, shards_done: int):
    """``rbench run`` of a 600-row MiniLM index in 4 shards, once ``shards_done`` shards are
    published: (config path, the process, the encode stage folder)."""
    rows = _variants(600)
    corpus, queries = write_jsonl(tmp_path / "corpus.jsonl", rows), write_jsonl(tmp_path / "queries.jsonl", QUERIES)
    config = _write(tmp_path, _base(tmp_path, corpus, queries, [{"name": "dense", "params": {"model": "minilm"}}],
                                    execution=execution))
    shards = tmp_path / "store" / "encode"
    proc = _cli(["run", config], tmp_path / "node")
    deadline = time.time() + 300
    while time.time() < deadline and len(list(shards.glob("*/_manifest.json"))) < shards_done:
        time.sleep(0.05)
    return config, proc, shards


@pytest.mark.slow
@pytest.mark.timing
def test_killed_dense_build_resumes_with_the_missing_shards(tmp_path):
    config, proc, shards = _dense_build_under_way(tmp_path, {"runner": "sequential", "shard_size": 150}, 2)
    os.killpg(proc.pid, signal.SIGKILL)  # the run and its ephemeral Prefect server, as a dying node
    proc.communicate()
    done = len(list(shards.glob("*/_manifest.json")))
    assert 2 <= done < 4, "the build finished (or never started) before it could be killed"

    result = benchmark(config)
    encoded = [s for s in result.stages if s.stage == "encode"]
    assert len(encoded) == 4
    assert sum(s.status == "ran" for s in encoded) == 4 - done
    assert sum(s.status == "cached" for s in encoded) == done
    index = next(s for s in result.stages if s.stage == "index")
    info = json.loads((tmp_path / "store" / "index" / index.key / "_manifest.json").read_text())["info"]
    assert info["indexed"] == 600 and info["shards"] == 4


MOMENTS = {  # the stage whose lease marks the moment, the retrievers of the run, its stage threads
    "lucene-index": ("index", [{"name": "bm25"}], None),
    "lucene-search": ("retrieve", [{"name": "bm25"}], None),
    "dense-encode": ("encode", [{"name": "dense", "params": {"model": "minilm"}}], 2),  # shards queued
    "chunk-embed": ("chunk_embed", None, None),  # a chunking grid's cell: MiniLM encodes a corpus's chunks
}
HOW = {"SIGTERM": signal.SIGTERM, "SIGINT": signal.SIGINT, "group-SIGINT": signal.SIGINT,
       "group-SIGHUP": signal.SIGHUP}
CELLS = [  # every moment with a signal to the run alone and with Ctrl-C to its group; every signal; every door
    ("run", "dense-encode", "SIGTERM"), ("run", "dense-encode", "group-SIGINT"),
    ("run", "dense-encode", "group-SIGHUP"), ("run", "lucene-index", "SIGINT"),
    ("api", "dense-encode", "group-SIGINT"), ("api", "lucene-search", "SIGTERM"),
    ("embeddings", "dense-encode", "group-SIGINT"), ("search", "lucene-index", "group-SIGINT"),
    ("reproduce", "lucene-search", "group-SIGINT"), ("chunking", "chunk-embed", "group-SIGINT"),
]
API_SCRIPT = "import sys, rbench; rbench.run(sys.argv[1])"  # a user's script: Ctrl-C reaches rbench.run


def _rerun(door: str, config: str) -> dict:
    """The run again, in this process, by the door's flow; its summary."""
    if door == "search":
        from rbench.flows.config_search import config_search

        return config_search(config)
    if door == "embeddings":
        from rbench.flows.embedding_benchmark import embedding_benchmark

        return embedding_benchmark(config)
    if door == "chunking":
        from rbench.flows.chunking_grid import chunking_grid

        return chunking_grid(config)
    return benchmark(config)  # reproduce: its study


def _chunking_grid(tmp_path: Path) -> str:
    """A chunking grid on Chroma's format whose one cell MiniLM encodes for seconds (about 1,400
    chunks: the test set's corpus, its text repeated after the references' spans)."""
    from tests.unit.tasks.test_chunking_eval import SOTU, make_eval_set

    data = make_eval_set(tmp_path / "set")
    with open(data / "corpora" / "sotu.md", "a", encoding="utf-8") as f:
        f.write((" " + SOTU) * 400)
    grid = {"name": "sig-chunking", "store": str(tmp_path / "store"), "data": str(data), "model": "minilm",
            "chunk_sizes": [30], "overlaps": [0.0], "n": [1]}
    return _write(tmp_path, grid, "grid.yaml")


def _reproduction(tmp_path: Path, config: str) -> str:
    """A reproduction of one local study, ``config``, against a table rbench ships."""
    study = {"name": "sig-repro", "title": "a signal mid-study", "tables": ["arm-report-table6"],
             "studies": [{"config": config}]}
    return _write(tmp_path, study, "repro.yaml")


@pytest.mark.slow
@pytest.mark.timing
@pytest.mark.parametrize(("door", "moment", "how"), CELLS, ids=[f"{d}-{m}-{h}" for d, m, h in CELLS])
def test_a_signal_at_any_moment_ends_the_run_within_ten_seconds(tmp_path, door, moment, how):
    """A signal while Lucene indexes (in its worker process), while Lucene searches, and while
    torch encodes: the run ends within 10 s with one line and no traceback, nothing of its
    process group is left, no lease, no JVM crash file, and a rerun finishes from what was kept.
    The encode cells run 4 shards on two stage threads and stop once a shard is published: the
    shards under way are stopped, those still queued are cancelled, and the rerun builds only
    the shards that were not published.

    The cells: a signal to the run's process alone reaches one handler whatever the signal
    (SIGTERM, SIGINT and SIGHUP share ``stop_on_signals``'s), so each moment has one such cell and
    each signal one moment; a signal to the whole group (Ctrl-C, a closed terminal) also reaches
    the stage and Lucene processes, which differ per moment, so Ctrl-C is sent at every moment
    (Lucene's moments through the doors that reach them, ``rbench search`` and ``rbench reproduce``:
    ``rbench run``'s own cells there and its SIGTERM mid-search repeated those and the script's, 3 of 13
    cells, ~300 s of CI), and a hang-up mid-encode, where torch's stage processes run.

    Every door stops the same way (issue 58): a script calling :func:`rbench.run` (Ctrl-C to its
    group, SIGTERM to it), ``rbench embeddings``, ``rbench search``, ``rbench reproduce`` (mid-study)
    and ``rbench chunking`` (mid-encode of a grid's cell); before, Ctrl-C to such a script left the
    flow building for a minute and ended in 22 tracebacks. A notebook's interrupt has its own test."""
    stage, retrievers, threads = MOMENTS[moment]
    rows = _variants(600 if stage == "encode" else 40)
    corpus, queries = write_jsonl(tmp_path / "corpus.jsonl", rows), write_jsonl(tmp_path / "queries.jsonl", QUERIES)
    extra = {"search": {"retriever": "bm25", "metric": "recall", "k": 3, "strategy": "grid", "budget": 2,
                        "grid_points": 2, "space": {"k1": {"low": 0.9, "high": 1.2}}}} if door == "search" else {}
    config = _chunking_grid(tmp_path) if door == "chunking" else _write(
        tmp_path, _base(tmp_path, corpus, queries, retrievers, execution={"shard_size": 150, "max_workers": threads},
                        **extra))
    if door == "api":
        proc = _cli([config], tmp_path / "node", script=API_SCRIPT)
    elif door == "reproduce":
        proc = _cli([door, _reproduction(tmp_path, config), "--out", str(tmp_path / "reproduction")], tmp_path / "node")
    else:
        proc = _cli([door, config], tmp_path / "node")
    locks = tmp_path / "store" / stage / ".locks"
    published = tmp_path / "store" / stage
    deadline = time.monotonic() + 300
    while not [p for p in locks.glob("*") if p.is_file()] or (
            stage == "encode" and not list(published.glob("*/_manifest.json"))):
        assert proc.poll() is None and time.monotonic() < deadline, f"no {stage} stage under way"
        time.sleep(0.05)
    time.sleep(0.5)
    told = time.monotonic()
    if how.startswith("group-"):
        os.killpg(proc.pid, HOW[how])
    else:
        proc.send_signal(HOW[how])
    _, err = proc.communicate(timeout=60)
    assert time.monotonic() - told < 10, err[-2000:]
    assert proc.returncode == 128 + HOW[how] and err.count("rbench: SIG") == 1, err[-2000:]
    assert "Traceback" not in err and "Crash detected" not in err, err[-3000:]  # the stop's one line alone
    with pytest.raises(ProcessLookupError):  # no temporary Prefect server or Lucene worker left, nor a zombie
        for _ in range(100):
            os.killpg(proc.pid, 0)
            time.sleep(0.1)
    assert not [p for p in (tmp_path / "store").glob("*/.locks/*") if p.is_file()]
    assert not list(REPO.glob("hs_err_pid*.log")) and not list(tmp_path.rglob("hs_err_pid*.log"))
    done = len(list(published.glob("*/_manifest.json")))
    result = _rerun(door, config)
    if door == "search":
        assert len(result.trials) == 2
        return
    if door == "chunking":
        assert [s.status for s in result.stages if s.stage == "chunk_embed"] == ["ran"]
        assert result.results
        return
    assert result.metrics and not result.failures
    if stage == "encode":
        assert 1 <= done < 4, "the build finished (or never started) before the signal"
        encoded = [s for s in result.stages if s.stage == "encode"]
        assert len(encoded) == 4 and sum(s.status == "cached" for s in encoded) == done
        index = next(s for s in result.stages if s.stage == "index")
        info = json.loads((tmp_path / "store" / "index" / index.key / "_manifest.json").read_text())["info"]
        assert info["indexed"] == 600


def test_a_failed_mlflow_logging_is_kept_and_logged_by_the_next_run(tmp_path, tiny_files, monkeypatch):
    from mlflow.tracking import MlflowClient

    import rbench.tracking.write as track

    corpus, queries = tiny_files
    config = _write(tmp_path, _base(tmp_path, corpus, queries, [{"name": "bm25s"}]))
    real = track._log_experiment

    def down(*args, **kwargs):
        raise ConnectionError("tracking server down")

    monkeypatch.setattr(track, "_log_experiment", down)
    state = benchmark(config, return_state=True)
    summary = summary_of(state)
    assert state.is_completed() and state.name == "LoggingPending"  # complete results, the logging pending
    assert "rbench log" in state.message and summary.metrics
    assert Path(summary.mlflow_pending).exists()
    monkeypatch.setattr(track, "_log_experiment", real)
    again = benchmark(config)
    assert again.mlflow_run_id and not Path(summary.mlflow_pending).exists()
    client = MlflowClient(f"sqlite:///{tmp_path / 'store' / 'mlflow.db'}")
    runs = client.search_runs([client.get_experiment_by_name("exec").experiment_id])
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    assert len(parents) == 2 and len(runs) == 4
    ran = sum(s.status == "ran" for s in summary.stages)
    assert sorted(r.data.metrics["stages_ran"] for r in parents) == [0, ran]


def _finished_run(proc: subprocess.Popen) -> tuple[str, str, str]:
    """Output and MLflow run id of a finished ``rbench run`` that succeeded."""
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err[-3000:]
    return out, err, next(line.split()[2] for line in out.splitlines() if line.startswith("MLflow run "))


@pytest.mark.slow
def test_a_rerun_that_changes_nothing_starts_no_flow_until_something_is_missing(tmp_path, tiny_files):
    from mlflow.tracking import MlflowClient

    corpus, queries = tiny_files
    config = _write(tmp_path, _base(tmp_path, corpus, queries, [{"name": "bm25s"}]))
    home, quiet = tmp_path / "node", {"PREFECT_LOGGING_LEVEL": "INFO"}
    first, first_err, logged = _finished_run(_cli(["run", config], home, quiet))
    table = [line for line in first.splitlines() if line.startswith("tiny / ")]

    again, again_err, same = _finished_run(_cli(["run", config], home, quiet))
    assert same == logged and "no flow run started" in again
    assert [line for line in again.splitlines() if line.startswith("tiny / ")] == table
    assert _stage_counts(again) == (0, 6) and "Starting temporary server" not in again + again_err

    forced, forced_err, new = _finished_run(_cli(["--verbose", "run", config, "--force-flow"], home, quiet))
    assert new != logged and "no flow run started" not in forced and _stage_counts(forced) == (0, 6)
    assert (forced + forced_err).count("Starting temporary server") == 1  # once per command, not per flow
    assert "Starting temporary server" not in first + first_err  # said only under --verbose (issue 70, item 7)

    MlflowClient(f"sqlite:///{tmp_path / 'store' / 'mlflow.db'}").delete_run(new)  # gone from MLflow: log again
    out, _, after_delete = _finished_run(_cli(["run", config], home, quiet))
    assert after_delete not in (logged, new) and "no flow run started" not in out

    for folder in (tmp_path / "store" / "evaluate").iterdir():  # a stage missing from the store: rebuilt
        shutil.rmtree(folder)
    out, _, rebuilt = _finished_run(_cli(["run", config], home, quiet))
    assert rebuilt != after_delete and _stage_counts(out) == (1, 5)
    assert [line for line in out.splitlines() if line.startswith("tiny / ")] == table


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.slow
def test_a_tracking_password_stays_out_of_mlflow_lines_links_and_records(tmp_path, tiny_files):
    """MLflow prints "View run ... at <uri>" and rbench links the run from Prefect: with the password
    in MLFLOW_TRACKING_URI, neither may carry it, against a real tracking server."""
    secret = "pl4nted-tr4cking"
    server_dir = tmp_path / "mlflow-server"
    with _mlflow_server(server_dir) as port:
        corpus, queries = tiny_files
        config = _write(tmp_path, _base(tmp_path, corpus, queries, [{"name": "bm25s"}]))
        home = tmp_path / "node"
        proc = _cli(["run", config], home, {"MLFLOW_TRACKING_URI": f"http://rbench:{secret}@127.0.0.1:{port}",
                                            "PREFECT_LOGGING_LEVEL": "INFO"})
        out, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err[-3000:]
        assert "View run" in out + err and f"http://127.0.0.1:{port}/#/experiments/" in out + err
        assert secret not in out and secret not in err
        leaks = [p for folder in (tmp_path / "store", home, server_dir) for p in folder.rglob("*")
                 if p.is_file() and secret.encode() in p.read_bytes()]
        assert leaks == []
        proc = _cli(["show", "latest", "--experiment", "exec"], home,
                    {"MLFLOW_TRACKING_URI": f"http://rbench:{secret}@127.0.0.1:{port}"})
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0 and "bm25s" in out and secret not in out + err


@pytest.mark.slow
def test_a_tracking_server_that_refuses_the_host_name_stops_the_run_before_any_work(tmp_path, tiny_files):
    """MLflow's host check answers 403 on its API but not on /health: the preflight asks the API."""
    with _mlflow_server(tmp_path / "mlflow-server", "--allowed-hosts", "mlflow.internal:5000") as port:
        corpus, queries = tiny_files
        config = _write(tmp_path, _base(tmp_path, corpus, queries, [{"name": "bm25s"}]))
        proc = _cli(["run", config], tmp_path / "node", {"MLFLOW_TRACKING_URI": f"http://127.0.0.1:{port}"})
        out, err = proc.communicate(timeout=300)
    assert proc.returncode == 2, out[-2000:] + err[-2000:]
    assert "--allowed-hosts" in err and f"127.0.0.1:{port}" in err and "Traceback" not in err
    assert not (tmp_path / "store" / "prepare").exists()  # stopped before any stage


@contextlib.contextmanager
def _mlflow_server(folder: Path, *extra: str):
    """A real MLflow tracking server on a free port, for the block; yields the port."""
    import urllib.request

    folder.mkdir()
    port = _free_port()
    server = subprocess.Popen([str(Path(sys.executable).parent / "mlflow"), "server", "--host", "127.0.0.1",
                               "--port", str(port), "--workers", "1",
                               "--backend-store-uri", f"sqlite:///{folder / 'mlflow.db'}",
                               "--default-artifact-root", str(folder / "artifacts"), *extra],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        for _ in range(120):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2).close()
                break
            except OSError:
                time.sleep(1)
        yield port
    finally:
        stop_group(server)


@pytest.mark.slow
def test_a_planted_password_reaches_no_output_and_metrics_survive_a_failed_mlflow(tmp_path, tiny_files):
    secret = "pl4nted-s3cret"
    corpus, queries = tiny_files
    config = _write(tmp_path, _base(tmp_path, corpus, queries, [{"name": "bm25s"}]))
    home = tmp_path / "node"
    env_extra = {"MLFLOW_TRACKING_URI": f"http://rbench:{secret}@127.0.0.1:9", "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0",
                 "MLFLOW_HTTP_REQUEST_TIMEOUT": "3", "PREFECT_LOGGING_LEVEL": "INFO"}
    proc = _cli(["run", config], home, env_extra)
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 3, err[-3000:]  # complete results, the logging pending: not a failed run (1)
    assert "Traceback" not in err, err[-3000:]  # it printed a Prefect task traceback and exited 1 on main
    assert "tiny / bm25s" in out and "MLflow logging failed" in err and "rbench:***@127.0.0.1:9" in err
    assert secret not in out and secret not in err
    leaks = [p for folder in (tmp_path / "store", home) for p in folder.rglob("*")
             if p.is_file() and secret.encode() in p.read_bytes()]
    assert leaks == []

    (record,) = (tmp_path / "store" / "_mlflow-pending").glob("*.json")  # the logging is kept for later
    store = ["--store", str(tmp_path / "store")]
    proc = _cli(["log", *store], home, {})
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 2 and "password is not stored" in err and "--tracking-uri" in err and record.exists()
    uri = f"sqlite:///{tmp_path / 'later.db'}"
    proc = _cli(["log", *store, "--tracking-uri", uri], home, {})
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    assert f"logged {record.name}" in out and not record.exists()
    _, rows, _ = load_results(uri, ["latest"], "exec")
    assert {(r["dataset"], r["retriever"]) for r in rows} == {("tiny", "bm25s")} and rows


def _evaluation_bytes(store: Path) -> dict[str, bytes]:
    return {f"{p.parent.name}/{p.name}": p.read_bytes() for p in sorted((store / "evaluate").glob("*/*"))
            if p.name in ("per_query.parquet", "aggregate.parquet", "run.trec")}


KILL_POINTS = {
    **{f"after-{n}-stages": (lambda store, n=n: len(list(store.glob("*/*/_manifest.json"))) >= n) for n in (1, 3, 6, 9)},
    "in-mlflow-setup": lambda store: (store / ".mlflow.db.lease").exists(),
}


@pytest.fixture(scope="module")
def reference_evaluation(thread_run) -> dict[str, bytes]:
    """The evaluation files of one uninterrupted run, built once for every kill point (keys
    follow content, so the killed runs' own copies of the tiny files reach the same keys)."""
    root, _ = thread_run
    expected = _evaluation_bytes(root / "store")
    assert len(expected) == 6
    return expected


@pytest.mark.slow
@pytest.mark.timing
@pytest.mark.parametrize("ready", KILL_POINTS.values(), ids=KILL_POINTS.keys())
def test_a_run_killed_at_a_stage_boundary_or_in_mlflow_setup_resumes_identically(tmp_path, tiny_files, ready,
                                                                                   reference_evaluation):
    corpus, queries = tiny_files
    retrievers = TWO_RETRIEVERS
    (tmp_path / "killed").mkdir()
    killed = _write(tmp_path, _base(tmp_path / "killed", corpus, queries, retrievers,
                                    execution={"runner": "sequential"}), "killed.yaml")
    for attempt in range(2):  # the kill point is polled: a run that outpaces the poll is retried once
        shutil.rmtree(tmp_path / "killed" / "store", ignore_errors=True)
        cache = {"RBENCH_CACHE": str(tmp_path / f"cache{attempt}")}  # no empty database to copy: MLflow migrates
        proc = _cli(["run", killed], tmp_path / f"node{attempt}", cache)
        deadline = time.time() + 300
        while time.time() < deadline and proc.poll() is None and not ready(tmp_path / "killed" / "store"):
            time.sleep(0.02)
        if proc.poll() is None:
            break
        proc.communicate()
    assert proc.poll() is None, "the run ended before it could be killed, twice"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate()
    result = benchmark(killed)
    assert result.failures == () and result.mlflow_run_id
    assert not list((tmp_path / "killed" / "store").glob("*/.tmp-*"))
    assert _evaluation_bytes(tmp_path / "killed" / "store") == reference_evaluation


@pytest.mark.slow
@pytest.mark.timing
def test_a_notebook_interrupt_stops_the_run_within_ten_seconds_and_the_kernel_resumes_it(tmp_path):
    """The notebook cell of the signal matrix (issue 58): `rbench.run` in a Jupyter kernel, the
    kernel's "interrupt" while MiniLM encodes 4 shards on two stage threads, one published. The cell
    ends within 10 s with one KeyboardInterrupt of one line and nothing else (issue 70, item 3), no
    lease is left, no stage process is left under the kernel, and the kernel, alive, runs it again
    from the shards kept, printing the CLI's header first and each stage and progress line once
    (on 5aabe61 no header, and each progress line twice: Prefect's console handler showed it
    again). Before, the interrupt waited for the whole stage. About 60 s."""
    import threading

    import nbformat
    import psutil
    from nbclient import NotebookClient
    from nbclient.util import run_sync

    rows = _variants(600)
    corpus, queries = write_jsonl(tmp_path / "corpus.jsonl", rows), write_jsonl(tmp_path / "queries.jsonl", QUERIES)
    config = _write(tmp_path, _base(tmp_path, corpus, queries, [{"name": "dense", "params": {"model": "minilm"}}],
                                    execution={"shard_size": 150, "max_workers": 2}))
    run = f"import rbench\nresults = rbench.run({config!r})\n"
    again = f"results = rbench.run({config!r})\nprint(sorted(s['status'] for s in results.stages.iter_rows(named=True) if s['stage'] == 'encode'))\n"
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(run), nbformat.v4.new_code_cell(again)])
    env = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", str(tmp_path)), "PYTHONNOUSERSITE": "1",
           "PREFECT_HOME": prefect_home(tmp_path / "node"), "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    client = NotebookClient(notebook, timeout=600, kernel_name="python3", allow_errors=True, env=env,
                            resources={"metadata": {"path": str(tmp_path)}})
    locks, published = tmp_path / "store" / "encode" / ".locks", tmp_path / "store" / "encode"
    with client.setup_kernel():
        kernel = psutil.Process(client.km.provisioner.process.pid)
        failed = []

        def execute() -> None:
            try:
                client.execute_cell(notebook.cells[0], 0)
            except BaseException as e:  # noqa: BLE001 - shown by the assertion below
                failed.append(e)

        cell = threading.Thread(target=execute)
        cell.start()
        deadline = time.monotonic() + 300
        while not [p for p in locks.glob("*") if p.is_file()] or not list(published.glob("*/_manifest.json")):
            assert cell.is_alive() and time.monotonic() < deadline, "no encode under way"
            time.sleep(0.05)
        time.sleep(0.5)
        told = time.monotonic()
        run_sync(client.km.interrupt_kernel)()  # SIGINT to the kernel's process group, as Jupyter sends it
        cell.join(timeout=60)
        assert time.monotonic() - told < 10 and not failed, failed
        outputs = notebook.cells[0].outputs
        errors = [o for o in outputs if o["output_type"] == "error"]
        printed = "".join(o.get("text", "") for o in outputs if o["output_type"] == "stream")
        assert [e["ename"] for e in errors] == ["RunInterrupted"], outputs  # a KeyboardInterrupt
        assert "rbench: stopped" in errors[0]["evalue"] and "resumes" in errors[0]["evalue"]
        assert errors[0]["traceback"] == [errors[0]["evalue"]]  # one line (on 3f3249c, frames through Prefect)
        assert "Traceback" not in printed and "Crash" not in printed and "prefect" not in printed.lower(), printed
        assert not re.search(r" (failed|skipped) |LeaseLost|taken over", printed), printed  # stopped stages: no news
        assert not [p for p in (tmp_path / "store").glob("*/.locks/*") if p.is_file()]
        time.sleep(1)
        stage_processes = [p for p in kernel.children(recursive=True)  # the resource tracker stays the kernel's
                           if not re.search("prefect|resource_tracker", " ".join(p.cmdline()))]
        assert not stage_processes, [p.cmdline() for p in stage_processes]
        done = len(list(published.glob("*/_manifest.json")))
        assert 1 <= done < 4
        client.execute_cell(notebook.cells[1], 1)
    outputs = notebook.cells[1].outputs
    printed = "".join(o.get("text", "") for o in outputs if o["output_type"] == "stream")
    assert not [o for o in outputs if o["output_type"] == "error"], outputs
    assert not [o for o in outputs if o["output_type"] == "display_data"], outputs  # on 5aabe61 each line twice
    assert re.match(r"\d\d:\d\d:\d\d rbench: experiment '\w+': 1 dataset\(s\) x 1 retriever", printed), printed
    assert printed.strip().splitlines()[-1] == str(sorted(["cached"] * done + ["ran"] * (4 - done))), printed
    assert "Traceback" not in printed and "Crash" not in printed and "Warning" not in printed, printed
    stage_lines = re.findall(r"^(encode|index|retrieve|evaluate) +tiny/dense\S* +(ran|cached) ", printed, re.M)
    assert {s for s, _ in stage_lines} == {"encode", "index", "retrieve", "evaluate"}, printed  # the CLI's lines
    assert re.search(r"dense: encoded rows \d+-\d+ of shard", printed), printed  # and its progress lines
