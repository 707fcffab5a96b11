"""The ``rbench`` command: run an experiment, list what is available, show a finished run."""

from __future__ import annotations

import argparse
import gc
import json
import logging
import re
import sys
import textwrap
import time
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from rbench.core import settings
from rbench.core.errors import PENDING_EXIT, RbenchError
from rbench.core.locations import rbench_command
from rbench.core.secrets import redact

if TYPE_CHECKING:
    from rbench.results import MetricRow, StageRow


def _setup_environment() -> None:
    from rbench.door import setup_environment

    setup_environment()
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(message)s", datefmt="%H:%M:%S")
    logging.getLogger("rbench").setLevel(logging.INFO)


def _print_metrics(metrics: Sequence[MetricRow]) -> None:
    from dataclasses import asdict

    from rbench.console_tables import metrics_table

    if metrics:
        print()
        print(metrics_table([asdict(m) for m in metrics]))
        print()


def _print_samples(cfg, stages: Sequence[StageRow]) -> None:
    """Beside the table: each dataset scored on a sample of its judged queries, and how to score all."""
    from rbench.core.store import Store

    store = Store(cfg.store)
    for row in stages:
        artifact = store.load("subsample", row.key) if row.stage == "subsample" and row.key else None
        info = artifact.info if artifact else {}
        if info.get("of") and info.get("queries", info["of"]) < info["of"]:
            print(f"{row.label}: scored on a sample, {info['queries']:,} of its {info['of']:,} queries "
                  f"(subsample.size {cfg.subsample.size}); `subsample: all` scores every judged query")


def _show_hint(run_id: str, tracking_uri: str) -> None:
    from rbench.tracking.write import ui_hint

    print(f"MLflow run {run_id} at {tracking_uri}")
    print(f"show it again with: {rbench_command()} show {run_id} --tracking-uri {tracking_uri}")
    line = ui_hint(tracking_uri, run_id)
    if line:
        print(line)


def _door(args: argparse.Namespace):
    """The settings a command's flags give its experiment (:class:`rbench.door.DoorSettings`)."""
    from rbench.door import DoorSettings

    return DoorSettings(**{name: getattr(args, name, None)
                           for name in ("mirror", "store", "tracking_uri", "runner", "address")})


def _nothing_to_do(opened, started: float) -> bool:
    """When every stage is cached and these very results are logged to MLflow already (and no
    earlier logging waits in the store), print them and say so, without a flow: True. Else False."""
    from rbench.api import logged_summary

    summary = logged_summary(opened)
    if summary is None:
        return False
    _print_metrics(summary.metrics)
    _print_samples(opened.config, summary.stages)
    print(f"stages: 0 ran, {len(summary.stages)} cached, 0 failed or skipped; wall time "
          f"{time.perf_counter() - started:.1f}s")
    print("every stage is cached and MLflow holds these results already: no flow run started "
          "(--force-flow starts one and logs a new MLflow run)")
    _show_hint(summary.mlflow_run_id, summary.tracking_uri)
    return True


def cmd_run(args: argparse.Namespace) -> int:
    from rbench.door import open_experiment

    with open_experiment("embeddings" if args.command == "embeddings" else "benchmark", args.config,
                         _door(args)) as opened:
        if args.plan:
            return print_plan(opened)
        return run_opened(opened, force_flow=args.force_flow if args.command == "run" else True)


def print_plan(opened) -> int:
    """``rbench run --plan``: the plan the run would execute, the door's own (:meth:`OpenedExperiment.plan`),
    made after the same checks and data phase (its datasets downloaded and prepared), so that every key
    it prints is the key the run uses; no flow starts and no other stage runs."""
    from rbench.core.store import Store

    cfg = opened.config
    plan = opened.plan()
    print(f"rbench: the plan of experiment {cfg.name!r} on store {cfg.store} (after the data phase; no flow runs)")
    print(f"{'stage':<9} {'label':<40} {'key':<12} status")
    print("\n".join(plan.lines(Store(cfg.store))))
    return 0


def run_opened(opened, force_flow: bool = False) -> int:
    """Run an opened ``benchmark`` or ``embeddings`` experiment as ``rbench run`` does: print its
    header, its metrics and where MLflow has them; the exit code."""
    from rbench.api import run_benchmark
    from rbench.core.errors import said_once_on_console

    cfg = opened.config
    mirror = cfg.mirror or "none (each dataset reads its own path, else its source)"
    followed = " (this file's last run's: --store or the file's store: to choose)" if opened.store_followed else ""
    print(f"rbench: experiment {cfg.name!r}: {len(cfg.datasets)} dataset(s) x {len(cfg.retrievers)} "
          f"retriever(s); store {cfg.store}{followed}; mirror {mirror}; runner {cfg.execution.runner}", flush=True)
    started = time.perf_counter()
    if not force_flow and _nothing_to_do(opened, started):
        return 0
    with said_once_on_console(settings.verbose()):  # the FAILED lines below say each failure
        result = run_benchmark(opened)
    elapsed = time.perf_counter() - started
    ran, cached = result.stage_count("ran"), result.stage_count("cached")
    _print_metrics(result.metrics)
    _print_samples(cfg, result.stages)
    print(f"stages: {ran} ran, {cached} cached, "
          f"{len(result.stages) - ran - cached} failed or skipped; wall time {elapsed:.1f}s")
    if result.mlflow_run_id:
        _show_hint(result.mlflow_run_id, result.tracking_uri)
    elif result.mlflow_error:
        print(f"MLflow logging failed: {result.mlflow_error}; the metrics above are in the store, and the "
              f"logging is kept in {result.mlflow_pending}: run `{rbench_command()} log --store {cfg.store}` "
              "(or any run that logs to this tracking URI) to log it", file=sys.stderr)
    if result.report_folder:
        print(f"embedding-model comparison (also logged to MLflow): {result.report_folder}")
        print((Path(result.report_folder) / "models.md").read_text())
    for failure in result.failures:
        print(f"FAILED {failure.dataset}/{failure.retriever}: {failure.error}", file=sys.stderr)
    return 1 if result.failures else PENDING_EXIT if result.mlflow_error else 0


