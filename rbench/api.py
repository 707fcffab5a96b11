"""rbench from Python: :func:`run` an experiment file and get its :class:`Results` (tables as
polars DataFrames, the run files, the MLflow run), and :func:`compare` runs in an experiment
table. The same cached stages and flow as ``rbench run``: a second call builds nothing."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Mapping, Sequence

from rbench.core.errors import RbenchError
from rbench.core.secrets import redact
from rbench.door import DoorSettings, OpenedExperiment, open_experiment
from rbench.results import Failure, FlowSummary

if TYPE_CHECKING:
    import polars as pl

    from rbench.config import ExperimentConfig

log = logging.getLogger("rbench")


def _frame(rows: Sequence[Any], columns: dict[str, Any]) -> pl.DataFrame:
    """A frame of the declared ``columns`` (name: polars type) read from each row's attributes."""
    import polars as pl

    return pl.DataFrame({name: [getattr(row, name) for row in rows] for name in columns}, schema=columns)


def logged_summary(opened: OpenedExperiment) -> FlowSummary | None:
    """The summary of an experiment whose every stage is cached and whose very results MLflow
    holds already (no earlier logging waiting in the store), read from the run's plan without a
    flow; else None."""
    from rbench.core.store import Store
    from rbench.experiment import config_text
    from rbench.orchestration.graph import summarize_results
    from rbench.tracking.logged import already_logged
    from rbench.tracking.pending import pending_records

    cfg = opened.config
    if pending_records(Store(cfg.store)):
        return None
    cached = opened.plan().cached(Store(cfg.store))
    if cached is None or opened.plan().prebuilt:
        return None
    results, report = cached
    run_id = already_logged(cfg, results, redact(config_text(cfg, opened.config_path)))
    return None if run_id is None else summarize_results(cfg, results, report, run_id)


def run_benchmark(opened: OpenedExperiment) -> FlowSummary:
    """Run an opened ``benchmark`` or ``embeddings`` experiment's flow by its plan (what is in the
    store is reused) and return its summary; a flow that ended without one raises its error."""
    from rbench.core.imports import torch_kept_out
    from rbench.orchestration.graph import torch_in_stage_threads, warm_up_index_builds

    cfg = opened.config
    opened.check()
    plan = opened.plan()
    with torch_kept_out(not torch_in_stage_threads(cfg)):
        warm_up_index_builds(plan)
        state = opened.run(return_state=True)
    from rbench.flows.benchmark import summary_of  # after the server's start: it loads the flow's modules

    result = summary_of(state)
    if not isinstance(result, FlowSummary):
        if isinstance(result, RbenchError):
            raise result
        raise RbenchError(f"the flow ended {state.name}: {state.message}")
    return result


