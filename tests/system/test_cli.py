"""The rbench command: list, and the named error for bad input."""

from __future__ import annotations

from pathlib import Path

from rbench.cli import main


def test_list_shows_datasets_retrievers_models_and_tables(capsys):
    """Each name as a whole word (on main ``bm25`` was found inside ``bm25s``), a registered dataset or
    retriever at the start of its own line (``<bm25>`` in another's defaults does not count)."""
    import re

    assert main(["list"]) == 0
    out = capsys.readouterr().out
    for name in ("fetaqa", "jsonl", "bm25", "bm25s", "dense"):
        assert re.search(rf"^  {re.escape(name)} ", out, re.M), name
    for name in ("sentence-transformers/all-MiniLM-L6-v2", "static-64d", "HuggingFaceTB/SmolLM2-135M-Instruct",
                 "smollm2-135m", "cross-encoders", "arm-report-table6", "seed002-sotu-fixedtoken-minilm"):
        assert re.search(rf"(?<![\w/-]){re.escape(name)}(?![\w/-])", out), name


def test_list_datasets_reads_the_mirror_the_stores_last_run_read(tmp_path, monkeypatch, capsys):
    from rbench.core.locations import remember_mirror

    monkeypatch.delenv("RBENCH_MIRROR", raising=False)
    mirror = tmp_path / "mirror"
    (mirror / "fetaqa").mkdir(parents=True)
    assert main(["list", "datasets", "--store", str(tmp_path / "store")]) == 0
    assert "mirror: none" in capsys.readouterr().out
    remember_mirror(tmp_path / "store", mirror)
    assert main(["list", "datasets", "--store", str(tmp_path / "store")]) == 0
    out = capsys.readouterr().out
    assert f"mirror: {mirror} (the last 'rbench run' into this store read it)" in out
    assert "downloaded by ir_datasets on first use" in out  # issue 70, item 11: it said "local paths"
    assert f"looks for {mirror}/table_bench/TableBench.jsonl\n" in out  # issue 79, item 5: the layout said
    assert f"looks for {mirror}/target/spider-corpus-test/spider-corpus-test.json, {mirror}/target/spider-queries-test\n" in out
    assert f"looks for {mirror}/fetaqa/fetaQA-v1_test.jsonl\n" in out


def test_the_datasets_page_shows_every_adapters_mirror_layout():
    from rbench.dataset_adapters.base import ADAPTERS
    from rbench.dataset_listing import mirror_layout_table

    table = mirror_layout_table()
    assert all(f"| `{name}` |" in table for name in ADAPTERS.names())
    assert "| `tablebench` | default | `table_bench/TableBench.jsonl` |" in table
    page = (Path(__file__).resolve().parents[2] / "docs" / "datasets.md").read_text()
    hook = (Path(__file__).resolve().parents[2] / "docs" / "hooks" / "generated.py").read_text()
    assert "<!-- the mirror layout: rbench.dataset_listing.mirror_layout_table() -->" in page and \
        "mirror_layout_table" in hook


