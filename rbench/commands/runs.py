"""``rbench runs``: the newest runs in a store's MLflow database."""

from __future__ import annotations

import argparse

from rbench.commands.common import Command, reading_flags, tracking_uri
from rbench.core.secrets import redact

def main(args: argparse.Namespace) -> int:
    """The work of ``rbench runs``; the exit code."""
    from rbench.tracking.read import list_runs

    uri = tracking_uri(args)
    runs = list_runs(uri, args.experiment, args.limit)
    print(f"{len(runs)} newest run(s) at {redact(uri)}" + (f", experiment {args.experiment!r}" if args.experiment
                                                           else ""))
    if runs:
        print(f"{'run id':<32}  {'started':<16}  {'status':<8}  {'experiment':<18}  name: systems")
    for r in runs:
        what = ", ".join(r["systems"]) or r["kind"]
        print(f"{r['id']:<32}  {r['started']:<16}  {r['status']:<8}  {r['experiment']:<18}  {r['name']}: {what}")
    return 0


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--limit", type=int, default=20, help="how many runs (default 20)")
    reading_flags(parser, experiment_help="the MLflow experiment whose runs to list (default: every experiment)")


COMMANDS = [
    Command("runs",
            help="list the newest runs in a store's MLflow database",
            description="List the newest runs in a store's MLflow database (or a tracking server), of every "
                        "experiment: id, start, status, experiment, and the dataset.system pairs each holds.",
            examples=["rbench runs", "rbench runs --store /data/rbench --experiment my-corpus --limit 50"],
            arguments=_arguments, main=main),
]
