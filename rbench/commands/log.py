"""``rbench log``: the MLflow logging of runs whose logging failed, from the records kept in the store."""

from __future__ import annotations

import argparse
from pathlib import Path

from rbench.commands.common import Command

def main(args: argparse.Namespace) -> int:
    """The work of ``rbench log``; the exit code."""
    from rbench.core.locations import given_tracking_uri, resolve_store
    from rbench.core.store import Store
    from rbench.tracking.pending import log_pending, pending_records

    store = Store(resolve_store(args.store))
    records = [Path(r) for r in args.records] or pending_records(store)
    if not records:
        print(f"rbench: no pending MLflow logging in {store.root}")
        return 0
    uri = given_tracking_uri(args.tracking_uri)
    for record in records:
        run_id = log_pending(record, uri)
        print(f"rbench: logged {record.name} as MLflow run {run_id}")
    return 0


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("records", nargs="*", help="pending records (default: every one in the store)")
    parser.add_argument("--store", help="store folder (default: $RBENCH_STORE, else ./.rbench)")
    parser.add_argument("--tracking-uri", help="MLflow tracking URI (default: $MLFLOW_TRACKING_URI, else the "
                        "recorded one)")


COMMANDS = [
    Command("log",
            help="log to MLflow the runs whose logging failed (kept in the store)",
            description="Log to MLflow the runs whose logging failed (the tracking server was down); their records "
                        "are kept in the store.",
            examples=["rbench log --store .rbench"],
            arguments=_arguments, main=main),
]
