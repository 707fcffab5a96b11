"""``rbench fuse``: run files and rbench runs fused into one run file, as ranx fuses them."""

from __future__ import annotations

import argparse

from rbench.commands.common import Command, reading_flags, store_of, tracking_uri

def main(args: argparse.Namespace) -> int:
    """The work of ``rbench fuse``; the exit code."""
    from rbench.verbs import fuse, names_a_run

    uri = tracking_uri(args) if any(names_a_run(given) for given in args.inputs) else None
    fused = fuse(*args.inputs, method=args.method, k=args.k, depth=args.depth, dataset=args.dataset,
                 experiment=args.experiment, tracking_uri=uri, store=store_of(args) if uri else None)
    out = fused.write(args.out, args.name)
    print(f"fused {len(fused.inputs)} runs by {args.method}" + (f" (k={args.k:g})" if args.method == "rrf" else "")
          + f": {', '.join(fused.inputs)}")
    print(f"wrote {out}: {len(fused.run):,} queries, {sum(len(d) for d in fused.run.values()):,} lines")
    return 0


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("inputs", nargs="+", metavar="RUN", help="TREC run files, or MLflow parent run ids (each "
                        "of their systems on --dataset is a run)")
    parser.add_argument("--method", default="rrf", choices=["rrf", "combsum", "combmnz"],
                        help="rrf (1 / (k + rank)), combsum or combmnz of min-max normalised scores, as ranx fuses "
                        "(default rrf)")
    parser.add_argument("--k", type=float, default=60, help="the RRF constant (default 60)")
    parser.add_argument("--depth", type=int, help="keep the first DEPTH documents of each query (default: all)")
    parser.add_argument("--dataset", help="the dataset of the rbench runs to fuse (default: their only one)")
    parser.add_argument("--name", help="the run file's tag (default: the method)")
    parser.add_argument("--out", default="fused.trec", help="the fused run file (default: ./fused.trec)")
    reading_flags(parser)


COMMANDS = [
    Command("fuse",
            help="fuse run files and rbench runs into one run file (RRF, CombSUM, CombMNZ)",
            description="Fuse runs into one TREC run file as ranx fuses them: reciprocal rank fusion, CombSUM or "
                        "CombMNZ of min-max normalised scores; inputs are run files (from rbench export or elsewhere)"
                        " and rbench runs.",
            examples=[
                "rbench fuse export/fetaqa.bm25.trec export/fetaqa.dense.trec --out rrf.trec",
                "rbench fuse latest pyserini.trec --method combsum --dataset fetaqa --out sum.trec",
            ],
            arguments=_arguments, main=main),
]