def test_bad_config_exits_2_with_the_reason(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("datasets: [{name: fetaqa}]\nretrievers: [{name: splade}]\n")
    assert main(["run", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "unknown retriever 'splade'" in err and "bm25" in err


def test_reading_a_store_without_a_database_is_a_named_error_that_creates_nothing(tmp_path, capsys):
    for command in (["show", "0123456789abcdef"], ["runs"], ["report", "latest"], ["export", "latest", "--out", "x"]):
        assert main([*command, "--store", str(tmp_path / "store")]) == 2
        assert f"no MLflow database at sqlite:///{tmp_path / 'store' / 'mlflow.db'}" in capsys.readouterr().err
    assert not (tmp_path / "store").exists()


def test_a_user_error_in_a_task_is_logged_without_the_engines_traceback(monkeypatch):
    import io
    import logging

    from rbench.core.errors import DataError, quiet_user_errors

    monkeypatch.delenv("RBENCH_DEBUG", raising=False)
    quiet_user_errors()
    logger, out = logging.getLogger("prefect.task_runs"), io.StringIO()
    handler = logging.StreamHandler(out)
    logger.addHandler(handler)
    try:
        for error in (DataError("dataset 'x': bad gold"), KeyError("a bug")):
            try:
                raise error
            except Exception:
                logger.error("Task run failed with exception: %r", error, exc_info=True)
    finally:
        logger.removeHandler(handler)
    text = out.getvalue()
    assert "bad gold" in text and text.count("Traceback") == 1 and "KeyError: 'a bug'" in text


def test_task_successes_reach_the_console_only_when_verbose(monkeypatch):
    """Issue 70, item 7: ``rbench run`` drops the engine's "Finished in state Completed()" lines
    from the console; ``rbench --verbose`` keeps them (and sets RBENCH_VERBOSE for the stages)."""
    import io
    import logging

    from rbench.core import settings
    from rbench.core.errors import said_once_on_console

    logger, shown = logging.getLogger("prefect.task_runs"), {}
    monkeypatch.setattr(logger, "level", logging.INFO)
    for verbose in (False, True):
        out = io.StringIO()
        handler = logging.StreamHandler(out)
        logging.getLogger().addHandler(handler)
        try:
            with said_once_on_console(verbose):
                logger.info("Finished in state Completed()")
                logger.info("Task run 'x' started")
        finally:
            logging.getLogger().removeHandler(handler)
        shown[verbose] = out.getvalue()
    assert "Completed()" not in shown[False] and "started" in shown[False]
    assert "Completed()" in shown[True]
    monkeypatch.setenv("RBENCH_VERBOSE", "")  # unset, and restored after the test
    assert not settings.verbose() and main(["--verbose", "list", "retrievers"]) == 0 and settings.verbose()


def test_a_bad_corpus_line_is_one_message_before_the_prefect_server(tmp_path):
    import json
    import os
    import subprocess
    import sys

    import yaml

    from tests.conftest import CORPUS, QUERIES, REPO, prefect_home, tiny_dataset

    corpus, queries = tmp_path / "c.jsonl", tmp_path / "q.jsonl"
    lines = [json.dumps(c) for c in CORPUS]
    lines.insert(3, "{broken")
    corpus.write_text("\n".join(lines) + "\n")
    queries.write_text("".join(json.dumps(q) + "\n" for q in QUERIES))
    config = tmp_path / "exp.yaml"
    config.write_text(yaml.safe_dump({"name": "bad", "store": str(tmp_path / "store"), "subsample": {"size": 3},
                                      "datasets": [tiny_dataset(corpus, queries)], "retrievers": [{"name": "bm25s"}]}))
    env = {**os.environ, "PREFECT_HOME": prefect_home(tmp_path / "home"), "PREFECT_LOGGING_LEVEL": "INFO"}
    env.pop("PREFECT_API_URL", None)
    env.pop("MLFLOW_TRACKING_URI", None)
    proc = subprocess.run([sys.executable, "-m", "rbench.cli", "run", str(config)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 2, output
    assert output.count(f"{corpus}:4 is not valid JSON") == 1
    assert "Starting temporary server" not in output and "Traceback" not in output
    assert not (tmp_path / "store" / "mlflow.db").exists() and "metric" not in proc.stdout


def _tiny_run(tmp_path, **env_vars: str):
    """``rbench run`` of a tiny bm25s experiment in a fresh Prefect home (a temporary server)."""
    import json
    import os
    import subprocess
    import sys

    import yaml

    from tests.conftest import CORPUS, QUERIES, REPO, prefect_home, tiny_dataset

    corpus, queries = tmp_path / "c.jsonl", tmp_path / "q.jsonl"
    corpus.write_text("".join(json.dumps(c) + "\n" for c in CORPUS))
    queries.write_text("".join(json.dumps(q) + "\n" for q in QUERIES))
    config = tmp_path / "exp.yaml"
    config.write_text(yaml.safe_dump({"name": "quiet", "store": str(tmp_path / "store"), "subsample": {"size": 3},
                                      "datasets": [tiny_dataset(corpus, queries)], "retrievers": [{"name": "bm25s"}]}))
    env = {**os.environ, "PREFECT_HOME": prefect_home(tmp_path / "home"), **env_vars}
    env.pop("PREFECT_API_URL", None)
    env.pop("MLFLOW_TRACKING_URI", None)
    return subprocess.run([sys.executable, "-m", "rbench.cli", "run", str(config)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300)


def test_the_temporary_servers_own_output_goes_to_its_log_not_the_terminal(tmp_path):
    """Prefect's temporary server logs its services' troubles (sqlite "database is locked" under
    load) as tracebacks: they go to ``$PREFECT_HOME/temporary-server.log``, and the run's own
    stderr holds rbench's lines only. The server logs at DEBUG here so that it surely writes."""
    proc = _tiny_run(tmp_path, PREFECT_SERVER_LOGGING_LEVEL="DEBUG")
    assert proc.returncode == 0, proc.stderr[-3000:]
    log = (tmp_path / "home" / "temporary-server.log").read_text()
    assert "uvicorn.error - Started server process" in log and "prefect.server" in log
    assert "uvicorn" not in proc.stderr and "prefect.server" not in proc.stderr, proc.stderr[-3000:]


def test_a_temporary_server_that_does_not_start_is_one_error_that_points_to_its_log(tmp_path):
    """A server that cannot start (its database folder does not exist) ends the run with exit code
    2 and one error that says so, shows the last lines of the log its output went to, and names
    the way on; not Prefect's traceback, and no wait for a server that has ended."""
    proc = _tiny_run(tmp_path, PREFECT_SERVER_DATABASE_CONNECTION_URL="sqlite+aiosqlite:////nonexistent/rbench/db",
                     RBENCH_SERVER_STARTUP_SECONDS="300")
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "Prefect's temporary server ended as it started (exit code " in proc.stderr
    log = tmp_path / "home" / "temporary-server.log"
    assert f"its output is in {log}:\n" in proc.stderr, proc.stderr[-3000:]  # it has ended: its output is all there
    shown = proc.stderr.split(f"its output is in {log}:\n", 1)[1].splitlines()
    lines = [line for line in log.read_text().splitlines() if line.strip()]
    assert [line[2:] for line in shown[:5]] == lines[-5:], (shown[:5], lines[-10:])
    assert "Traceback" not in proc.stderr and "set PREFECT_API_URL" in proc.stderr
