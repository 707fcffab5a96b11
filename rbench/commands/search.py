"""``rbench search``: search a retriever's parameters on an experiment with a ``search:`` section."""

from __future__ import annotations

import argparse
import time

from rbench.commands.common import Command, door, door_flags

def main(args: argparse.Namespace) -> int:
    """The work of ``rbench search``; the exit code."""
    from rbench.door import open_experiment

    with open_experiment("search", args.config, door(args)) as opened:
        search = opened.search
        print(f"rbench: {search.strategy} search of {search.retriever!r} over {list(search.space)}, "
              f"budget {search.budget}, target {search.target}; runner {opened.config.execution.runner}",
              flush=True)
        started = time.perf_counter()
        result = opened.run()
    for t in result.trials:
        print(f"  trial {t['trial']:>3}  {t['params']}  {search.target} = {t['value']:.4f}"
              f"  ({t['stages_ran']} stages ran)")
    best = result.best
    print(f"best: trial {best['trial']} {best['params']} {search.target} = {best['value']:.4f}; "
          f"wall time {time.perf_counter() - started:.1f}s; MLflow run {result.mlflow_run_id}")
    return 0


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("config", help="experiment YAML with a 'search:' section, e.g. configs/search-bm25.yaml")
    parser.add_argument("--mirror", help="local mirror folder of dataset files (default: $RBENCH_MIRROR)")
    parser.add_argument("--store", help="artifact store folder (overrides the config)")
    door_flags(parser)


COMMANDS = [
    Command("search",
            help="search a retriever's parameters (grid, random, TPE)",
            description="Search a retriever's parameters (grid, random or TPE) on an experiment with a 'search:' "
                        "section; each trial is a cached run, the best is logged.",
            examples=["rbench search configs/search-bm25.yaml"],
            arguments=_arguments, main=main),
]
