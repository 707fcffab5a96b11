"""``rbench compare``: a run lined up against published tables, a verdict per cell."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rbench.commands.common import Command, reading_flags, tracking_uri
from rbench.core.errors import RbenchError
from rbench.core.locations import rbench_command

def main(args: argparse.Namespace) -> int:
    """The work of ``rbench compare``; the exit code."""
    from rbench.evaluation.report import reproduction_page
    from rbench.evaluation.reproduction import load_published
    from rbench.tracking.read import log_reproduction_page

    tables = [load_published(name) for name in args.against]
    uri = tracking_uri(args)
    parent, docs = compare_run(uri, args.run, args.experiment, tables, args.map, args.trials, args.seed)
    if not any(c["measured"] is not None for doc in docs for c in doc["cells"]):
        missing = sorted({c["missing"] for doc in docs for c in doc["cells"] if c.get("missing")})[:4]
        raise RbenchError(f"run {parent.info.run_id} ({parent.info.run_name}) has none of the cells of "
                          f"{', '.join(t.name for t in tables)} ({'; '.join(missing)}): nothing was written or logged. "
                          "Compare the run of that study's config, or name the run's systems and datasets with "
                          "--map PUBLISHED=RUN")
    out = Path(args.out)
    log_comparisons(uri, parent.info.run_id, tables, docs, out)
    run = f"{parent.info.run_name} ({parent.info.run_id[:8]})"
    title = f"Reproduction of {', '.join(t.name for t in tables)}: run {run}"
    text, page = reproduction_page(docs, title)
    (out / "reproduction.md").write_text(text, encoding="utf-8")
    (out / "reproduction.html").write_text(page, encoding="utf-8")
    log_reproduction_page(uri, parent.info.run_id, out)
    print(text if args.all else reproduction_page(docs, title, all_cells=False)[0])
    print(f"wrote {out / 'reproduction.md'}, .html and one JSON per table (every cell); logged to MLflow run "
          f"{parent.info.run_id} "
          f"as reproduction/ ({rbench_command()} report shows it)")
    return 0


def compare_run(uri: str, run: str, experiment: str, tables: list, maps: list[str], trials: int,
                 seed: int) -> tuple[object, list[dict]]:
    """A run's parent and its comparison document against each published table."""
    from rbench.config.exact import SETTINGS
    from rbench.evaluation.reproduction import compare, document, load_notes
    from rbench.tracking.read import load_results, load_run_params

    (parent,), _, scores = load_results(uri, [run], experiment, per_query=True)
    logged, params, ceilings = load_run_params(uri, parent.info.run_id, experiment)
    name = f"{parent.info.run_name} ({parent.info.run_id[:8]})"
    return parent, [document(table, compare(table, scores, maps, trials, seed, params=params, parent=logged,
                                            settings=SETTINGS, notes=load_notes(table)), name, trials, seed,
                             ceilings) for table in tables]


def log_comparisons(uri: str, run_id: str, tables: list, docs: list[dict], out: Path) -> None:
    """Write each comparison as ``<table>.json`` into ``out`` and keep it on the MLflow run."""
    from rbench.evaluation.reproduction_text import summary
    from rbench.tracking.read import log_reproduction

    out.mkdir(parents=True, exist_ok=True)
    for table, doc in zip(tables, docs):
        data = json.dumps(doc, indent=1)
        (out / f"{table.name}.json").write_text(data, encoding="utf-8")
        log_reproduction(uri, run_id, table.name, data, summary(doc))


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run", help="MLflow parent run id, or 'latest'")
    parser.add_argument("--against", required=True, action="append", metavar="NAME",
                        help="a published table rbench ships (arm-report-table6, anserini-bright-bm25, ...; repeat for "
                        "one page of several) or a YAML file of its shape")
    parser.add_argument("--map", action="append", default=[], metavar="PUBLISHED=RUN",
                        help="the run's name for a published system or dataset (repeat), e.g. bm25=bm25-lucene")
    parser.add_argument("--trials", type=int, default=10_000, help="bootstrap resamples (default 10,000)")
    parser.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    parser.add_argument("--out", default="reproduction", help="output folder (default: ./reproduction)")
    parser.add_argument("--all", action="store_true", help="print the published cells the run lacks too (the "
                        "written page always has them)")
    reading_flags(parser)


COMMANDS = [
    Command("compare",
            help="line a run up against published tables: 95%% intervals, a verdict per cell",
            description="Line a run up against published tables: per cell the published and measured value, and a "
                        "verdict (equal or off by q queries where it is the same computation, else a 95% interval).",
            examples=[
                "rbench compare latest --against arm-report-table6",
                "rbench compare latest --against anserini-bright-bm25 --map bm25=bm25-lucene",
            ],
            arguments=_arguments, main=main),
]
