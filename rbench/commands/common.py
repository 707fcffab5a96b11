"""What the commands share: the door's settings from their flags, the printing of a run's metrics, and
the store and tracking URI a reading command reads."""

from __future__ import annotations

import argparse
import re
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Sequence

from rbench.core.errors import RbenchError
from rbench.core.locations import rbench_command

if TYPE_CHECKING:
    from rbench.results import MetricRow, StageRow


@dataclass(frozen=True)
class Command:
    """One subcommand: its name, one-line ``help``, the ``description`` and ``examples`` its ``--help``
    shows, the flags it takes (``arguments``) and the function that does its work (``main``)."""

    name: str
    help: str
    description: str
    examples: Sequence[str]
    arguments: Callable[[argparse.ArgumentParser], None]
    main: Callable[[argparse.Namespace], int]

    def add_to(self, sub) -> argparse.ArgumentParser:
        """Its parser under ``sub`` (argparse's subparsers), its flags added and its work set as ``func``."""
        parser = sub.add_parser(self.name, help=self.help, description=textwrap.fill(self.description, 79),
                                epilog="examples:\n" + "\n".join(f"  {line}" for line in self.examples),
                                formatter_class=argparse.RawDescriptionHelpFormatter)
        self.arguments(parser)
        parser.set_defaults(func=self.main)
        return parser


def print_metrics(metrics: Sequence[MetricRow]) -> None:
    from dataclasses import asdict

    from rbench.console_tables import metrics_table

    if metrics:
        print()
        print(metrics_table([asdict(m) for m in metrics]))
        print()


def print_samples(cfg, stages: Sequence[StageRow]) -> None:
    """Beside the table: each dataset scored on a sample of its judged queries, and how to score all."""
    from rbench.core.store import Store

    store = Store(cfg.store)
    for row in stages:
        artifact = store.load("subsample", row.key) if row.stage == "subsample" and row.key else None
        info = artifact.info if artifact else {}
        if info.get("of") and info.get("queries", info["of"]) < info["of"]:
            print(f"{row.label}: scored on a sample, {info['queries']:,} of its {info['of']:,} queries "
                  f"(subsample.size {cfg.subsample.size}); `subsample: all` scores every judged query")


def print_approximations(cfg, stages: Sequence[StageRow]) -> None:
    """Beside the table: each pair searched with an approximate index, and what it measured against
    an exhaustive search of the same index."""
    from rbench.core.store import Store

    store = Store(cfg.store)
    for row in stages:
        artifact = store.load("retrieve", row.key) if row.stage == "retrieve" and row.key else None
        approximate = (artifact.info if artifact else {}).get("approximate")
        if approximate:
            measured = approximate.get("recall_of_exhaustive")
            found = (f"its top {approximate['k']} holds {measured:.4f} of an exhaustive search's (over "
                     f"{approximate['against']}) on {approximate['queries']} queries" if measured is not None
                     else f"its recall was {approximate['against']}")
            print(f"{row.label}: an approximate index ({approximate['index']}, {approximate['setting']}): {found}; "
                  "`index: flat` searches exactly")


def show_hint(run_id: str, tracking_uri: str) -> None:
    from rbench.tracking.write import ui_hint

    print(f"MLflow run {run_id} at {tracking_uri}")
    print(f"show it again with: {rbench_command()} show {run_id} --tracking-uri {tracking_uri}")
    line = ui_hint(tracking_uri, run_id)
    if line:
        print(line)


def door(args: argparse.Namespace):
    """The settings a command's flags give its experiment (:class:`rbench.door.DoorSettings`)."""
    from rbench.door import DoorSettings

    return DoorSettings(**{name: getattr(args, name, None)
                           for name in ("mirror", "store", "tracking_uri", "runner", "address")})


def door_flags(parser: argparse.ArgumentParser, runner: bool = True) -> None:
    """The flags every command that runs an experiment takes beside --mirror and --store."""
    parser.add_argument("--tracking-uri", help="MLflow tracking URI (default: $MLFLOW_TRACKING_URI, else the "
                        "config's, else sqlite in the store)")
    if runner:
        parser.add_argument("--runner", choices=["threads", "sequential", "dask", "ray"],
                            help="task runner (overrides execution.runner)")
        parser.add_argument("--address", help="existing Dask scheduler or Ray cluster address (with --runner dask|ray)")