def cmd_chunking(args: argparse.Namespace) -> int:
    from rbench.door import open_experiment

    with open_experiment("chunking", args.config, _door(args), corpora=args.corpus) as opened:
        cfg = opened.config
        if cfg.search is not None:
            result = opened.run()
            for t in result.trials:
                print(f"  trial {t['trial']:>3}  {t['params']}  {cfg.search.target} = {t['value']:.4f}")
            print(f"best: {result.best}")
            return 0
        combos = len(cfg.chunk_sizes) * len(cfg.overlaps) * len(cfg.n)
        print(f"rbench: chunking grid {cfg.name!r}: {combos} combinations; data {cfg.data}; model {cfg.model}; "
              f"corpora {cfg.corpora or 'all'}", flush=True)
        started = time.perf_counter()
        result = opened.run()
    ran = sum(1 for s in result.stages if s.status == "ran")
    print((Path(result.report_folder) / "grid.md").read_text())
    print(f"best: {result.best}")
    print(f"stages: {ran} ran, {len(result.stages) - ran} cached; wall time {time.perf_counter() - started:.1f}s")
    print(f"report: {result.report_folder}; MLflow run {result.mlflow_run_id}")
    return 0


def cmd_search(args: argparse.Namespace) -> int:
    from rbench.door import open_experiment

    with open_experiment("search", args.config, _door(args)) as opened:
        search = opened.search
        print(f"rbench: {search.strategy} search of {search.retriever!r} over {list(search.space)}, "
              f"budget {search.budget}, target {search.target}; runner {opened.config.execution.runner}",
              flush=True)
        started = time.perf_counter()
        result = opened.run()
    for t in result.trials:
        print(f"  trial {t['trial']:>3}  {t['params']}  {search.target} = {t['value']:.4f}"
              f"  ({t['stages_ran']} stages ran)")
    best = result.best
    print(f"best: trial {best['trial']} {best['params']} {search.target} = {best['value']:.4f}; "
          f"wall time {time.perf_counter() - started:.1f}s; MLflow run {result.mlflow_run_id}")
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    from rbench.core.locations import given_mirror, remembered_mirror, resolve_store
    from rbench.dataset_adapters.base import ADAPTERS
    from rbench.dataset_listing import dataset_availability
    from rbench.retrievers.base import RETRIEVERS

    what = args.what
    if what in ("datasets", "all"):
        mirror, whose = given_mirror(args.mirror), ""
        if mirror is None:
            mirror = remembered_mirror(resolve_store(args.store))
            whose = " (the last 'rbench run' into this store read it)" if mirror else ""
        print(f"datasets (mirror: {mirror or 'none; pass --mirror or set RBENCH_MIRROR'}{whose}):")
        for name, cls in ADAPTERS.items():
            print(f"  {name:<12} {cls.description}")
            params = ", ".join(f"{k}={_shown_default(v)}" for k, v in cls.Params.model_fields.items())
            print(f"  {'':<12} params: {params}")
            for variant, status, paths in dataset_availability(cls, Path(mirror) if mirror else None):
                print(f"  {'':<12}   {variant:<36} {status}")
                if paths:
                    print(f"  {'':<12}   {'':<36} looks for {paths}")
    if what in ("retrievers", "all"):
        print("retrievers:")
        for name, cls in sorted(RETRIEVERS.items()):
            params = ", ".join(f"{k}={_shown_default(v)}" for k, v in cls.Params.model_fields.items())
            print(f"  {name:<12} {cls.description}\n  {'':<12} params: {params}")
    if what in ("models", "all"):
        _list_models()
    if what in ("tables", "all"):
        from rbench.evaluation.reproduction import PUBLISHED, load_published, published_names

        print(f"published tables ({rbench_command()} compare RUN --against NAME):")
        for name in published_names():
            print(f"  {name:<24} {load_published(name).title}")
        print(f"published chunking grids ({rbench_command()} compare-grid RUN --against NAME):")
        for path in sorted((PUBLISHED / "grids").glob("*.yaml")):
            print(f"  {path.stem}")
    return 0


