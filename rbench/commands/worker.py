"""``rbench worker``: a Prefect process worker whose shutdown stops its flow runs as rbench stops."""

from __future__ import annotations

import argparse

from rbench.commands.common import Command, positive

def main(args: argparse.Namespace) -> int:
    """The work of ``rbench worker``; the exit code."""
    from rbench.worker import Supervisor

    worker_args = ["--pool", args.pool, *(["--name", args.name] if args.name else []),
                   *(a for q in args.work_queue for a in ("--work-queue", q)),
                   *(["--limit", str(args.limit)] if args.limit else []),
                   *(["--with-healthcheck"] if args.with_healthcheck else [])]
    return Supervisor(worker_args, grace=args.grace).run()


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--pool", required=True, help="the work pool to take flow runs from")
    parser.add_argument("--name", help="the worker's name (default: Prefect's)")
    parser.add_argument("--work-queue", action="append", default=[], help="a work queue of the pool (repeatable)")
    parser.add_argument("--limit", type=int, help="the most flow runs at once")
    parser.add_argument("--with-healthcheck", action="store_true", help="serve Prefect's /health endpoint")
    parser.add_argument("--grace", type=positive, default=10.0, help="seconds a stopping flow run, then the "
                        "worker, is given before it is killed (default 10)")


COMMANDS = [
    Command("worker",
            help="a Prefect process worker whose shutdown (SIGTERM, Ctrl-C) stops its flow runs as rbench stops: "
                 "leases released, one line, resumable",
            description="A Prefect process worker whose shutdown (SIGTERM, Ctrl-C) stops its flow runs as rbench "
                        "stops: leases released, one line, resumable.",
            examples=["rbench worker --pool gpu-pool --with-healthcheck"],
            arguments=_arguments, main=main),
]