@dataclass(frozen=True)
class Results:
    """One run's results. ``aggregate``: a row per (dataset, retriever, metric, k) with the mean
    ``value`` over ``queries``; ``per_query``: a row per (dataset, retriever, query_id, metric,
    k); ``run_files``: each (dataset, retriever)'s TREC run file and qrels in the store;
    ``stages``: what each stage did (:class:`~rbench.results.StageRow`'s columns: ``ran`` or
    ``cached``, its seconds, an error); ``failures``: pairs that did not finish. All three frames
    have their declared columns, a run with no row too. ``repr`` prints the metrics table
    ``rbench run`` prints."""

    mlflow_run_id: str | None
    tracking_uri: str
    store: Path
    aggregate: pl.DataFrame
    per_query: pl.DataFrame
    stages: pl.DataFrame
    run_files: dict[tuple[str, str], dict[str, Path]] = field(default_factory=dict)
    failures: list[Failure] = field(default_factory=list)

    @classmethod
    def from_summary(cls, summary: FlowSummary, store: Path, tracking_uri: str) -> "Results":
        """The results of a flow's (or a cached experiment's) summary, read from the store."""
        import polars as pl
        import pyarrow.parquet as pq

        from rbench.core.store import Store

        files, per_query = {}, []
        evaluations = [s for s in summary.stages if s.stage == "evaluate" and s.status in ("ran", "cached")]
        labelled = {f"{m.dataset}/{m.retriever}": (m.dataset, m.retriever) for m in summary.metrics}
        kept = Store(store)
        for stage in evaluations:
            artifact = kept.load("evaluate", str(stage.key))
            pair = ((stage.dataset or "", stage.retriever) if stage.retriever is not None
                    else labelled.get(stage.label))  # a row logged before rows named their pair: by its label
            if artifact is None or pair is None:
                raise RbenchError(f"the evaluation of {stage.label} is not in the store {store} any more")
            kept.verified(artifact)
            dataset, retriever = pair
            files[(dataset, retriever)] = {"run": artifact.file("run.trec"), "qrels": artifact.file("qrels.trec")}
            table = pl.DataFrame(pq.read_table(artifact.file("per_query.parquet")))
            per_query.append(table.select(pl.lit(dataset).alias("dataset"), pl.lit(retriever).alias("retriever"),
                                          "query_id", "metric", "k", "value"))
        schema = {"dataset": pl.String, "retriever": pl.String, "query_id": pl.String, "metric": pl.String,
                  "k": pl.Int64, "value": pl.Float64}
        aggregate = {"dataset": pl.String, "retriever": pl.String, "metric": pl.String, "k": pl.Int64,
                     "value": pl.Float64, "queries": pl.Int64}
        stages = {"stage": pl.String, "label": pl.String, "dataset": pl.String, "retriever": pl.String,
                  "key": pl.String, "status": pl.String, "seconds": pl.Float64, "finished": pl.Float64,
                  "error": pl.String}
        return cls(
            mlflow_run_id=summary.mlflow_run_id, tracking_uri=tracking_uri, store=Path(store),
            aggregate=_frame(summary.metrics, aggregate),
            per_query=pl.concat(per_query) if per_query else pl.DataFrame(schema=schema),
            stages=_frame(summary.stages, stages), run_files=files, failures=list(summary.failures),
        )

    def table(self) -> str:
        """The metrics table, one line per (dataset, retriever, metric), one column per k."""
        from rbench.console_tables import metrics_table

        return metrics_table(self.aggregate.to_dicts())

    def scores(self) -> dict[tuple[str, str], dict[tuple[str, int | None, str], float]]:
        """The per-query values keyed as :func:`rbench.evaluation.report_experiment.experiment_tables` reads them."""
        out: dict[tuple[str, str], dict[tuple[str, int | None, str], float]] = {}
        for row in self.per_query.iter_rows(named=True):
            out.setdefault((row["dataset"], row["retriever"]), {})[(row["metric"], row["k"], row["query_id"])] = \
                row["value"]
        return out

    def __repr__(self) -> str:
        statuses = [s["status"] for s in self.stages.iter_rows(named=True)]
        failed = "".join(f"\nFAILED {f.dataset}/{f.retriever}: {f.error}" for f in self.failures)
        return (f"Results(mlflow_run_id={self.mlflow_run_id!r}, stages: {statuses.count('ran')} ran, "
                f"{statuses.count('cached')} cached, {len(statuses) - statuses.count('ran') - statuses.count('cached')}"
                f" failed or skipped)\n{self.table()}{failed}")


