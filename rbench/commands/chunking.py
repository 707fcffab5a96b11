"""``rbench chunking``: run a chunking grid and score it at span level."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from rbench.commands.common import Command, door, door_flags

def main(args: argparse.Namespace) -> int:
    """The work of ``rbench chunking``; the exit code."""
    from rbench.door import open_experiment

    with open_experiment("chunking", args.config, door(args), corpora=args.corpus) as opened:
        cfg = opened.config
        if cfg.search is not None:
            result = opened.run()
            for t in result.trials:
                print(f"  trial {t['trial']:>3}  {t['params']}  {cfg.search.target} = {t['value']:.4f}")
            print(f"best: {result.best}")
            return 0
        combos = len(cfg.chunk_sizes) * len(cfg.overlaps) * len(cfg.n)
        print(f"rbench: chunking grid {cfg.name!r}: {combos} combinations; data {cfg.data}; model {cfg.model}; "
              f"corpora {cfg.corpora or 'all'}", flush=True)
        started = time.perf_counter()
        result = opened.run()
    ran = sum(1 for s in result.stages if s.status == "ran")
    print((Path(result.report_folder) / "grid.md").read_text())
    print(f"best: {result.best}")
    print(f"stages: {ran} ran, {len(result.stages) - ran} cached; wall time {time.perf_counter() - started:.1f}s")
    print(f"report: {result.report_folder}; MLflow run {result.mlflow_run_id}")
    return 0


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("config", help="grid YAML file, e.g. configs/chunking.yaml")
    parser.add_argument("--mirror", help="mirror folder holding chroma/ (default: $RBENCH_MIRROR)")
    parser.add_argument("--store", help="artifact store folder (overrides the config)")
    parser.add_argument("--corpus", action="append", metavar="ID",
                        help="limit the run to this corpus (corpora/ID.md); repeat for several (overrides 'corpora')")
    door_flags(parser, runner=False)


COMMANDS = [
    Command("chunking",
            help="run a chunking grid (chunk size x overlap x N) at span level",
            description="Run a chunking grid (chunk size x overlap x N) and score it at span level, as Chroma's "
                        "chunking evaluation does.",
            examples=["rbench chunking configs/chunking.yaml --mirror ../shared/data --corpus state_of_the_union"],
            arguments=_arguments, main=main),
]
