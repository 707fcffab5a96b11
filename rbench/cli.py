"""The ``rbench`` command: a thin dispatcher over its subcommands, one module each in
:mod:`rbench.commands` (their flags beside the work they do)."""

from __future__ import annotations

import argparse
import gc
import logging
import sys

from rbench.commands import (chunking, compare, compare_grid, export, fuse, listing, log, report, reproduce, run,
                             runs, search, show, verify, worker)
from rbench.commands.common import Command
from rbench.core import settings
from rbench.core.errors import RbenchError

SUBCOMMANDS: list[Command] = [c for module in (run, chunking, search, listing, runs, show, report, export, fuse,
                                               compare, reproduce, compare_grid, verify, log, worker)
                              for c in module.COMMANDS]
"""Every subcommand, in the order ``rbench --help`` lists them."""

COMMANDS = {c.name: (c.description, list(c.examples)) for c in SUBCOMMANDS}
"""``{name: (description, examples)}`` of every subcommand (its ``--help``)."""

DESCRIPTION = ("rbench: retrieval benchmarks over corpora that mix table rows and text. Run an experiment file "
               "(cached stages: a changed setting reruns only what depends on it), read its results back from "
               "MLflow, compare them with published tables. `rbench COMMAND --help` shows each command's options "
               "and an example.")


def _setup_environment() -> None:
    from rbench.door import setup_environment

    setup_environment()
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(message)s", datefmt="%H:%M:%S")
    logging.getLogger("rbench").setLevel(logging.INFO)


class Parser(argparse.ArgumentParser):
    """argparse's parser, whose refusal of a value outside a closed choice (a subcommand, ``--test``)
    names the choice closest to it."""

    def _check_value(self, action: argparse.Action, value: object) -> None:
        from rbench.core.configfile import did_you_mean

        if action.choices is not None and value not in action.choices:
            choices = ", ".join(map(repr, action.choices))
            raise argparse.ArgumentError(action, f"invalid choice: {value!r} (choose from {choices})"
                                                 f"{did_you_mean(value, action.choices)}")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``rbench`` command."""
    parser = Parser(prog="rbench", description=DESCRIPTION)
    parser.add_argument("--debug", action="store_true", help="show the traceback of an input error (also in "
                        "Prefect's task logs)")
    parser.add_argument("--verbose", action="store_true", help="also show Prefect's per-task state lines and "
                        "the JVM's INFO lines")
    sub = parser.add_subparsers(dest="command", required=True)
    for command in SUBCOMMANDS:
        command.add_to(sub)
    return parser


WORKING_COMMANDS = frozenset({"run", "embeddings", "chunking", "search", "log", "reproduce"})


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``rbench`` command."""
    args = build_parser().parse_args(argv)
    if args.debug:
        settings.write(settings.DEBUG, "1")
    if args.verbose:
        settings.write(settings.VERBOSE, "1")
    _setup_environment()
    if argv is None and args.command in WORKING_COMMANDS:  # a process of its own, not a caller's function call
        from rbench.core.stopping import stop_on_signals
        from rbench.orchestration.prefect_server import stop_temporary_server

        stop_on_signals(stop_temporary_server)
    try:
        return args.func(args)
    except RbenchError as e:
        if args.debug:
            raise
        print(f"rbench: error: {e}", file=sys.stderr)
        return 2
    finally:
        if argv is None:  # the process ends next: its closing full collection took 2 s after a run
            gc.freeze()


if __name__ == "__main__":
    sys.exit(main())
