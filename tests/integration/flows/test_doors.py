"""Every way into rbench honours the same settings (issue 58): each door (``rbench run``,
``embeddings``, ``search``, ``chunking``, ``reproduce`` and :func:`rbench.run`) opens its file through
:func:`rbench.door.open_experiment`. Checked here by where the results went (the store's stages, the
MLflow database and the runner its parent run records) and by a cluster address that does not
answer, which every door that takes one must refuse before any work. About 60 s: tiny inputs, a
64-dimension static encoder, one Prefect test server."""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path

import pytest
import yaml

import rbench
from rbench.cli import main
from rbench.core.errors import ConfigError
from tests.conftest import tiny_dataset
from tests.unit.tasks.test_chunking_eval import make_eval_set

pytestmark = pytest.mark.usefixtures("prefect_server")  # one Prefect test server per session

DOORS = ["run", "embeddings", "search", "chunking", "reproduce", "api"]
RUNNERS = {"run", "embeddings", "search", "reproduce", "api"}  # chunking runs its cells in the flow, one by one


def _config(tmp_path: Path, door: str, tiny_files, **extra) -> Path:
    corpus, queries = tiny_files
    experiment = {"name": f"door-{door}", "depth": 10, "subsample": {"size": 4}, "metrics": {"k": [1, 3]},
                  "datasets": [tiny_dataset(corpus, queries)], "retrievers": [{"name": "bm25s"}], **extra}
    if door == "embeddings":
        experiment["retrievers"] = [{"name": "dense", "params": {"model": "static-64d"}}]
    if door == "search":
        experiment["search"] = {"retriever": "bm25s", "metric": "recall", "k": 3, "strategy": "grid", "budget": 2,
                                "grid_points": 2, "space": {"k1": {"low": 0.9, "high": 1.2}}}
    if door == "chunking":
        data = tmp_path / "set"
        if not data.exists():
            make_eval_set(data)
        experiment = {"name": "door-chunking", "data": str(data), "model": "static-64d", "chunk_sizes": [30],
                      "overlaps": [0.0], "n": [1], **extra}
    path = tmp_path / f"{door}.yaml"
    path.write_text(yaml.safe_dump(experiment))
    return path


def _enter(door: str, config: Path, store: Path | None = None, tracking_uri: str | None = None,
           runner: str | None = None, address: str | None = None) -> int:
    """Run ``config`` through ``door`` with these settings (None: not given); the exit code."""
    if door == "api":
        try:
            rbench.run(config, store=store, tracking_uri=tracking_uri, runner=runner, address=address)
        except ConfigError as e:
            print(f"rbench: error: {e}", file=sys.stderr)  # as the command prints it
            return 2
        return 0
    flags = [*(["--store", str(store)] if store else []), *(["--tracking-uri", tracking_uri] if tracking_uri else []),
             *(["--runner", runner] if runner else []), *(["--address", address] if address else [])]
    if door == "reproduce":  # a reproduction of one local study, the config, against a table rbench ships
        study = config.with_name("repro.yaml")
        study.write_text(yaml.safe_dump({"name": "door-repro", "title": "doors", "tables": ["arm-report-table6"],
                                         "studies": [{"config": str(config)}]}))
        return main([door, str(study), "--out", str(config.with_name("reproduction")), *flags])
    return main([door, str(config), *flags])


def _parents(uri: str, door: str) -> list:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    runs = [r for e in client.search_experiments() for r in client.search_runs([e.experiment_id])]
    return [r for r in runs if "mlflow.parentRunId" not in r.data.tags and r.info.run_name.startswith(f"door-{door}")]


def _stages(store: Path) -> set[str]:
    return {p.name for p in store.iterdir() if p.is_dir() and any(p.glob("*/_manifest.json"))}