def reading_flags(parser: argparse.ArgumentParser, experiment: str | None = None,
                  experiment_help: str = "the MLflow experiment 'latest' is read from (default: the newest finished "
                                         "run of any experiment but the chunking grids')") -> None:
    """The flags of a command that reads finished runs: where their store and MLflow database are."""
    parser.add_argument("--tracking-uri", help="MLflow tracking URI (default: $MLFLOW_TRACKING_URI, else sqlite in "
                        "the store)")
    parser.add_argument("--store", help="store folder whose MLflow database to read (default: $RBENCH_STORE, "
                        "else ./.rbench, else the store an earlier run recorded that holds the run id)")
    parser.add_argument("--config", help="read the store and tracking URI of this experiment file, as 'rbench run' "
                        "finds them")
    parser.add_argument("--experiment", default=experiment, help=experiment_help)


def reading_store(args: argparse.Namespace) -> tuple[Path, str]:
    """The store and tracking URI a reading command reads: those of ``--config FILE`` as ``rbench
    run FILE`` finds them (flags and the environment win), else ``--store``/``--tracking-uri``,
    the environment, ``./.rbench``. A run id that store does not hold, where nothing named a store,
    is looked for in the stores earlier runs recorded (:func:`~rbench.core.locations.known_stores`);
    the store it is found in is said on stderr, once per command."""
    if getattr(args, "reading_store", None) is None:
        args.reading_store = _find_reading_store(args)
    return args.reading_store


def _find_reading_store(args: argparse.Namespace) -> tuple[Path, str]:
    from rbench.core.locations import given_store, given_tracking_uri, known_stores, resolve_store, \
        resolve_tracking_uri

    if getattr(args, "config", None):
        from rbench.experiment import followed_store, resolve_experiment

        path = str(Path(args.config).resolve())
        cfg, _ = followed_store(path, resolve_experiment(path, None, store=args.store, tracking_uri=args.tracking_uri))
        return Path(cfg.store), cfg.tracking_uri()
    store = resolve_store(args.store)
    uri = resolve_tracking_uri(args.tracking_uri, store=store)
    ids = [r for r in [getattr(args, "run", None), *(getattr(args, "runs", None) or [])]
           if r and re.fullmatch(r"[0-9a-f]{32}", r)]
    if not ids or given_store(args.store) or given_tracking_uri(args.tracking_uri) or _holds_run(store, ids[0]):
        return store, uri
    found = next((s for s in known_stores() if s != store and _holds_run(s, ids[0])), None)
    if found is None:
        return store, uri
    print(f"rbench: run {ids[0]} is in the store {found} (one an earlier run used); --store chooses another",
          file=sys.stderr)
    return found, resolve_tracking_uri(None, store=found)


def _holds_run(store: Path, run_id: str) -> bool:
    """Whether the MLflow database in ``store`` holds the run ``run_id`` (False when it cannot tell)."""
    from rbench.tracking.backend import experiment_of_run

    return experiment_of_run(store / "mlflow.db", run_id) is not None


def store_of(args: argparse.Namespace) -> Path:
    """The store a reading command reads (:func:`_reading_store`)."""
    return reading_store(args)[0]


def tracking_uri(args: argparse.Namespace) -> str:
    """The tracking URI a reading command reads (:func:`_reading_store`); a sqlite database that
    does not exist is an error (reading must not create an empty store)."""
    from rbench.tracking.backend import prepare_tracking

    uri = reading_store(args)[1]
    db = Path(uri.removeprefix("sqlite:///"))
    if uri.startswith("sqlite:///") and (not db.is_file() or db.stat().st_size == 0):
        empty = " (its file is empty: 0 bytes)" if db.is_file() else ""
        if not db.is_file() and any((db.parent / "evaluate").glob("*/_manifest.json")):
            raise RbenchError(f"no MLflow database at {uri}, though the store {db.parent} holds the results of "
                              "earlier runs: the database was deleted or moved. Rerunning an experiment (every stage "
                              "cached) logs it again; pass --tracking-uri where it was moved")
        raise RbenchError(f"no MLflow database at {uri}{empty}: no run has logged there yet; "
                          "pass --store (or set RBENCH_STORE) or --tracking-uri")
    prepare_tracking(uri)  # a damaged database named, a moved store's artifact locations followed
    return uri


def positive(text: str) -> float:
    """An argparse type: a positive number of seconds."""
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number of seconds")
    return value


MEASURES_HELP = ("measures in rbench's names (recall@5, ndcg@10, map@all) or ir_measures' (P@10 AP nDCG@10 R@100 "
                 "RR Bpref; quoted together or apart)")
