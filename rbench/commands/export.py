"""``rbench export``: a run's TREC run files, qrels and per-query measures."""

from __future__ import annotations

import argparse
from pathlib import Path

from rbench.commands.common import Command, reading_flags, store_of, tracking_uri

def main(args: argparse.Namespace) -> int:
    """The work of ``rbench export``; the exit code."""
    from rbench.tracking.read import export_run

    uri = tracking_uri(args)
    written = export_run(uri, args.run, args.experiment, Path(args.out), store=store_of(args))
    print(f"wrote {len(written)} file(s) to {args.out} (trec_eval -m all_trec {args.out}/DATASET.qrels "
          f"{args.out}/DATASET.SYSTEM.trec scores each as rbench does):")
    for path in written:
        print(f"  {path.name}")
    return 0


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run", help="MLflow parent run id, or 'latest'")
    parser.add_argument("--out", default="export", help="output folder (default: ./export)")
    reading_flags(parser)


COMMANDS = [
    Command("export",
            help="write a run's TREC run files (one per dataset x system) and qrels, which trec_eval, pytrec_eval and"
                 " ranx score as rbench does",
            description="Write a run's TREC run files, <dataset>.<system>.trec, qrels, <dataset>.qrels, and per-query"
                        " measures, <dataset>.<system>.per_query.tsv: trec_eval, pytrec_eval and ranx score the runs "
                        "as rbench does (scores strictly decrease in rbench's order).",
            examples=["rbench export latest --out export", "trec_eval export/fetaqa.qrels export/fetaqa.bm25.trec"],
            arguments=_arguments, main=main),
]