def run(config: str | Path | Mapping[str, Any] | ExperimentConfig, *, mirror: str | Path | None = None,
        store: str | Path | None = None,
        tracking_uri: str | None = None, runner: str | None = None, address: str | None = None,
        force_flow: bool = False, retrievers: Sequence[type] = (), adapters: Sequence[type] = ()) -> Results:
    """Run an experiment as ``rbench run`` does and return its :class:`Results`: a YAML file, or
    what a notebook holds, a mapping of the same keys or an :class:`~rbench.config.ExperimentConfig`
    (relative paths in them are read from the working folder).

    ``mirror``, ``store``, ``tracking_uri``, ``runner`` and ``address`` override the environment's
    and the file's settings, as the command's flags do. ``retrievers`` and ``adapters``: retriever
    and dataset adapter classes defined here (a notebook cell, a script) that the file may name,
    registered for this process without packaging them; their code enters the cache keys
    (:func:`rbench.core.identity.class_digest`), and their stages run in this process. When every
    stage is cached and MLflow holds these results already, no flow starts (``force_flow`` starts
    one and logs a new MLflow run). Called from a script's main thread, SIGINT (Ctrl-C), SIGTERM
    and SIGHUP end the run as they end ``rbench run`` (:mod:`rbench.door`)."""
    from rbench.dataset_adapters.base import ADAPTERS, Adapter
    from rbench.retrievers.base import RETRIEVERS, Retriever

    for argument, classes, base, registry in (("retrievers", retrievers, Retriever, RETRIEVERS),
                                              ("adapters", adapters, Adapter, ADAPTERS)):
        for cls in classes:
            if not (isinstance(cls, type) and issubclass(cls, base)):
                raise RbenchError(f"rbench.run({argument}=...) takes {base.__name__} subclasses (the class, not an "
                                  f"instance); got {cls!r}")
            registry.register(cls)
    given = DoorSettings(mirror=None if mirror is None else str(mirror), store=None if store is None else str(store),
                         tracking_uri=tracking_uri, runner=runner, address=address)
    with open_experiment("benchmark", config, given) as opened:
        log.info("%s", opened.header())  # a notebook's cell shows it first, as the command prints it
        summary = None if force_flow else logged_summary(opened)
        if summary is None:
            summary = run_benchmark(opened)
        cfg = opened.config
    failed = [f"{f.dataset}/{f.retriever}: {f.error}" for f in summary.failures]
    if failed and not summary.metrics:
        raise RbenchError("no dataset x retriever pair finished: " + "; ".join(failed))
    for line in failed:
        log.warning("rbench.run: FAILED %s (the other pairs' results are returned)", line)
    if summary.mlflow_error:
        log.warning("rbench.run: %s; the results are in the store and returned, and the logging is kept in %s: "
                    "`rbench log --store %s` logs it", summary.mlflow_error, summary.mlflow_pending, cfg.store)
    return Results.from_summary(summary, cfg.store, cfg.tracking_uri())


@dataclass(frozen=True)
class Comparison:
    """Experiment tables (:func:`rbench.evaluation.report_experiment.experiment_tables`), one per
    dataset; ``repr`` prints them (a notebook shows them as HTML), :meth:`frame` gives every cell
    as a polars DataFrame, :meth:`latex` as LaTeX."""

    tables: list[dict[str, Any]]

    def frame(self) -> pl.DataFrame:
        """A row per (dataset, system, measure): ``mean``, and against the baseline ``difference``,
        ``low`` and ``high`` (its 95% interval), ``effect`` (Cohen's d), ``wins``, ``ties``,
        ``losses``, ``p``, ``p_corrected``, ``significant``; ``baseline`` says which system it is."""
        import polars as pl

        rows = []
        for table in self.tables:
            for row in table["rows"]:
                for name in table["measures"]:
                    cell = row["cells"][name]
                    versus = cell["versus"] or {}
                    rows.append({"dataset": table["dataset"], "system": row["system"], "measure": name,
                                 "baseline": row["system"] == table["baseline"], "mean": cell["mean"],
                                 "difference": versus.get("diff"), "low": versus.get("low"), "high": versus.get("high"),
                                 "effect": versus.get("effect"), "wins": versus.get("wins"),
                                 "ties": versus.get("ties"), "losses": versus.get("losses"), "p": cell["p"],
                                 "p_corrected": cell["p_adjusted"], "significant": cell["significant"]})
        schema = {"dataset": pl.String, "system": pl.String, "measure": pl.String, "baseline": pl.Boolean,
                  "mean": pl.Float64, "difference": pl.Float64, "low": pl.Float64, "high": pl.Float64,
                  "effect": pl.Float64, "wins": pl.Int64, "ties": pl.Int64, "losses": pl.Int64, "p": pl.Float64,
                  "p_corrected": pl.Float64, "significant": pl.Boolean}
        return pl.DataFrame(rows, schema=schema)

    def latex(self) -> str:
        """Every table as a LaTeX ``table`` (booktabs)."""
        from rbench.evaluation.report_experiment import table_latex

        return "\n".join(table_latex(t) for t in self.tables)

    def _repr_html_(self) -> str:
        from rbench.evaluation.report_experiment import table_html

        return "".join(f"<h4>{t['dataset']}</h4>{table_html(t)}" for t in self.tables)

    def __repr__(self) -> str:
        from rbench.evaluation.report_experiment import table_text

        return "\n\n".join(table_text(t) for t in self.tables)


