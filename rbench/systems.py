"""The systems a report, a comparison or ``show`` puts in one table: each rbench run's systems,
read back from MLflow, and TREC run files from elsewhere (Pyserini, PyTerrier, a paper's
release), scored on the qrels of a file or of an rbench run's dataset, with the measures asked
for in rbench's names or ir_measures' (:mod:`rbench.evaluation.metrics_ir`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

from rbench.core.errors import ConfigError, DataError
from rbench.evaluation.metrics_ir import Measure, is_ir_measure, parse_measure


def parse_measures(texts: Sequence[str]) -> list[Measure]:
    """Measures as given on a command line, each argument split at white space
    (``--measures "P@10 AP nDCG@10 R@100"`` and ``--measures P@10 AP`` are alike); a bad name is a
    ConfigError naming both syntaxes."""
    try:
        return [parse_measure(word) for text in texts for word in text.split()]
    except ValueError as e:
        raise ConfigError(str(e)) from None


@dataclass(frozen=True)
class RunFile:
    """A TREC run file from elsewhere, named ``name`` in the tables."""

    name: str
    path: Path

    @classmethod
    def parse(cls, text: str) -> "RunFile":
        """``NAME=PATH``, or ``PATH`` (named after the file, without its extension)."""
        name, eq, path = text.partition("=")
        found = Path(path if eq else text)
        if not found.is_file():
            raise DataError(f"run file {found} does not exist: give a TREC run file as PATH or NAME=PATH")
        return cls(name if eq and name else found.name.split(".")[0], found)


@dataclass
class Systems:
    """What a table reads: the parent runs read, metrics rows (``dataset``, ``retriever``,
    ``metric``, ``k``, ``value``), per-query values ``scores[(dataset, system)][(metric, k,
    query_id)]``, and the qrels text the runs were scored on by dataset (``judged``, where read)."""

    parents: list = field(default_factory=list)
    rows: list[dict] = field(default_factory=list)
    scores: dict = field(default_factory=dict)
    judged: dict[str, str] = field(default_factory=dict)


def gather(measures: Sequence[Measure], runs: Sequence[str] = (), files: Sequence[RunFile] = (),
           qrels: Path | None = None, dataset: str | None = None, tracking_uri: str | None = None,
           experiment: str | None = None, store: Path | None = None, keep_qrels: bool = False) -> Systems:
    """rbench ``runs`` (MLflow ids or ``latest``) and run ``files``, with per-query values for
    ``measures`` (:func:`score_files` says on which qrels the files are scored); ``keep_qrels``:
    the runs' qrels too (``judged``), for run files scored later. ``dataset`` keeps that dataset's
    systems alone (and names the one run files are scored under)."""
    if not runs and not files:
        raise ConfigError("nothing to compare: give rbench run ids, run files (--run-file), or both")
    systems = Systems()
    logged: dict = {}
    if runs:
        from rbench.tracking.read import load_results, load_run_files

        systems.parents, systems.rows, systems.scores = load_results(tracking_uri, runs, experiment, per_query=True)
        if any(is_ir_measure(m) for m in measures) or keep_qrels or (files and qrels is None):
            logged = load_run_files(tracking_uri, runs, experiment, store)
        add_ir_values(systems.scores, logged, measures)
        systems.judged = judged_by_dataset(logged)
    if files:
        ks = sorted({r["k"] for r in systems.rows if r["k"]}) or [1, 5, 10, 20, 100]
        scores, rows = score_files(files, measures, systems.judged, qrels, dataset, ks)
        for table, name in sorted(scores.keys() & systems.scores.keys()):
            raise ConfigError(f"a run file is named {name!r}, as a system of {table} already is: name it with "
                              "NAME=PATH")
        systems.scores.update(scores)
        systems.rows += rows
    if dataset is not None and runs:
        held = sorted({table for table, _ in systems.scores})
        if dataset not in held:
            raise ConfigError(f"dataset {dataset!r} is not in the runs given; they hold {held}")
        systems.scores = {key: value for key, value in systems.scores.items() if key[0] == dataset}
        systems.rows = [row for row in systems.rows if row["dataset"] == dataset]
    return systems


def add_ir_values(scores: dict, logged: Mapping[tuple[str, str], tuple[str, str]], measures: Sequence[Measure]) -> None:
    """Add the ir_measures ``measures`` to each logged system's per-query values, computed on its
    run file and qrels (``logged[(dataset, system)] = (run text, qrels text)``)."""
    from rbench.dataset_adapters.qrels import parse_qrels
    from rbench.evaluation.metrics_files import file_values
    from rbench.evaluation.runs import read_trec_run

    ir = [m for m in measures if is_ir_measure(m)]
    for (name, label), (run_text, qrels_text) in logged.items() if ir else ():
        ranking = read_trec_run(run_text, f"{name}/{label} run.trec")
        judged = parse_qrels(qrels_text.splitlines(), f"{name}/{label} qrels.trec")
        scores[(name, label)].update(file_values(ranking, judged, ir))


def judged_by_dataset(logged: Mapping[tuple[str, str], tuple[str, str]]) -> dict[str, str]:
    """Each dataset's qrels text, from the first of its logged systems."""
    out: dict[str, str] = {}
    for (name, _), (_, qrels_text) in sorted(logged.items()):
        out.setdefault(name, qrels_text)
    return out