def _list_models() -> None:
    from rbench.llm import models as llm_models
    from rbench.retrievers.models import ALIASES, MODELS, packaged_path

    print("embedding models (dense: {model: NAME}):")
    for model_id, spec in MODELS.items():
        aliases = [a for a, t in ALIASES.items() if t == model_id]
        where = "packaged, offline" if packaged_path(spec) else (
            "from the hub" if spec.hub else f"needs pip install {spec.package}")
        print(f"  {model_id:<42} {spec.dim:>4}-d  {where}; aliases {aliases}\n  {'':<42} {spec.description}")
    print("  (any sentence-transformers hub id or local model folder also works)")
    print("LLMs (llm: {model: NAME}):")
    for model_id, (package, _, _) in llm_models.PACKAGED.items():
        aliases = [a for a, t in llm_models.ALIASES.items() if t == model_id]
        where = "packaged, offline" if llm_models.packaged_gguf(model_id) else f"needs pip install {package}"
        print(f"  {model_id:<42} {where}; aliases {aliases}")
    print("  (any transformers hub id or local folder, a .gguf file, or a server with backend vllm/openai)")
    print("cross-encoders (rerank: {model: NAME}):")
    print("  none packaged: any sentence-transformers CrossEncoder hub id (such as "
          "cross-encoder/ms-marco-MiniLM-L-6-v2) or local folder")


def cmd_runs(args: argparse.Namespace) -> int:
    from rbench.tracking.read import list_runs

    uri = _tracking_uri(args)
    runs = list_runs(uri, args.experiment, args.limit)
    print(f"{len(runs)} newest run(s) at {redact(uri)}" + (f", experiment {args.experiment!r}" if args.experiment
                                                           else ""))
    if runs:
        print(f"{'run id':<32}  {'started':<16}  {'status':<8}  {'experiment':<18}  name: systems")
    for r in runs:
        what = ", ".join(r["systems"]) or r["kind"]
        print(f"{r['id']:<32}  {r['started']:<16}  {r['status']:<8}  {r['experiment']:<18}  {r['name']}: {what}")
    return 0


def _reading_store(args: argparse.Namespace) -> tuple[Path, str]:
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


def _store(args: argparse.Namespace) -> Path:
    """The store a reading command reads (:func:`_reading_store`)."""
    return _reading_store(args)[0]


def _tracking_uri(args: argparse.Namespace) -> str:
    """The tracking URI a reading command reads (:func:`_reading_store`); a sqlite database that
    does not exist is an error (reading must not create an empty store)."""
    from rbench.tracking.backend import prepare_tracking

    uri = _reading_store(args)[1]
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


def cmd_show(args: argparse.Namespace) -> int:
    from rbench.console_tables import measures_table, metrics_table
    from rbench.tracking.read import load_chunking_table, load_results

    uri = _tracking_uri(args)
    if args.measures:
        from rbench.systems import gather, parse_measures

        measures = parse_measures(args.measures)
        systems = gather(measures, [args.run], tracking_uri=uri, experiment=args.experiment, store=_store(args))
        (parent,) = systems.parents
        print(f"run {parent.info.run_id} ({parent.info.run_name}), {redact(uri)}")
        print(measures_table(systems.scores, measures))
        return 0
    chunking = load_chunking_table(uri, args.run, args.experiment)
    if chunking is not None:
        parent, table = chunking
        print(f"chunking grid run {parent.info.run_id} ({parent.info.run_name}), {redact(uri)}")
        print(table)
        return 0
    (parent,), rows, _ = load_results(uri, [args.run], args.experiment)
    print(f"run {parent.info.run_id} ({parent.info.run_name}), {redact(uri)}")
    print(metrics_table(rows))
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from rbench.tracking.read import export_run

    uri = _tracking_uri(args)
    written = export_run(uri, args.run, args.experiment, Path(args.out), store=_store(args))
    print(f"wrote {len(written)} file(s) to {args.out} (trec_eval -m all_trec {args.out}/DATASET.qrels "
          f"{args.out}/DATASET.SYSTEM.trec scores each as rbench does):")
    for path in written:
        print(f"  {path.name}")
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from rbench.evaluation.report_experiment import table_text
    from rbench.verbs import report

    written = report(*args.runs, run_files=args.run_file, qrels=args.qrels, dataset=args.dataset, out=args.out,
                     measures=args.measures or (), baseline=args.baseline, test=args.test, trials=args.trials,
                     alpha=args.alpha, correction=args.correction, seed=args.seed, log=not args.no_log,
                     experiment=args.experiment, tracking_uri=_tracking_uri(args) if args.runs else None,
                     store=_store(args))
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


def cmd_fuse(args: argparse.Namespace) -> int:
    from rbench.verbs import fuse, names_a_run

    uri = _tracking_uri(args) if any(names_a_run(given) for given in args.inputs) else None
    fused = fuse(*args.inputs, method=args.method, k=args.k, depth=args.depth, dataset=args.dataset,
                 experiment=args.experiment, tracking_uri=uri, store=_store(args) if uri else None)
    out = fused.write(args.out, args.name)
    print(f"fused {len(fused.inputs)} runs by {args.method}" + (f" (k={args.k:g})" if args.method == "rrf" else "")
          + f": {', '.join(fused.inputs)}")
    print(f"wrote {out}: {len(fused.run):,} queries, {sum(len(d) for d in fused.run.values()):,} lines")
    return 0


