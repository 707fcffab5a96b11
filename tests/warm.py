"""Warm what a fresh environment builds on first use, before the suite runs: the bytecode of
the heavy modules the tests import (setup installs with ``--no-compile``) and ranx's numba
kernels (``cache=True``: compiled once into ranx's ``__pycache__``, about 40 s of CPU).

``make warm`` runs it while the vLLM environment installs (``make -j2 setup vllm-env warm``), so
that this CPU is not spent by the test workers. Nothing is checked here: the suite does that."""

from __future__ import annotations

import importlib
import time

MODULES = ("torch", "transformers", "sentence_transformers", "faiss", "mlflow", "mlflow.server", "prefect",
           "prefect.server.api.server", "bm25s", "polars", "pyarrow.parquet", "ortools",
           "sklearn.cluster", "matplotlib.pyplot", "pytrec_eval", "ranx")


def main() -> None:
    started = time.monotonic()
    for name in MODULES:
        importlib.import_module(name)
    import ranx

    qrels = ranx.Qrels({"q1": {"a": 1, "b": 2}, "q2": {"c": 1}})
    run = ranx.Run({"q1": {"a": 0.9, "x": 0.5, "b": 0.1}, "q2": {"y": 0.4, "c": 0.3}})
    ranx.evaluate(qrels, run, [f"{m}@{k}" for m in ("precision", "recall", "f1", "ndcg", "mrr") for k in (1, 3)])
    print(f"warm: {len(MODULES)} modules imported and ranx's kernels compiled in {time.monotonic() - started:.0f}s")


if __name__ == "__main__":
    main()