@pytest.mark.parametrize("door", DOORS)
def test_every_door_honours_the_flags_and_the_environment(door, tmp_path, tiny_files, monkeypatch):
    """Flags (``--store``, ``--tracking-uri``, ``--runner``; the API's arguments) win over the
    environment, and the environment (``RBENCH_STORE``, ``MLFLOW_TRACKING_URI``) over the file. On
    main, ``embeddings`` logged to the store's database under ``MLFLOW_TRACKING_URI`` and took no
    runner, and ``search`` took neither flag."""
    config = _config(tmp_path, door, tiny_files, store=str(tmp_path / "file-store"))
    monkeypatch.setenv("RBENCH_STORE", str(tmp_path / "env-store"))
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'env-mlflow' / 'mlflow.db'}")
    flagged = f"sqlite:///{tmp_path / 'flag-mlflow' / 'mlflow.db'}"
    runner = "sequential" if door in RUNNERS else None
    assert _enter(door, config, tmp_path / "flag-store", flagged, runner) == 0
    assert _stages(tmp_path / "flag-store")
    assert not (tmp_path / "env-store").exists() and not (tmp_path / "file-store").exists()
    (parent,) = _parents(flagged, door)
    if runner:
        assert parent.data.params["execution.runner"] == "sequential"
    assert not (tmp_path / "env-mlflow").exists() and not (tmp_path / "flag-store" / "mlflow.db").exists()

    assert _enter(door, config) == 0  # the environment's store and tracking URI
    assert _stages(tmp_path / "env-store") and not (tmp_path / "file-store").exists()
    assert len(_parents(f"sqlite:///{tmp_path / 'env-mlflow' / 'mlflow.db'}", door)) == 1
    if runner:
        assert _parents(f"sqlite:///{tmp_path / 'env-mlflow' / 'mlflow.db'}", door)[0].data.params[
            "execution.runner"] == "threads"  # the file's (its default)


@pytest.mark.parametrize("door", sorted(RUNNERS))
@pytest.mark.parametrize("given", ["flag", "file"])
def test_every_door_refuses_a_cluster_that_does_not_answer_before_any_work(door, given, tmp_path, tiny_files,
                                                                         capsys):
    """``--runner dask --address`` (or the file's ``execution``) of a scheduler that is not there
    ends the run at once with one message, through every door that runs stages: the address
    reached the runner. On main ``embeddings`` and ``search`` ran on threads instead (and a
    reachable-looking address failed minutes later with distributed's traceback)."""
    address = "tcp://127.0.0.1:9"  # the discard port: nothing listens
    extra = {"execution": {"runner": "dask", "address": address}} if given == "file" else {}
    config = _config(tmp_path, door, tiny_files, store=str(tmp_path / "store"), **extra)
    started = time.monotonic()
    flags = {"runner": "dask", "address": address} if given == "flag" else {}
    assert _enter(door, config, **flags) == 2
    assert time.monotonic() - started < 30
    assert f"the dask cluster at {address} does not answer" in capsys.readouterr().err
    assert not (tmp_path / "store").exists() or not _stages(tmp_path / "store")


def _counted(monkeypatch, *names: str) -> dict[str, int]:
    """How often each of ``rbench.experiment``'s functions ``names`` is called from now on."""
    import rbench.experiment as experiment

    calls = dict.fromkeys(names, 0)
    for name in names:
        def counted(*args, _name=name, _original=getattr(experiment, name), **kwargs):
            calls[_name] += 1
            return _original(*args, **kwargs)

        monkeypatch.setattr(experiment, name, counted)
    return calls


def test_one_run_resolves_its_file_once_and_checks_it_once(tmp_path, tiny_files, monkeypatch):
    """The door resolves and checks; the flow it starts takes that experiment. On main one ``rbench
    run`` resolved its file three times and ran the pre-flight twice."""
    calls = _counted(monkeypatch, "load_config", "preflight")
    config = _config(tmp_path, "run", tiny_files, store=str(tmp_path / "store"))
    assert main(["run", str(config)]) == 0
    assert calls == {"load_config": 1, "preflight": 1}