def compare(*runs: Results | str | Path, measures: Sequence[str] = ("recall@5", "ndcg@10"), baseline: str | None = None,
            test: Literal["randomization", "bootstrap", "t-test", "wilcoxon"] = "randomization", trials: int = 10_000,
            alpha: float = 0.05, correction: Literal["holm", "bonferroni", "none"] = "holm", seed: int = 0,
            qrels: str | Path | None = None, dataset: str | None = None,
            tracking_uri: str | None = None, store: str | Path | None = None) -> Comparison:
    """Compare the systems of one or more runs in an experiment table per dataset: each
    :class:`Results`, an MLflow run id (or ``latest``) read from ``tracking_uri`` or the store's
    database, or a :class:`~pathlib.Path` to a TREC run file from elsewhere (named after the file,
    scored on ``qrels``, a TREC or BEIR qrels file, else on the qrels of the rbench runs' dataset,
    ``dataset`` when they hold several). With several rbench runs, their systems are named
    ``RUN:SYSTEM``, RUN being the first 8 characters of the run's MLflow id (``runN`` for Results
    not logged), and ``baseline`` takes that name. ``measures`` take rbench's names (``recall@5``)
    or ir_measures' (``P@10``, ``AP``, ``nDCG@10``); ``test`` is ``randomization`` or ``bootstrap``
    (``trials`` draws from ``seed``), ``t-test`` or ``wilcoxon`` (scipy's)."""
    from rbench.core.locations import resolve_tracking_uri
    from rbench.evaluation.metrics_ir import is_ir_measure
    from rbench.evaluation.report_experiment import experiment_tables
    from rbench.systems import RunFile, add_ir_values, gather, judged_by_dataset, parse_measures, score_files

    if not runs:
        raise RbenchError("compare needs at least one run: Results, an MLflow run id, or a run file's Path")
    parsed = parse_measures(measures)
    logged_runs = [item for item in runs if not isinstance(item, Path)]
    outside = [RunFile.parse(str(item)) for item in runs if isinstance(item, Path)]
    read_files = bool(outside) or any(is_ir_measure(m) for m in parsed)
    scores: dict[tuple[str, str], dict[tuple[str, int | None, str], float]] = {}
    judged: dict[str, str] = {}  # qrels text by dataset, for the run files
    for n, item in enumerate(logged_runs):
        if isinstance(item, Results):
            found, run_id = item.scores(), item.mlflow_run_id
            files = {key: (paths["run"].read_text(encoding="utf-8"), paths["qrels"].read_text(encoding="utf-8"))
                     for key, paths in item.run_files.items()} if read_files else {}
            add_ir_values(found, files, parsed)
            of_run = judged_by_dataset(files)
        else:
            systems = gather(parsed, [item], tracking_uri=resolve_tracking_uri(tracking_uri, store=store),
                             store=Path(store) if store else None, keep_qrels=bool(outside))
            found, run_id, of_run = systems.scores, systems.parents[0].info.run_id, systems.judged
        for dataset_name, text in of_run.items():
            judged.setdefault(dataset_name, text)
        name = run_id[:8] if run_id else f"run{n + 1}"
        for (dataset_name, system), values in found.items():
            scores[(dataset_name, f"{name}:{system}" if len(logged_runs) > 1 else system)] = values
    if outside:
        found, _ = score_files(outside, parsed, judged, Path(qrels) if qrels else None, dataset)
        scores.update(found)
    try:
        return Comparison(experiment_tables(scores, parsed, baseline, test, trials, alpha, correction, seed))
    except ValueError as e:
        raise RbenchError(str(e)) from None
