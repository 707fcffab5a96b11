"""``rbench compare-grid``: a chunking grid run lined up against a published grid, cell by cell."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rbench.commands.common import Command, reading_flags, tracking_uri
from rbench.core.errors import RbenchError

def main(args: argparse.Namespace) -> int:
    """The work of ``rbench compare-grid``; the exit code."""
    import csv
    import io

    from rbench.evaluation.reproduction_grids import compare_grid, grid_markdown, load_grid
    from rbench.tracking.read import load_chunking_table, log_reproduction

    grid = load_grid(args.against)
    uri = tracking_uri(args)
    found = load_chunking_table(uri, args.run, args.experiment, "grid.csv")
    if found is None:
        raise RbenchError(f"run {args.run!r} of experiment {args.experiment!r} is not a chunking grid run: pass the "
                          "run id of `rbench chunking` (its experiment is rbench-chunking)")
    parent, text = found
    cells = compare_grid(grid, list(csv.DictReader(io.StringIO(text))))
    run = f"{parent.info.run_name} ({parent.info.run_id[:8]})"
    markdown, line = grid_markdown(grid, cells, run)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{grid.name}.md").write_text(markdown, encoding="utf-8")
    data = json.dumps({"run": run, "against": grid.name, "cells": cells}, indent=1)
    (out / f"{grid.name}.json").write_text(data, encoding="utf-8")
    log_reproduction(uri, parent.info.run_id, grid.name, data, line)
    print(markdown)
    print(f"wrote {out / (grid.name + '.md')} and .json; logged to MLflow run {parent.info.run_id}")
    return 0


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run", help="MLflow run id of `rbench chunking`, or 'latest'")
    parser.add_argument("--against", required=True, metavar="NAME",
                        help="a published grid rbench ships (seed002-sotu-fixedtoken-minilm) or a YAML file")
    parser.add_argument("--out", default="reproduction", help="output folder (default: ./reproduction)")
    reading_flags(parser, experiment="rbench-chunking", experiment_help="the MLflow experiment 'latest' is read from "
                  "(default: rbench-chunking, where chunking grids log)")


COMMANDS = [
    Command("compare-grid",
            help="line a chunking grid run up against a published grid, cell by cell",
            description="Line a chunking grid run up against a published grid, cell by cell.",
            examples=["rbench compare-grid latest --against seed002-sotu-fixedtoken-minilm"],
            arguments=_arguments, main=main),
]