def test_a_cold_run_plans_once_builds_each_retriever_once_and_reads_its_file_once(tmp_path, tiny_files, monkeypatch,
                                                                                capsys):
    """Issue 67, item 1: one cold ``rbench run`` of one dataset x two retrievers makes its plan once,
    builds each retriever once (the pre-flight; the plan asks the same object, issue 80, item 1; it was
    twice) and reads its YAML file once; ``rbench run --plan`` then prints the plan, every stage cached,
    without starting a flow. On 6e8e733: the stage graph built twice plus two hand re-derivations, six
    builds per retriever, three reads."""
    import builtins
    from collections import Counter

    import rbench.door
    from rbench.orchestration import graph
    from rbench.retrievers.base import RetrieverSpec

    retrievers = [{"name": "bm25s"}, {"name": "bm25s", "label": "bm25s-k1", "params": {"k1": 1.2}}]
    config = _config(tmp_path, "run", tiny_files, store=str(tmp_path / "store"), retrievers=retrievers).resolve()
    plans, builds, reads = [], Counter(), []
    plan_experiment, build, read_text, open_file = graph.plan_experiment, RetrieverSpec.build, Path.read_text, open

    def counted_read(path, *args, **kwargs):
        reads.extend(["read_text"] if Path(path).resolve() == config else [])
        return read_text(path, *args, **kwargs)

    def counted_open(file, *args, **kwargs):
        reads.extend(["open"] if isinstance(file, (str, Path)) and Path(file).resolve() == config else [])
        return open_file(file, *args, **kwargs)

    monkeypatch.setattr(graph, "plan_experiment", lambda *a, **k: plans.append(1) or plan_experiment(*a, **k))
    monkeypatch.setattr(RetrieverSpec, "build", lambda self: builds.update([self.label]) or build(self))
    monkeypatch.setattr(Path, "read_text", counted_read)
    monkeypatch.setattr(builtins, "open", counted_open)
    assert main(["run", str(config)]) == 0
    assert len(plans) == 1 and builds == {"bm25s": 1, "bm25s-k1": 1} and reads == ["open"]
    capsys.readouterr()
    flows = []
    monkeypatch.setattr(rbench.door, "run_flow", lambda *a, **k: flows.append(a))
    assert main(["run", str(config), "--plan"]) == 0
    out = capsys.readouterr().out
    assert not flows and "no flow runs" in out
    rows = [line.split() for line in out.splitlines() if line.split()[:1] and line.split()[0] in
            ("download", "prepare", "subsample", "index", "retrieve", "evaluate")]
    assert [r[:2] for r in rows] == [["download", "tiny"], ["prepare", "tiny"], ["subsample", "tiny"],
                                     ["index", "tiny/bm25s"], ["retrieve", "tiny/bm25s"], ["evaluate", "tiny/bm25s"],
                                     ["index", "tiny/bm25s#2"], ["retrieve", "tiny/bm25s-k1"],
                                     ["evaluate", "tiny/bm25s-k1"]]  # bm25s's k1 shapes its index: a second one
    assert {r[3] for r in rows} == {"cached"} and "9 stages: 9 cached, 0 to run; 2 dataset x retriever pairs" in out


def test_the_plan_printed_on_a_cold_store_has_the_keys_the_run_builds(tmp_path, tiny_files, monkeypatch, capsys):
    """Issue 80, item 2: on main, ``--plan`` made a plan of its own with no data phase; on a cold store 7 of 9 stages
    printed ``to run (keyed once prepared)``. Now it prints the door's plan after the data phase: every key, and
    each the key the run then builds."""
    import rbench.door
    from rbench.core.store import Store

    retrievers = [{"name": "bm25s"}, {"name": "bm25s", "label": "bm25s-k1", "params": {"k1": 1.2}}]
    config = _config(tmp_path, "plan", tiny_files, store=str(tmp_path / "store"), retrievers=retrievers).resolve()
    flows = []
    with monkeypatch.context() as patched:
        patched.setattr(rbench.door, "run_flow", lambda *a, **k: flows.append(a))
        assert main(["run", str(config), "--plan"]) == 0
    out = capsys.readouterr().out
    stages = ("download", "prepare", "subsample", "index", "retrieve", "evaluate")
    planned = {(r[0], r[1]): r[2] for r in (line.split() for line in out.splitlines()) if r[:1] and r[0] in stages}
    assert not flows and len(planned) == 9 and "keyed once" not in out and "-" not in planned.values()
    assert main(["run", str(config)]) == 0
    built = {(stage, key[:12]) for stage in stages for key in (p.name for p in (Store(tmp_path / "store").root / stage)
                                                                 .glob("*") if not p.name.startswith((".", "_")))}
    assert {(stage, key) for (stage, _), key in planned.items()} <= built


