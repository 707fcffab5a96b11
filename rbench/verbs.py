"""rbench's verbs over finished runs as functions: :func:`fuse` and :func:`report` return what
``rbench fuse`` and ``rbench report`` print and write, and the commands only parse their flags,
call them and print (as ranx's verbs are functions, ``ranx/meta/``). A notebook calls them as
``rbench.fuse(...)`` and ``rbench.report(...)``."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Sequence

from rbench.core.errors import ConfigError, DataError

Method = Literal["rrf", "combsum", "combmnz"]
Test = Literal["randomization", "bootstrap", "t-test", "wilcoxon"]


@dataclass(frozen=True)
class Fused:
    """A fused run: ``run`` maps each query to its documents and fused scores, best first;
    ``inputs`` names each fused ranking (a run file's path, or ``RUN:SYSTEM``)."""

    run: dict[str, list[tuple[str, float]]]
    inputs: tuple[str, ...]
    method: str
    k: float

    def trec(self, name: str | None = None) -> str:
        """The fused run as a TREC run file tagged ``name`` (default: the method)."""
        from rbench.evaluation.runs_fusion import fused_trec

        text: str = fused_trec(self.run, name or self.method)
        return text

    def write(self, path: str | Path, name: str | None = None) -> Path:
        """Write :meth:`trec` to ``path`` atomically; returns the path."""
        from rbench.core.store import write_atomic

        write_atomic(Path(path), self.trec(name))
        return Path(path)


def fuse(*runs: str | Path, method: Method = "rrf", k: float = 60, depth: int | None = None,
         dataset: str | None = None, experiment: str = "rbench", tracking_uri: str | None = None,
         store: str | Path | None = None) -> Fused:
    """Fuse TREC run files and the systems of rbench runs (MLflow parent run ids, or ``latest``,
    read from ``tracking_uri``, else the store's database) into one run by ``method`` (RRF with
    constant ``k``, CombSUM, CombMNZ; :mod:`rbench.evaluation.runs_fusion`), each query's first
    ``depth`` documents kept. An rbench run holding several datasets needs ``dataset``."""
    from rbench.evaluation.runs import read_trec_run
    from rbench.evaluation.runs_fusion import fuse as fuse_rankings

    rankings, names = [], []
    for given in map(str, runs):
        path = Path(given)
        if path.is_file():
            try:
                rankings.append(read_trec_run(path.read_text(encoding="utf-8"), given))
            except ValueError as e:
                raise DataError(str(e)) from None
            names.append(given)
            continue
        if not names_a_run(given):
            raise DataError(f"run file {given} does not exist: give TREC run files or MLflow run ids")
        from rbench.core.locations import resolve_tracking_uri
        from rbench.tracking.read import load_run_files

        files = load_run_files(tracking_uri or resolve_tracking_uri(None, store=store), [given], experiment,
                               Path(store) if store else None)
        datasets = sorted({d for d, _ in files})
        chosen = dataset or (datasets[0] if len(datasets) == 1 else None)
        if chosen not in datasets:
            raise ConfigError(f"run {given} holds datasets {datasets}: name the one to fuse with --dataset")
        for (d, system), (text, _) in sorted(files.items()):
            if d == chosen:
                rankings.append(read_trec_run(text, f"{given}: {d}/{system} run.trec"))
                names.append(f"{given}:{system}")
    try:
        fused = fuse_rankings(rankings, method, k, depth)
    except ValueError as e:
        raise ConfigError(str(e)) from None
    return Fused(fused, tuple(names), method, k)


def names_a_run(given: str) -> bool:
    """Whether a fused input that is no file names an rbench run (else: a run file that is missing)."""
    return not Path(given).is_file() and Path(given).suffix not in (".trec", ".txt", ".run") and "/" not in given


@dataclass(frozen=True)
class Report:
    """A written report: its experiment ``tables``
    (:func:`rbench.evaluation.report_experiment.experiment_tables`), the ``markdown``, ``html``
    and ``latex`` files, the parameters that differ between the runs (``runs``, a row per run),
    and ``logged``, the MLflow artifact folder it was logged to (None when not logged)."""

    tables: list[dict[str, Any]]
    markdown: Path
    html: Path
    latex: Path
    runs: list[dict[str, Any]]
    logged: str | None
    logged_to: tuple[str, ...] = ()


def report(*runs: str, run_files: Sequence[str] = (), qrels: str | Path | None = None, dataset: str | None = None,
           out: str | Path = "report", measures: Sequence[str] = (), baseline: str | None = None,
           test: Test = "randomization", trials: int = 10_000, alpha: float = 0.05,
           correction: Literal["holm", "bonferroni", "none"] = "holm", seed: int = 0, log: bool = True,
           experiment: str = "rbench", tracking_uri: str | None = None, store: str | Path | None = None) -> Report:
    """Write the Markdown, HTML and LaTeX report of rbench runs (MLflow parent run ids, or
    ``latest``) and TREC run files from elsewhere (``run_files``: ``[NAME=]PATH``, scored on
    ``qrels``, else on the runs' qrels of ``dataset``) into ``out``, with paired ``test`` s of
    each system against ``baseline``; ``measures`` default to recall, nDCG and MRR at the runs'
    largest k. With ``log``, the report is kept on the runs' MLflow parent runs too."""
    from rbench.core.locations import resolve_tracking_uri
    from rbench.evaluation.report import write_report
    from rbench.evaluation.report_experiment import experiment_tables
    from rbench.systems import RunFile, gather, parse_measures
    from rbench.tracking.read import differing_params, load_costs_and_traces, load_reproductions, log_report

    uri = (tracking_uri or resolve_tracking_uri(None, store=store)) if runs else ""
    chosen = parse_measures(measures) if measures else []
    files = [RunFile.parse(text) for text in run_files]
    systems = gather(chosen, list(runs), files, Path(qrels) if qrels else None, dataset, uri or None, experiment,
                     Path(store) if store else None)
    if not chosen:
        top = max(r["k"] for r in systems.rows)
        chosen = [(metric, top) for metric in ("recall", "ndcg", "mrr")]
    differing = differing_params(uri, list(runs), experiment) if runs else []
    try:
        tables = experiment_tables(systems.scores, chosen, baseline, test, trials, alpha, correction, seed)
    except ValueError as e:
        raise ConfigError(f"{e}: choose with --baseline and --measures") from None
    title = "rbench report: " + ", ".join([*(f"{p.info.run_name} ({p.info.run_id[:8]})" for p in systems.parents),
                                           *(f"{f.name} ({f.path.name})" for f in files)])
    costs, traces = load_costs_and_traces(uri, list(runs), experiment) if runs else ([], [])
    reproductions = load_reproductions(uri, list(runs), experiment) if runs else []
    md, page = write_report(title, systems.rows, tables, Path(out), costs=costs, traces=traces,
                            reproductions=reproductions, runs=differing)
    folder, ids = None, ()
    if systems.parents and log:
        ids = tuple(p.info.run_id for p in systems.parents)
        name = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + f"-{test}"
        folder = log_report(uri, list(ids), Path(out), name)
    return Report(tables, md, page, md.with_name("experiment.tex"), differing, folder, ids)
