"""The chunking grid: chunk size x overlap x N retrieved, each a cached stage, scored at span level."""

from __future__ import annotations

from prefect import flow

from rbench.config.chunking import load_grid_config
from rbench.config.search import propose
from rbench.core.errors import ConfigError
from rbench.core.secrets import redact
from rbench.experiment import check_grid, reopened
from rbench.orchestration.runner import call_stage
from rbench.results import GridSummary, SearchSummary
from rbench.tasks.chunking_eval import (
    CHUNK_EMBED,
    CHUNK_EVAL,
    embed_config,
    eval_config,
    grid_files,
    report_grid,
    summary_of,
)
from rbench.tasks.download import DOWNLOAD, DownloadConfig
from rbench.tracking.write import log_chunking_grid, log_search


def _grid(config_path: str, mirror: str | None, store: str | None, corpora: list[str] | None):
    """The grid a door opened for this file, else the file read and checked here."""
    cfg = None if mirror is not None or store is not None or corpora else reopened("chunking", config_path)
    if cfg is None:
        cfg = load_grid_config(config_path, mirror, store, corpora)
        check_grid(cfg)
    return cfg


@flow(name="rbench-chunking-grid", log_prints=True)
def chunking_grid(config_path: str, mirror: str | None = None, store: str | None = None,
                  corpora: list[str] | None = None) -> GridSummary:
    """Chunk, embed, retrieve and score every grid combination; write the table and figures."""
    cfg = _grid(config_path, mirror, store, corpora)
    root, report, results = str(cfg.store.resolve()), [], []
    raw = call_stage(DOWNLOAD, root, [], DownloadConfig.resolved(grid_files(cfg), cfg.mirror), "chunking-data",
                     report, mirror=cfg.mirror)
    for chunker in cfg.chunkers():
        label = f"{chunker.kind}-{chunker.size}-{chunker.overlap}"
        embedded = call_stage(CHUNK_EMBED, root, [raw], embed_config(cfg, chunker), label, report)
        for n in cfg.n:
            scored = call_stage(CHUNK_EVAL, root, [raw, embedded], eval_config(cfg, n), f"{label}/N={n}", report)
            results.append({"chunk_size": chunker.size, "overlap": chunker.overlap, "n": n,
                            "summary": summary_of(scored), "per_question": str(scored.file("per_question.parquet"))})
    out, best = report_grid(cfg, raw, results)
    run_id = log_chunking_grid(cfg, results, best, out, report)
    cells = {m: {k: r[k] for k in ("chunk_size", "overlap", "n")} for m, r in best.items()}
    return GridSummary(results=tuple(results), best=cells, report_folder=str(out), stages=tuple(report),
                       mlflow_run_id=run_id)


@flow(name="rbench-chunking-search", log_prints=True)
def chunking_search(config_path: str, mirror: str | None = None, store: str | None = None,
                    corpora: list[str] | None = None) -> SearchSummary:
    """Search the chunker's size, overlap and N for the best mean ``search.metric``; each trial is cached."""
    cfg = _grid(config_path, mirror, store, corpora)
    if cfg.search is None:
        raise ConfigError(f"{config_path} has no 'search:' section; run it as a grid instead")
    root, report, trials = str(cfg.store.resolve()), [], []
    raw = call_stage(DOWNLOAD, root, [], DownloadConfig.resolved(grid_files(cfg), cfg.mirror), "chunking-data",
                     report, mirror=cfg.mirror)

    def objective(params: dict) -> float:
        chunker = cfg.trial_chunker(params)
        label = f"{chunker.kind}-{chunker.size}-{chunker.overlap}"
        before = len(report)
        embedded = call_stage(CHUNK_EMBED, root, [raw], embed_config(cfg, chunker), label, report)
        n = int(params.get("n", cfg.n[0]))
        scored = call_stage(CHUNK_EVAL, root, [raw, embedded], eval_config(cfg, n), f"{label}/N={n}", report)
        value = summary_of(scored)[cfg.search.metric]["mean"]
        ran = sum(row.status == "ran" for row in report[before:])
        trials.append({"trial": len(trials), "params": params, "value": value, "stages_ran": ran})
        return value

    propose(cfg.search, objective)
    best = max(trials, key=lambda t: t["value"])
    run_id = log_search(cfg, cfg.search, trials, best, subject=f"chunker ({cfg.data}, {cfg.model})",
                        target=f"{cfg.search.metric}_mean", kind="chunking-search",
                        params={"data": str(cfg.data), "model": cfg.model, "corpora": ",".join(cfg.corpora or [])})
    return SearchSummary(best=best, trials=tuple(trials), stages=tuple(report), mlflow_run_id=run_id,
                         tracking_uri=redact(cfg.tracking_uri()))