def test_a_run_owns_one_session_that_its_flow_and_stage_threads_read(tmp_path, tiny_files, monkeypatch):
    """Issue 67, item 3: the door opens one :class:`~rbench.core.session.RunSession`; the flow it
    starts and every lease the run's builds take (stage threads of Prefect's runner among them)
    belong to it, it holds none once the run ended, and no session is current after the run.
    A second run gets a session of its own (a notebook's runs share no stop state)."""
    import threading

    import rbench.door
    from rbench.core import session as sessions
    from rbench.core.lease import Lease

    flows, leases = [], []
    run_flow, try_acquire = rbench.door.run_flow, Lease.try_acquire

    def taking(self):
        taken = try_acquire(self)
        leases.extend([(threading.current_thread(), sessions.current())] if taken else [])
        return taken

    monkeypatch.setattr(rbench.door, "run_flow", lambda *a, **k: flows.append(sessions.current()) or run_flow(*a, **k))
    monkeypatch.setattr(Lease, "try_acquire", taking)
    for store in ("first", "second"):
        rbench.run(_config(tmp_path, "run", tiny_files, store=str(tmp_path / store)))
    first, second = flows
    assert first is not None and second is not None and first is not second and sessions.current() is None
    assert {id(session) for _, session in leases} == {id(first), id(second)}
    assert any(thread is not threading.main_thread() for thread, _ in leases)  # the stage threads' leases too
    assert not first.leases and not second.leases and not first.stopping.is_set()


def test_rbench_run_takes_what_a_notebook_holds_a_mapping_or_an_experiment_config(tmp_path, tiny_files,
                                                                                  monkeypatch):
    """Issue 67, item 7: ``rbench.run`` takes a mapping or an ``ExperimentConfig`` as it takes a file
    (on main at 3f3249c: ``TypeError: expected str, bytes or os.PathLike object, not dict``). Resolved
    and checked once, by the door; the flow takes it as its ``experiment``; the same config again
    reads the logged results back."""
    from rbench.config import parse_config

    calls = _counted(monkeypatch, "resolve_experiment", "preflight")
    raw = yaml.safe_load(_config(tmp_path, "mapping", tiny_files, store=str(tmp_path / "store")).read_text())
    first = rbench.run(raw)
    assert calls == {"resolve_experiment": 1, "preflight": 1}
    assert set(first.stages["status"]) == {"ran"} and first.mlflow_run_id
    again = rbench.run(parse_config(raw))
    assert again.mlflow_run_id == first.mlflow_run_id and set(again.stages["status"]) == {"cached"}
    assert again.table() == first.table()


def test_the_store_follows_the_file_wherever_a_run_or_a_reading_command_starts(tmp_path, tiny_files, monkeypatch,
                                                                               capsys):
    """Issue 70, item 5: a file without ``store:``, run from one folder, then from another: on main
    at 3f3249c the second run built a new ``.rbench`` there and reran every stage, and ``show``,
    ``report``, ``export`` started elsewhere said "no MLflow database". Now the second run uses the
    first's store (its header says so, nothing reruns), ``show RUN_ID`` from any folder finds the
    run in the stores earlier runs recorded, and ``--config FILE`` reads the file's store."""
    for name in ("RBENCH_STORE", "MLFLOW_TRACKING_URI"):
        monkeypatch.delenv(name, raising=False)
    config = _config(tmp_path, "follow", tiny_files)
    first, second, elsewhere = (tmp_path / name for name in ("first", "second", "elsewhere"))
    for folder in (first, second, elsewhere):
        folder.mkdir()
    monkeypatch.chdir(first)
    assert main(["run", str(config)]) == 0
    run_id = re.search(r"MLflow run ([0-9a-f]{32})", capsys.readouterr().out).group(1)
    monkeypatch.chdir(second)
    assert main(["run", str(config)]) == 0
    out = capsys.readouterr().out
    assert f"store {first / '.rbench'} (this file's last run's" in out and "stages: 0 ran" in out, out[-2000:]
    assert not (second / ".rbench").exists()
    monkeypatch.chdir(elsewhere)
    assert main(["show", run_id]) == 0
    shown = capsys.readouterr()
    assert f"run {run_id} is in the store {first / '.rbench'}" in shown.err and "tiny / bm25s" in shown.out
    assert main(["show", "latest", "--config", str(config)]) == 0
    assert f"run {run_id} " in capsys.readouterr().out
    assert main(["export", run_id, "--out", str(elsewhere / "export")]) == 0
    assert (elsewhere / "export").is_dir() and not (elsewhere / ".rbench").exists()
    assert main(["run", str(config), "--store", str(elsewhere / "mine")]) == 0  # a store named wins
    assert "this file's last run's" not in capsys.readouterr().out
    monkeypatch.chdir(second)  # and is not followed later (a test's temporary store, a one-off)
    assert main(["run", str(config)]) == 0
    assert f"store {first / '.rbench'} (this file's last run's" in capsys.readouterr().out
