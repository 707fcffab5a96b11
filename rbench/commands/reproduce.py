"""``rbench reproduce``: a published study's local configs run, every published cell lined up on one page."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rbench.commands.common import Command, door, door_flags
from rbench.commands.compare import compare_run, log_comparisons
from rbench.commands.run import run_opened
from rbench.core.locations import rbench_command

def main(args: argparse.Namespace) -> int:
    """The work of ``rbench reproduce``; the exit code."""
    from rbench.door import open_experiment
    from rbench.evaluation.reproduction import load_published
    from rbench.evaluation.reproduction_study import load_reproduction, matrix, page
    from rbench.tracking.read import log_reproduction_page

    repro = load_reproduction(args.name)
    tables = [load_published(name) for name in repro.tables]
    out = Path(args.out)
    docs, status, pairs, commands, runs = [], {}, {}, {}, []
    for study in repro.studies:
        with open_experiment("benchmark", study.path(), door(args), check=False) as opened:
            cfg = opened.config
            pairs[study.config] = {(d.name, r.label) for d in cfg.datasets for r in cfg.retrievers}
            commands[study.config] = study.command(args.mirror)
            missing = study.missing(cfg.mirror)
            if study.where == "cluster":
                status[study.config] = "cluster: not run here"
                continue
            if missing:
                status[study.config] = f"not run: the mirror lacks {', '.join(missing)}"
                continue
            print(f"rbench reproduce: {study.command(args.mirror, rbench_command())}", flush=True)
            if run_opened(opened) != 0:
                status[study.config] = "failed: see the run's output above"
                continue
            uri = cfg.tracking_uri()
            parent, found = compare_run(uri, "latest", cfg.mlflow.experiment, tables, [], args.trials, 0)
            log_comparisons(uri, parent.info.run_id, tables, found, out / Path(study.config).stem)
            docs += found
            runs.append((uri, parent.info.run_id))
            status[study.config] = f"ran: MLflow run {parent.info.run_id}"
    rows = matrix(repro, docs, pairs, commands, status)
    text, html = page(repro, rows, [(s, status[s.config]) for s in repro.studies], args.mirror)
    out.mkdir(parents=True, exist_ok=True)
    (out / "reproduction.md").write_text(text, encoding="utf-8")
    (out / "reproduction.html").write_text(html, encoding="utf-8")
    (out / "reproduction.json").write_text(json.dumps(rows, indent=1), encoding="utf-8")
    for uri, run_id in runs:
        log_reproduction_page(uri, run_id, out)
    print(text)
    print(f"wrote {out / 'reproduction.md'}, .html and .json; logged to the MLflow run of each local study")
    return 1 if any(state.startswith("failed") for state in status.values()) else 0


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", help="a reproduction rbench ships (arm-report) or a YAML file of its shape")
    parser.add_argument("--mirror", help="local mirror folder of dataset files (default: $RBENCH_MIRROR)")
    parser.add_argument("--store", help="artifact store folder (default: $RBENCH_STORE, else each config's)")
    door_flags(parser)
    parser.add_argument("--trials", type=int, default=10_000, help="bootstrap resamples (default 10,000)")
    parser.add_argument("--out", default="reproduction", help="output folder (default: ./reproduction)")


COMMANDS = [
    Command("reproduce",
            help="run a published study's local configs and line every published cell up on one page (cluster configs"
                 " listed with their commands)",
            description="Run a published study's local configs and line every published cell up on one page; configs "
                        "that need a cluster are listed with their commands.",
            examples=["rbench reproduce arm-report --mirror ../shared/data"],
            arguments=_arguments, main=main),
]
