"""``rbench show``: the metrics of a finished run, from MLflow."""

from __future__ import annotations

import argparse

from rbench.commands.common import MEASURES_HELP, Command, reading_flags, store_of, tracking_uri
from rbench.core.secrets import redact

def main(args: argparse.Namespace) -> int:
    """The work of ``rbench show``; the exit code."""
    from rbench.console_tables import measures_table, metrics_table
    from rbench.tracking.read import load_chunking_table, load_results

    uri = tracking_uri(args)
    if args.measures:
        from rbench.systems import gather, parse_measures

        measures = parse_measures(args.measures)
        systems = gather(measures, [args.run], tracking_uri=uri, experiment=args.experiment, store=store_of(args))
        (parent,) = systems.parents
        print(f"run {parent.info.run_id} ({parent.info.run_name}), {redact(uri)}")
        print(measures_table(systems.scores, measures))
        return 0
    chunking = load_chunking_table(uri, args.run, args.experiment)
    if chunking is not None:
        parent, table = chunking
        print(f"chunking grid run {parent.info.run_id} ({parent.info.run_name}), {redact(uri)}")
        print(table)
        return 0
    (parent,), rows, _ = load_results(uri, [args.run], args.experiment)
    print(f"run {parent.info.run_id} ({parent.info.run_name}), {redact(uri)}")
    print(metrics_table(rows))
    return 0


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run", help="MLflow parent run id, or 'latest'")
    parser.add_argument("--measures", nargs="+", metavar="MEASURE", help=MEASURES_HELP)
    reading_flags(parser)


COMMANDS = [
    Command("show",
            help="print the metrics of a finished run (an experiment or a chunking grid)",
            description="Print the metrics table of a finished run (an experiment or a chunking grid) from MLflow; "
                        "with --measures, those measures (rbench's or ir_measures' names) per system.",
            examples=[
                "rbench show latest",
                "rbench show 7474e0875eb448178fc1305f05ca627c --store /data/rbench",
                "rbench show latest --measures \"P@10 AP nDCG@10 R@100\"",
            ],
            arguments=_arguments, main=main),
]