def _compare_run(uri: str, run: str, experiment: str, tables: list, maps: list[str], trials: int,
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


def _log_comparisons(uri: str, run_id: str, tables: list, docs: list[dict], out: Path) -> None:
    """Write each comparison as ``<table>.json`` into ``out`` and keep it on the MLflow run."""
    from rbench.evaluation.reproduction_text import summary
    from rbench.tracking.read import log_reproduction

    out.mkdir(parents=True, exist_ok=True)
    for table, doc in zip(tables, docs):
        data = json.dumps(doc, indent=1)
        (out / f"{table.name}.json").write_text(data, encoding="utf-8")
        log_reproduction(uri, run_id, table.name, data, summary(doc))


def cmd_compare(args: argparse.Namespace) -> int:
    from rbench.evaluation.report import reproduction_page
    from rbench.evaluation.reproduction import load_published
    from rbench.tracking.read import log_reproduction_page

    tables = [load_published(name) for name in args.against]
    uri = _tracking_uri(args)
    parent, docs = _compare_run(uri, args.run, args.experiment, tables, args.map, args.trials, args.seed)
    if not any(c["measured"] is not None for doc in docs for c in doc["cells"]):
        missing = sorted({c["missing"] for doc in docs for c in doc["cells"] if c.get("missing")})[:4]
        raise RbenchError(f"run {parent.info.run_id} ({parent.info.run_name}) has none of the cells of "
                          f"{', '.join(t.name for t in tables)} ({'; '.join(missing)}): nothing was written or logged. "
                          "Compare the run of that study's config, or name the run's systems and datasets with "
                          "--map PUBLISHED=RUN")
    out = Path(args.out)
    _log_comparisons(uri, parent.info.run_id, tables, docs, out)
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


def cmd_reproduce(args: argparse.Namespace) -> int:
    from rbench.door import open_experiment
    from rbench.evaluation.reproduction import load_published
    from rbench.evaluation.reproduction_study import load_reproduction, matrix, page
    from rbench.tracking.read import log_reproduction_page

    repro = load_reproduction(args.name)
    tables = [load_published(name) for name in repro.tables]
    out = Path(args.out)
    docs, status, pairs, commands, runs = [], {}, {}, {}, []
    for study in repro.studies:
        with open_experiment("benchmark", study.path(), _door(args), check=False) as opened:
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
            parent, found = _compare_run(uri, "latest", cfg.mlflow.experiment, tables, [], args.trials, 0)
            _log_comparisons(uri, parent.info.run_id, tables, found, out / Path(study.config).stem)
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


def cmd_compare_grid(args: argparse.Namespace) -> int:
    import csv
    import io

    from rbench.evaluation.reproduction_grids import compare_grid, grid_markdown, load_grid
    from rbench.tracking.read import load_chunking_table, log_reproduction

    grid = load_grid(args.against)
    uri = _tracking_uri(args)
    found = load_chunking_table(uri, args.run, args.experiment, "grid.csv")
    if found is None:
        raise RbenchError(f"run {args.run!r} of experiment {args.experiment!r} is not a chunking grid run: pass the "
                          "run id of `rbench chunking` (its experiment is rbench-chunking)")
    parent, text = found
    cells = compare_grid(grid, list(csv.DictReader(io.StringIO(text))))
    run = f"{parent.info.run_name} ({parent.info.run_id[:8]})"
    markdown, line = grid_markdown(grid, cells, run)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{grid.name}.md").write_text(markdown, encoding="utf-8")
    data = json.dumps({"run": run, "against": grid.name, "cells": cells}, indent=1)
    (out / f"{grid.name}.json").write_text(data, encoding="utf-8")
    log_reproduction(uri, parent.info.run_id, grid.name, data, line)
    print(markdown)
    print(f"wrote {out / (grid.name + '.md')} and .json; logged to MLflow run {parent.info.run_id}")
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    from rbench.core.locations import resolve_store
    from rbench.core.store import Store

    root = resolve_store(args.store)
    if not root.is_dir():
        what = "is a file, not a store folder" if root.exists() else "does not exist"
        raise RbenchError(f"the store {root} {what}: pass the folder a run wrote to (--store, or RBENCH_STORE)")
    store = Store(root)
    started = time.perf_counter()
    total = len(store.artifacts())
    findings = store.verify(full=not args.fast, remove=args.remove)
    mode = "sizes and fingerprints" if args.fast else "every byte (sha256)"
    damaged = sum(f.why == "damaged" for f in findings)
    print(f"rbench: verified {total} artifact(s) in {store.root} ({mode}) in {time.perf_counter() - started:.1f}s: "
          f"{damaged} damaged, {len(findings) - damaged} stale or built from one")
    reasons = {"damaged": "damaged", "stale": "stale", "built-from": "built from"}
    for f in findings:
        print(f"  {f.stage}/{f.key}: {reasons[f.why]} {f.detail}" +
              (" (removed: the next run rebuilds it)" if args.remove else ""))
    items = store.verify_checkpoints(remove=args.remove)
    print(f"rbench: {len(items)} damaged checkpoint item(s) of unfinished builds")
    for stage, key, item in items:
        print(f"  {stage}/.partial-{key}/{item}" + (" (removed: the next run redoes it)" if args.remove else ""))
    leases = store.abandoned_leases(remove=args.remove)
    print(f"rbench: {len(leases)} lease(s) left by a builder that is gone")
    for path, why in leases:
        print(f"  {path.relative_to(store.root)}: {why}" + (" (broken)" if args.remove else ""))
    found = findings or items or leases
    if found and not args.remove:
        print("rerun with --remove to delete them (and what was built from them) so that the next run rebuilds them")
    return 1 if found and not args.remove else 0


def cmd_log(args: argparse.Namespace) -> int:
    from rbench.core.locations import given_tracking_uri, resolve_store
    from rbench.core.store import Store
    from rbench.tracking.pending import log_pending, pending_records

    store = Store(resolve_store(args.store))
    records = [Path(r) for r in args.records] or pending_records(store)
    if not records:
        print(f"rbench: no pending MLflow logging in {store.root}")
        return 0
    uri = given_tracking_uri(args.tracking_uri)
    for record in records:
        run_id = log_pending(record, uri)
        print(f"rbench: logged {record.name} as MLflow run {run_id}")
    return 0


def cmd_worker(args: argparse.Namespace) -> int:
    from rbench.worker import Supervisor

    worker_args = ["--pool", args.pool, *(["--name", args.name] if args.name else []),
                   *(a for q in args.work_queue for a in ("--work-queue", q)),
                   *(["--limit", str(args.limit)] if args.limit else []),
                   *(["--with-healthcheck"] if args.with_healthcheck else [])]
    return Supervisor(worker_args, grace=args.grace).run()


def _positive(text: str) -> float:
    """An argparse type: a positive number of seconds."""
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number of seconds")
    return value


DESCRIPTION = ("rbench: retrieval benchmarks over corpora that mix table rows and text. Run an experiment file "
               "(cached stages: a changed setting reruns only what depends on it), read its results back from "
               "MLflow, compare them with published tables. `rbench COMMAND --help` shows each command's options "
               "and an example.")

COMMANDS = {  # name: (description, examples)
    "run": ("Run an experiment YAML file: download, prepare, subsample, index, retrieve and evaluate every dataset "
            "x retriever pair, then log the metrics to MLflow. Stages are cached in the store by content: a rerun "
            "builds only what a change touched, and a rerun that changes nothing starts no flow.",
            ["rbench run configs/default.yaml --mirror ../shared/data",
             "rbench run my-corpus.yaml --store /data/rbench --runner dask"]),
    "embeddings": ("Run an experiment and compare its dense models: recall@k, throughput and index size per model, "
                   "as a table and plots.", ["rbench embeddings configs/embeddings.yaml --mirror ../shared/data"]),
    "chunking": ("Run a chunking grid (chunk size x overlap x N) and score it at span level, as Chroma's chunking "
                 "evaluation does.",
                 ["rbench chunking configs/chunking.yaml --mirror ../shared/data --corpus state_of_the_union"]),
    "search": ("Search a retriever's parameters (grid, random or TPE) on an experiment with a 'search:' section; "
               "each trial is a cached run, the best is logged.", ["rbench search configs/search-bm25.yaml"]),
    "list": ("List the registered datasets (and whether the mirror holds them), retrievers with their parameters, "
             "models (embedding models, LLMs, cross-encoders) and the published tables 'compare' takes.",
             ["rbench list retrievers", "rbench list datasets --mirror ../shared/data", "rbench list tables"]),
    "runs": ("List the newest runs in a store's MLflow database (or a tracking server), of every experiment: id, "
             "start, status, experiment, and the dataset.system pairs each holds.",
             ["rbench runs", "rbench runs --store /data/rbench --experiment my-corpus --limit 50"]),
    "show": ("Print the metrics table of a finished run (an experiment or a chunking grid) from MLflow; with "
             "--measures, those measures (rbench's or ir_measures' names) per system.",
             ["rbench show latest", "rbench show 7474e0875eb448178fc1305f05ca627c --store /data/rbench",
              "rbench show latest --measures \"P@10 AP nDCG@10 R@100\""]),
    "report": ("Write report.md, report.html and experiment.tex for one or more runs: the parameters that differ "
               "between runs, an experiment table per dataset (systems x measures, each system tested against a "
               "baseline, Holm-corrected, significance and the best value marked, also printed), all metrics, "
               "recall@k curves, costs, and comparisons with published tables.",
               ["rbench report latest --out report",
                "rbench report RUN_A RUN_B --measures ndcg@10 recall@5 --baseline bm25",
                "rbench report latest --run-file pyserini=run.bm25.trec --measures \"P@10 AP nDCG@10\" --test t-test"]),
    "export": ("Write a run's TREC run files, <dataset>.<system>.trec, qrels, <dataset>.qrels, and per-query "
               "measures, <dataset>.<system>.per_query.tsv: trec_eval, pytrec_eval and ranx score the runs as rbench "
               "does (scores strictly decrease in rbench's order).",
               ["rbench export latest --out export", "trec_eval export/fetaqa.qrels export/fetaqa.bm25.trec"]),
    "fuse": ("Fuse runs into one TREC run file as ranx fuses them: reciprocal rank fusion, CombSUM or CombMNZ of "
             "min-max normalised scores; inputs are run files (from rbench export or elsewhere) and rbench runs.",
             ["rbench fuse export/fetaqa.bm25.trec export/fetaqa.dense.trec --out rrf.trec",
              "rbench fuse latest pyserini.trec --method combsum --dataset fetaqa --out sum.trec"]),
    "compare": ("Line a run up against published tables: per cell the published and measured value, and a "
                "verdict (equal or off by q queries where it is the same computation, else a 95% interval).",
                ["rbench compare latest --against arm-report-table6",
                 "rbench compare latest --against anserini-bright-bm25 --map bm25=bm25-lucene"]),
    "reproduce": ("Run a published study's local configs and line every published cell up on one page; configs "
                  "that need a cluster are listed with their commands.",
                  ["rbench reproduce arm-report --mirror ../shared/data"]),
    "compare-grid": ("Line a chunking grid run up against a published grid, cell by cell.",
                     ["rbench compare-grid latest --against seed002-sotu-fixedtoken-minilm"]),
    "verify": ("Check every stored artifact against its manifest (sizes and SHA-256 digests) and against what it "
               "was built from; --remove deletes the damaged and stale ones, everything built from them, and leases "
               "left by killed builders, so that the next run rebuilds them.", ["rbench verify --store .rbench",
                                                                         "rbench verify --fast"]),
    "log": ("Log to MLflow the runs whose logging failed (the tracking server was down); their records are kept "
            "in the store.", ["rbench log --store .rbench"]),
    "worker": ("A Prefect process worker whose shutdown (SIGTERM, Ctrl-C) stops its flow runs as rbench stops: "
               "leases released, one line, resumable.", ["rbench worker --pool gpu-pool --with-healthcheck"]),
}


MEASURES_HELP = ("measures in rbench's names (recall@5, ndcg@10, map@all) or ir_measures' (P@10 AP nDCG@10 R@100 "
                 "RR Bpref; quoted together or apart)")


def _command(sub, name: str, help: str) -> argparse.ArgumentParser:
    """A subcommand with its description and examples (:data:`COMMANDS`) in its ``--help``."""
    description, examples = COMMANDS[name]
    return sub.add_parser(name, help=help, description=textwrap.fill(description, 79),
                          epilog="examples:\n" + "\n".join(f"  {line}" for line in examples),
                          formatter_class=argparse.RawDescriptionHelpFormatter)


def _door_flags(parser: argparse.ArgumentParser, runner: bool = True) -> None:
    """The flags every command that runs an experiment takes beside --mirror and --store."""
    parser.add_argument("--tracking-uri", help="MLflow tracking URI (default: $MLFLOW_TRACKING_URI, else the "
                        "config's, else sqlite in the store)")
    if runner:
        parser.add_argument("--runner", choices=["threads", "sequential", "dask", "ray"],
                            help="task runner (overrides execution.runner)")
        parser.add_argument("--address", help="existing Dask scheduler or Ray cluster address (with --runner dask|ray)")


class Parser(argparse.ArgumentParser):
    """argparse's parser, whose refusal of a value outside a closed choice (a subcommand, ``--test``)
    names the choice closest to it."""

    def _check_value(self, action: argparse.Action, value: object) -> None:
        from rbench.core.configfile import did_you_mean

        if action.choices is not None and value not in action.choices:
            choices = ", ".join(map(repr, action.choices))
            raise argparse.ArgumentError(action, f"invalid choice: {value!r} (choose from {choices})"
                                                 f"{did_you_mean(value, action.choices)}")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``rbench`` command."""
    parser = Parser(prog="rbench", description=DESCRIPTION)
    parser.add_argument("--debug", action="store_true", help="show the traceback of an input error (also in "
                        "Prefect's task logs)")
    parser.add_argument("--verbose", action="store_true", help="also show Prefect's per-task state lines and "
                        "the JVM's INFO lines")
    sub = parser.add_subparsers(dest="command", required=True)
    run = _command(sub, "run", help="run an experiment YAML file")
    embeddings = _command(sub, "embeddings", help="run an experiment and compare its dense models (table, plots)")
    for p in (run, embeddings):
        p.add_argument("config", help="experiment YAML file, e.g. configs/default.yaml")
        p.add_argument("--mirror", help="local mirror folder of dataset files (default: $RBENCH_MIRROR)")
        p.add_argument("--store", help="artifact store folder (default: $RBENCH_STORE, else the config's)")
        _door_flags(p)
        p.set_defaults(func=cmd_run, force_flow=False)
        p.add_argument("--plan", action="store_true",
                       help="print the run's plan (each stage, its key, cached or to run, the runner) after its "
                       "checks and data phase, and start no flow")
    run.add_argument("--force-flow", action="store_true",
                     help="start the flow (and log a new MLflow run) even when every stage is cached and MLflow "
                     "holds these results already")
    chunking = _command(sub, "chunking", help="run a chunking grid (chunk size x overlap x N) at span level")
    chunking.add_argument("config", help="grid YAML file, e.g. configs/chunking.yaml")
    chunking.add_argument("--mirror", help="mirror folder holding chroma/ (default: $RBENCH_MIRROR)")
    chunking.add_argument("--store", help="artifact store folder (overrides the config)")
    chunking.add_argument("--corpus", action="append", metavar="ID",
                          help="limit the run to this corpus (corpora/ID.md); repeat for several (overrides 'corpora')")
    _door_flags(chunking, runner=False)
    chunking.set_defaults(func=cmd_chunking)
    search = _command(sub, "search", help="search a retriever's parameters (grid, random, TPE)")
    search.add_argument("config", help="experiment YAML with a 'search:' section, e.g. configs/search-bm25.yaml")
    search.add_argument("--mirror", help="local mirror folder of dataset files (default: $RBENCH_MIRROR)")
    search.add_argument("--store", help="artifact store folder (overrides the config)")
    _door_flags(search)
    search.set_defaults(func=cmd_search)
    lst = _command(sub, "list", help="list datasets, retrievers and models")
    lst.add_argument("what", nargs="?", default="all",
                     choices=["all", "datasets", "retrievers", "models", "tables"], help="what to list (default all)")
    lst.add_argument("--mirror", help="mirror folder to check for offline availability (default: $RBENCH_MIRROR, "
                     "else the one the store's last run read)")
    lst.add_argument("--store", help="store folder whose last run's mirror to use (default: $RBENCH_STORE, "
                     "else ./.rbench)")
    lst.set_defaults(func=cmd_list)
    runs = _command(sub, "runs", help="list the newest runs in a store's MLflow database")
    runs.add_argument("--limit", type=int, default=20, help="how many runs (default 20)")
    runs.set_defaults(func=cmd_runs)
    show = _command(sub, "show", help="print the metrics of a finished run (an experiment or a chunking grid)")
    show.add_argument("run", help="MLflow parent run id, or 'latest'")
    show.add_argument("--measures", nargs="+", metavar="MEASURE", help=MEASURES_HELP)
    report = _command(sub, "report", help="Markdown + HTML report of runs, with paired significance tests")
    report.add_argument("runs", nargs="*", help="MLflow parent run ids, or 'latest'")
    report.add_argument("--run-file", action="append", default=[], metavar="[NAME=]PATH",
                        help="a TREC run file from elsewhere (Pyserini, PyTerrier, a paper's release), a system of "
                        "the tables (repeat for several); scored on --qrels, else on the qrels of the runs' dataset")
    report.add_argument("--qrels", help="TREC qrels file the run files are scored on (default: the qrels the rbench "
                        "runs were scored on)")
    report.add_argument("--dataset", help="the dataset the run files answer (default: the runs' only dataset, or "
                        "the qrels file's name)")
    report.add_argument("--out", default="report", help="output folder (default: ./report)")
    report.add_argument("--measures", nargs="+", metavar="MEASURE",
                        help=MEASURES_HELP + " (default: recall, ndcg and mrr at the run's largest k)")
    report.add_argument("--baseline", help="the system every other is tested against (default: the first by name; "
                        "with several runs, names read RUN:SYSTEM as the report shows them)")
    report.add_argument("--test", default="randomization", choices=["randomization", "bootstrap", "t-test", "wilcoxon"],
                        help="paired test of a system against the baseline over the queries both scored (default "
                        "randomization, exact when 2^queries <= trials; t-test and wilcoxon are scipy's)")
    report.add_argument("--correction", default="holm", choices=["holm", "bonferroni", "none"],
                        help="correction for the table's multiple tests (default holm)")
    report.add_argument("--alpha", type=float, default=0.05, help="significance level (default 0.05)")
    report.add_argument("--trials", type=int, default=10_000,
                        help="permutations or resamples per test (default 10,000)")
    report.add_argument("--no-log", action="store_true", help="do not log the report to the runs' MLflow parent runs")
    report.add_argument("--seed", type=int, default=0, help="seed of the randomization and bootstrap tests (default 0; "
                        "printed in the table's caption)")
    export = _command(sub, "export", help="write a run's TREC run files (one per dataset x system) and qrels, "
                            "which trec_eval, pytrec_eval and ranx score as rbench does")
    export.add_argument("run", help="MLflow parent run id, or 'latest'")
    export.add_argument("--out", default="export", help="output folder (default: ./export)")
    export.set_defaults(func=cmd_export)
    fuse = _command(sub, "fuse", help="fuse run files and rbench runs into one run file (RRF, CombSUM, CombMNZ)")
    fuse.add_argument("inputs", nargs="+", metavar="RUN", help="TREC run files, or MLflow parent run ids (each "
                      "of their systems on --dataset is a run)")
    fuse.add_argument("--method", default="rrf", choices=["rrf", "combsum", "combmnz"],
                      help="rrf (1 / (k + rank)), combsum or combmnz of min-max normalised scores, as ranx fuses "
                      "(default rrf)")
    fuse.add_argument("--k", type=float, default=60, help="the RRF constant (default 60)")
    fuse.add_argument("--depth", type=int, help="keep the first DEPTH documents of each query (default: all)")
    fuse.add_argument("--dataset", help="the dataset of the rbench runs to fuse (default: their only one)")
    fuse.add_argument("--name", help="the run file's tag (default: the method)")
    fuse.add_argument("--out", default="fused.trec", help="the fused run file (default: ./fused.trec)")
    fuse.set_defaults(func=cmd_fuse)
    compare = _command(sub, "compare",
                       help="line a run up against published tables: 95%% intervals, a verdict per cell")
    compare.add_argument("run", help="MLflow parent run id, or 'latest'")
    compare.add_argument("--against", required=True, action="append", metavar="NAME",
                         help="a published table rbench ships (arm-report-table6, anserini-bright-bm25, ...; repeat for one page "
                         "of several) or a YAML file "
                         "of its shape")
    compare.add_argument("--map", action="append", default=[], metavar="PUBLISHED=RUN",
                         help="the run's name for a published system or dataset (repeat), e.g. bm25=bm25-lucene")
    compare.add_argument("--trials", type=int, default=10_000, help="bootstrap resamples (default 10,000)")
    compare.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    compare.add_argument("--out", default="reproduction", help="output folder (default: ./reproduction)")
    compare.add_argument("--all", action="store_true", help="print the published cells the run lacks too (the "
                         "written page always has them)")
    compare.set_defaults(func=cmd_compare)
    reproduce = _command(sub, "reproduce", help="run a published study's local configs and line every published "
                               "cell up on one page (cluster configs listed with their commands)")
    reproduce.add_argument("name", help="a reproduction rbench ships (arm-report) or a YAML file of its shape")
    reproduce.add_argument("--mirror", help="local mirror folder of dataset files (default: $RBENCH_MIRROR)")
    reproduce.add_argument("--store", help="artifact store folder (default: $RBENCH_STORE, else each config's)")
    _door_flags(reproduce)
    reproduce.add_argument("--trials", type=int, default=10_000, help="bootstrap resamples (default 10,000)")
    reproduce.add_argument("--out", default="reproduction", help="output folder (default: ./reproduction)")
    reproduce.set_defaults(func=cmd_reproduce)
    compare_grid = _command(sub, "compare-grid", help="line a chunking grid run up against a published grid, "
                                  "cell by cell")
    compare_grid.add_argument("run", help="MLflow run id of `rbench chunking`, or 'latest'")
    compare_grid.add_argument("--against", required=True, metavar="NAME",
                              help="a published grid rbench ships (seed002-sotu-fixedtoken-minilm) or a YAML file")
    compare_grid.add_argument("--out", default="reproduction", help="output folder (default: ./reproduction)")
    compare_grid.set_defaults(func=cmd_compare_grid)
    for p in (show, report, export, compare, compare_grid, runs, fuse):
        latest = "the MLflow experiment whose runs to list (default: every experiment)" if p is runs else (
            "the MLflow experiment 'latest' is read from (default: "
            + ("rbench-chunking, where chunking grids log)" if p is compare_grid else
               "the newest finished run of any experiment but the chunking grids')"))
        p.add_argument("--tracking-uri", help="MLflow tracking URI (default: $MLFLOW_TRACKING_URI, else sqlite in "
                       "the store)")
        p.add_argument("--store", help="store folder whose MLflow database to read (default: $RBENCH_STORE, "
                       "else ./.rbench, else the store an earlier run recorded that holds the run id)")
        p.add_argument("--config", help="read the store and tracking URI of this experiment file, as 'rbench run' "
                       "finds them")
        p.add_argument("--experiment", default="rbench-chunking" if p is compare_grid else None, help=latest)
    show.set_defaults(func=cmd_show)
    verify = _command(sub, "verify", help="check every stored artifact against its manifest")
    verify.add_argument("--store", help="store folder (default: $RBENCH_STORE, else ./.rbench)")
    verify.add_argument("--fast", action="store_true", help="sizes and fingerprints only (what a cache hit checks)")
    verify.add_argument("--remove", action="store_true", help="delete damaged artifacts so that they are rebuilt")
    verify.set_defaults(func=cmd_verify)
    report.set_defaults(func=cmd_report)
    logging_ = _command(sub, "log", help="log to MLflow the runs whose logging failed (kept in the store)")
    logging_.add_argument("records", nargs="*", help="pending records (default: every one in the store)")
    logging_.add_argument("--store", help="store folder (default: $RBENCH_STORE, else ./.rbench)")
    logging_.add_argument("--tracking-uri", help="MLflow tracking URI (default: $MLFLOW_TRACKING_URI, else the "
                          "recorded one)")
    logging_.set_defaults(func=cmd_log)
    worker = _command(sub, "worker", help="a Prefect process worker whose shutdown (SIGTERM, Ctrl-C) stops its "
                            "flow runs as rbench stops: leases released, one line, resumable")
    worker.add_argument("--pool", required=True, help="the work pool to take flow runs from")
    worker.add_argument("--name", help="the worker's name (default: Prefect's)")
    worker.add_argument("--work-queue", action="append", default=[], help="a work queue of the pool (repeatable)")
    worker.add_argument("--limit", type=int, help="the most flow runs at once")
    worker.add_argument("--with-healthcheck", action="store_true", help="serve Prefect's /health endpoint")
    worker.add_argument("--grace", type=_positive, default=10.0, help="seconds a stopping flow run, then the "
                        "worker, is given before it is killed (default 10)")
    worker.set_defaults(func=cmd_worker)
    return parser


def _shown_default(field) -> str:
    """A param's default as the listing shows it: ``<required>``, a retriever by its name, or the value."""
    from rbench.retrievers.base import RetrieverSpec

    if field.is_required():
        return "<required>"
    value = field.default_factory() if field.default_factory is not None else field.default
    return f"<{value.name}>" if isinstance(value, RetrieverSpec) else repr(value)


WORKING_COMMANDS = frozenset({"run", "embeddings", "chunking", "search", "log", "reproduce"})


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``rbench`` command."""
    args = build_parser().parse_args(argv)
    if args.debug:
        settings.write(settings.DEBUG, "1")
    if args.verbose:
        settings.write(settings.VERBOSE, "1")
    _setup_environment()
    if argv is None and args.command in WORKING_COMMANDS:  # a process of its own, not a caller's function call
        from rbench.core.stopping import stop_on_signals
        from rbench.orchestration.prefect_server import stop_temporary_server

        stop_on_signals(stop_temporary_server)
    try:
        return args.func(args)
    except RbenchError as e:
        if args.debug:
            raise
        print(f"rbench: error: {e}", file=sys.stderr)
        return 2
    finally:
        if argv is None:  # the process ends next: its closing full collection took 2 s after a run
            gc.freeze()


if __name__ == "__main__":
    sys.exit(main())
