"""``rbench report``: Markdown, HTML and LaTeX reports of runs, with paired significance tests."""

from __future__ import annotations

import argparse

from rbench.commands.common import MEASURES_HELP, Command, reading_flags, store_of, tracking_uri

def main(args: argparse.Namespace) -> int:
    """The work of ``rbench report``; the exit code."""
    from rbench.evaluation.report_experiment import table_text
    from rbench.verbs import report

    written = report(*args.runs, run_files=args.run_file, qrels=args.qrels, dataset=args.dataset, out=args.out,
                     measures=args.measures or (), baseline=args.baseline, test=args.test, trials=args.trials,
                     alpha=args.alpha, correction=args.correction, seed=args.seed, log=not args.no_log,
                     experiment=args.experiment, tracking_uri=tracking_uri(args) if args.runs else None,
                     store=store_of(args))
    for run in written.runs:
        differ = ", ".join(f"{k}={v}" for k, v in run.items() if k not in ("run", "run_id")) or "no parameter differs"
        print(f"run {run['run']} ({run['run_id']}): {differ}")
    for table in written.tables:
        print(table_text(table) + "\n")
    print(f"wrote {written.markdown}, {written.html} and {written.latex}")
    if written.logged:
        ids = written.logged_to
        print(f"logged them to MLflow run{'s' * (len(ids) > 1)} {', '.join(ids)} as {written.logged}/ (--no-log "
              "does not)")
    return 0


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("runs", nargs="*", help="MLflow parent run ids, or 'latest'")
    parser.add_argument("--run-file", action="append", default=[], metavar="[NAME=]PATH",
                        help="a TREC run file from elsewhere (Pyserini, PyTerrier, a paper's release), a system of "
                        "the tables (repeat for several); scored on --qrels, else on the qrels of the runs' dataset")
    parser.add_argument("--qrels", help="TREC qrels file the run files are scored on (default: the qrels the rbench "
                        "runs were scored on)")
    parser.add_argument("--dataset", help="the dataset the run files answer (default: the runs' only dataset, or "
                        "the qrels file's name)")
    parser.add_argument("--out", default="report", help="output folder (default: ./report)")
    parser.add_argument("--measures", nargs="+", metavar="MEASURE",
                        help=MEASURES_HELP + " (default: recall, ndcg and mrr at the run's largest k)")
    parser.add_argument("--baseline", help="the system every other is tested against (default: the first by name; "
                        "with several runs, names read RUN:SYSTEM as the report shows them)")
    parser.add_argument("--test", default="randomization", choices=["randomization", "bootstrap", "t-test", "wilcoxon"],
                        help="paired test of a system against the baseline over the queries both scored (default "
                        "randomization, exact when 2^queries <= trials; t-test and wilcoxon are scipy's)")
    parser.add_argument("--correction", default="holm", choices=["holm", "bonferroni", "none"],
                        help="correction for the table's multiple tests (default holm)")
    parser.add_argument("--alpha", type=float, default=0.05, help="significance level (default 0.05)")
    parser.add_argument("--trials", type=int, default=10_000,
                        help="permutations or resamples per test (default 10,000)")
    parser.add_argument("--no-log", action="store_true", help="do not log the report to the runs' MLflow parent runs")
    parser.add_argument("--seed", type=int, default=0, help="seed of the randomization and bootstrap tests (default 0; "
                        "printed in the table's caption)")
    reading_flags(parser)


COMMANDS = [
    Command("report",
            help="Markdown + HTML report of runs, with paired significance tests",
            description="Write report.md, report.html and experiment.tex for one or more runs: the parameters that "
                        "differ between runs, an experiment table per dataset (systems x measures, each system tested"
                        " against a baseline, Holm-corrected, significance and the best value marked, also printed), "
                        "all metrics, recall@k curves, costs, and comparisons with published tables.",
            examples=[
                "rbench report latest --out report",
                "rbench report RUN_A RUN_B --measures ndcg@10 recall@5 --baseline bm25",
                "rbench report latest --run-file pyserini=run.bm25.trec --measures \"P@10 AP nDCG@10\" --test t-test",
            ],
            arguments=_arguments, main=main),
]