def score_files(files: Sequence[RunFile], measures: Sequence[Measure], judged: Mapping[str, str],
                qrels: Path | None = None, dataset: str | None = None,
                ks: Sequence[int] = (1, 5, 10, 20, 100)) -> tuple[dict, list[dict]]:
    """Per-query values and metrics rows (rbench's measures at ``ks`` too) of run ``files``,
    scored on ``qrels`` (a TREC or BEIR qrels file; the table's dataset is ``dataset``, else the
    file's name), else on the qrels of ``dataset`` among the rbench runs' (``judged``: qrels text
    by dataset; the only one when none is named)."""
    from rbench.evaluation.metrics_files import file_values
    from rbench.evaluation.metrics_per_query import macro_average
    from rbench.evaluation.runs import read_trec_run

    answers, table = _qrels_for_files(qrels, dataset, judged)
    scores: dict = {}
    rows: list[dict] = []
    for file in files:
        if (table, file.name) in scores:
            raise ConfigError(f"two run files are named {file.name!r}: name them with NAME=PATH")
        try:
            ranking = read_trec_run(file.path.read_text(encoding="utf-8"), str(file.path))
            values = file_values(ranking, answers, measures, ks)
        except ValueError as e:
            raise DataError(str(e)) from None
        if not values:
            raise DataError(f"run file {file.path} scores no query of the qrels of {table}: do its query ids match?")
        scores[(table, file.name)] = values
        flat = [{"metric": m, "k": k, "query_id": q, "value": v} for (m, k, q), v in values.items() if k is not None]
        rows += [{"dataset": table, "retriever": file.name, **row} for row in macro_average(flat)]
    return scores, rows


def _qrels_for_files(qrels: Path | None, dataset: str | None, judged: Mapping[str, str]) -> tuple[dict, str]:
    """The qrels run files are scored on, and the dataset they sit under."""
    from rbench.dataset_adapters.qrels import parse_qrels, read_qrels

    if qrels is not None:
        if not qrels.is_file():
            raise DataError(f"qrels file {qrels} does not exist: give a TREC qrels file (qid 0 docid grade) or BEIR's "
                            "TSV (query-id, corpus-id, score)")
        return read_qrels(qrels), dataset or qrels.name.split(".")[0]
    datasets = sorted(judged)
    if not datasets:
        raise ConfigError("run files need qrels: give --qrels FILE, or an rbench run of the same dataset")
    if dataset is None and len(datasets) > 1:
        raise ConfigError(f"the runs hold datasets {datasets}: name the one the run files answer with --dataset")
    table = dataset or datasets[0]
    if table not in judged:
        raise ConfigError(f"dataset {table!r} is not in the runs given; they hold {datasets}")
    return parse_qrels(judged[table].splitlines(), f"{table} qrels.trec"), table
