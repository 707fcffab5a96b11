"""``rbench run`` and ``rbench embeddings``: run an experiment file, print its metrics and where MLflow has them."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from rbench.commands.common import (
    Command,
    door,
    door_flags,
    print_approximations,
    print_metrics,
    print_samples,
    show_hint,
)
from rbench.core import settings
from rbench.core.errors import PENDING_EXIT
from rbench.core.locations import rbench_command

def main(args: argparse.Namespace) -> int:
    """The work of ``rbench run`` and ``rbench embeddings``; the exit code."""
    from rbench.door import open_experiment

    with open_experiment("embeddings" if args.command == "embeddings" else "benchmark", args.config,
                         door(args)) as opened:
        if args.plan:
            return print_plan(opened)
        return run_opened(opened, force_flow=args.force_flow if args.command == "run" else True)


def print_plan(opened) -> int:
    """``rbench run --plan``: the plan the run would execute, the door's own (:meth:`OpenedExperiment.plan`),
    made after the same checks and data phase (its datasets downloaded and prepared), so that every key
    it prints is the key the run uses; no flow starts and no other stage runs."""
    from rbench.core.store import Store

    cfg = opened.config
    plan = opened.plan()
    print(f"rbench: the plan of experiment {cfg.name!r} on store {cfg.store} (after the data phase; no flow runs)")
    print(f"{'stage':<9} {'label':<40} {'key':<12} status")
    print("\n".join(plan.lines(Store(cfg.store))))
    return 0


def run_opened(opened, force_flow: bool = False) -> int:
    """Run an opened ``benchmark`` or ``embeddings`` experiment as ``rbench run`` does: print its
    header, its metrics and where MLflow has them; the exit code."""
    from rbench.api import run_benchmark
    from rbench.core.errors import said_once_on_console

    cfg = opened.config
    print(opened.header(), flush=True)
    started = time.perf_counter()
    if not force_flow and _nothing_to_do(opened, started):
        return 0
    with said_once_on_console(settings.verbose()):  # the FAILED lines below say each failure
        result = run_benchmark(opened)
    elapsed = time.perf_counter() - started
    ran, cached = result.stage_count("ran"), result.stage_count("cached")
    print_metrics(result.metrics)
    print_samples(cfg, result.stages)
    print_approximations(cfg, result.stages)
    print(f"stages: {ran} ran, {cached} cached, "
          f"{len(result.stages) - ran - cached} failed or skipped; wall time {elapsed:.1f}s")
    if result.mlflow_run_id:
        show_hint(result.mlflow_run_id, result.tracking_uri)
    elif result.mlflow_error:
        print(f"MLflow logging failed: {result.mlflow_error}; the metrics above are in the store, and the "
              f"logging is kept in {result.mlflow_pending}: run `{rbench_command()} log --store {cfg.store}` "
              "(or any run that logs to this tracking URI) to log it", file=sys.stderr)
    if result.report_folder:
        print(f"embedding-model comparison (also logged to MLflow): {result.report_folder}")
        print((Path(result.report_folder) / "models.md").read_text())
    for failure in result.failures:
        print(f"FAILED {failure.dataset}/{failure.retriever}: {failure.error}", file=sys.stderr)
    return 1 if result.failures else PENDING_EXIT if result.mlflow_error else 0


def _nothing_to_do(opened, started: float) -> bool:
    """When every stage is cached and these very results are logged to MLflow already (and no
    earlier logging waits in the store), print them and say so, without a flow: True. Else False."""
    from rbench.api import logged_summary

    summary = logged_summary(opened)
    if summary is None:
        return False
    print_metrics(summary.metrics)
    print_samples(opened.config, summary.stages)
    print_approximations(opened.config, summary.stages)
    print(f"stages: 0 ran, {len(summary.stages)} cached, 0 failed or skipped; wall time "
          f"{time.perf_counter() - started:.1f}s")
    print("every stage is cached and MLflow holds these results already: no flow run started "
          "(--force-flow starts one and logs a new MLflow run)")
    show_hint(summary.mlflow_run_id, summary.tracking_uri)
    return True


def _arguments(parser: argparse.ArgumentParser, force_flow: bool) -> None:
    parser.add_argument("config", help="experiment YAML file, e.g. configs/default.yaml")
    parser.add_argument("--mirror", help="local mirror folder of dataset files (default: $RBENCH_MIRROR)")
    parser.add_argument("--store", help="artifact store folder (default: $RBENCH_STORE, else the config's)")
    door_flags(parser)
    parser.add_argument("--plan", action="store_true",
                        help="print the run's plan (each stage, its key, cached or to run, the runner) after its "
                        "checks and data phase, and start no flow")
    if force_flow:
        parser.add_argument("--force-flow", action="store_true",
                            help="start the flow (and log a new MLflow run) even when every stage is cached and "
                            "MLflow holds these results already")
    else:
        parser.set_defaults(force_flow=False)


COMMANDS = [
    Command("run",
            help="run an experiment YAML file",
            description="Run an experiment YAML file: download, prepare, subsample, index, retrieve and evaluate "
                        "every dataset x retriever pair, then log the metrics to MLflow. Stages are cached in the "
                        "store by content: a rerun builds only what a change touched, and a rerun that changes "
                        "nothing starts no flow.",
            examples=[
                "rbench run configs/default.yaml --mirror ../shared/data",
                "rbench run my-corpus.yaml --store /data/rbench --runner dask",
            ],
            arguments=lambda p: _arguments(p, force_flow=True), main=main),
    Command("embeddings",
            help="run an experiment and compare its dense models (table, plots)",
            description="Run an experiment and compare its dense models: recall@k, throughput and index size per "
                        "model, as a table and plots.",
            examples=["rbench embeddings configs/embeddings.yaml --mirror ../shared/data"],
            arguments=lambda p: _arguments(p, force_flow=False), main=main),
]
