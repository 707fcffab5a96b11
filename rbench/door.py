"""One front door: every way into rbench opens its experiment here.

``rbench run``, ``rbench embeddings``, ``rbench search``, ``rbench chunking``, ``rbench
reproduce`` and :func:`rbench.run` each open their file with :func:`open_experiment` and run
what it opens, so that a setting, a stop or a safeguard one of them honours, every other does:

- the file is resolved once, with the door's settings (:class:`DoorSettings`: mirror, store,
  MLflow tracking URI, runner, cluster address) over the environment's over the file's, and
  checked once before anything runs (models, store, tracking server);
- the flow it starts gets that experiment (:func:`rbench.experiment.reopened`), so it reads
  nothing again and checks nothing twice; the settings reach it through the context, never as
  flow parameters, which Prefect stores (a tracking URI may hold a password);
- rbench's environment is set (:func:`setup_environment`): Prefect's temporary server, where no
  ``PREFECT_API_URL`` is set, starts once the checks have passed, writes to its own log and gets
  ``RBENCH_SERVER_STARTUP_SECONDS`` to start;
- the run gets one :class:`~rbench.core.session.RunSession` (a command's, where a working
  ``rbench`` command opened one): what the run owns (its leases, child processes, stop
  callbacks, warm-up threads) is there, and the stop path reads it;
- SIGINT (Ctrl-C), SIGTERM and SIGHUP end the run within seconds with one line, its leases
  released, its stage processes and the temporary server stopped: on the command line and in a
  script alike (:func:`rbench.core.stopping.signals_handled`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Literal, Mapping

from rbench.core.errors import ConfigError
from rbench.core.locations import DoorSettings, door
from rbench.core.stopping import in_a_notebook

if TYPE_CHECKING:
    from rbench.orchestration.plan import ExperimentPlan

Kind = Literal["benchmark", "embeddings", "search", "chunking"]
FLOW_TAG = "rbench"  # every flow run rbench starts carries it (deployments add rbench-heartbeat)

__all__ = ["DoorSettings", "OpenedExperiment", "open_experiment", "setup_environment"]


def setup_environment() -> None:
    """Prefect's, MLflow's, Hugging Face's and the tokenizers' settings rbench runs with, where the
    caller set none: no third-party progress bars between rbench's lines (MLflow's artifact
    downloads in report, export, compare; a model's weights loading). In a notebook, Prefect's
    own records (a line per task run) stay out of the cell's output unless
    ``PREFECT_LOGGING_LEVEL`` asks for them, and rbench's progress lines (a stage's rows encoded,
    queries searched) go to the cell once, as the command prints them, unless logging is configured."""
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    if in_a_notebook():
        warnings.filterwarnings("ignore", message="IProgress not found")  # tqdm's, without ipywidgets
        if "PREFECT_LOGGING_LEVEL" not in os.environ:
            os.environ["PREFECT_LOGGING_LEVEL"] = "WARNING"  # read when Prefect is imported
            logging.getLogger("prefect").setLevel(logging.WARNING)  # and where it is already
        progress = logging.getLogger("rbench")
        if not progress.handlers and not logging.getLogger().handlers:
            handler = logging.StreamHandler(sys.stdout)
            handler.setFormatter(logging.Formatter("%(asctime)s %(message)s", datefmt="%H:%M:%S"))
            progress.addHandler(handler)
            progress.propagate = False  # Prefect's console handler on the root logger showed each line again
            if progress.level == logging.NOTSET:
                progress.setLevel(logging.INFO)


_INTERRUPTED: set[str] = set()  # flow runs an interrupt stopped in this process


class _NotFromInterruptedRuns(logging.Filter):
    """Keeps Prefect's records of a run an interrupt stopped off the console (its crash as the
    interrupt unwinds it, its stage threads that end later): the one ``KeyboardInterrupt`` says it.
    Prefect's own log of the run keeps them."""

    def filter(self, record: logging.LogRecord) -> bool:
        from rbench.core.stopping import stopping

        if not record.name.startswith(("prefect.flow_runs", "prefect.task_runs")):
            return True
        return not stopping() and str(getattr(record, "flow_run_id", "")) not in _INTERRUPTED


def _quiet_interrupted_runs() -> None:
    """At an interrupt in a notebook: the flow run under way stays off the console from now on."""
    from prefect.context import FlowRunContext

    context = FlowRunContext.get()
    if context is not None and context.flow_run is not None:
        _INTERRUPTED.add(str(context.flow_run.id))
    for logger in (logging.getLogger(), logging.getLogger("prefect")):
        for handler in logger.handlers:
            if isinstance(handler, logging.StreamHandler) and not any(
                    isinstance(f, _NotFromInterruptedRuns) for f in handler.filters):
                handler.addFilter(_NotFromInterruptedRuns())


def run_flow(flow_fn, *args, **kwargs):
    """Call a flow; every flow run it starts is tagged ``rbench`` (Prefect is imported only here).
    Where Prefect has no server of the user's own, the flow reports to rbench's temporary server
    (:func:`rbench.orchestration.prefect_server.temporary_server`), and its runs send no heartbeats: they tell a
    server's automations that a deployed run's machine lives, and each flow's end waited up to a
    second for the heartbeat thread."""
    from prefect import tags
    from prefect.settings import PREFECT_FLOWS_HEARTBEAT_FREQUENCY, temporary_settings

    from rbench.orchestration.prefect_server import temporary_server

    beats = temporary_settings(updates={PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None}) if temporary_server() \
        else contextlib.nullcontext()
    with tags(FLOW_TAG), beats:
        return flow_fn(*args, **kwargs)


class OpenedExperiment:
    """An experiment file resolved with a door's settings. ``config`` is an
    :class:`~rbench.config.ExperimentConfig` (``benchmark``, ``embeddings``, ``search``) or a
    :class:`~rbench.config.chunking.ChunkingGridConfig` (``chunking``); ``search`` the search
    section of a ``search`` file. :meth:`run` runs its flow and returns the flow's summary."""

    def __init__(self, kind: Kind, config_path: str | None, config: Any, search: Any = None,
                 corpora: list[str] | None = None):
        self.kind, self.config_path, self.config, self.search, self.corpora = kind, config_path, config, search, corpora
        self.checked = False
        self._plan: ExperimentPlan | None = None
        self._described: dict[str, Any] = {}  # the retrievers the checks built, by label: the plan asks them
        self.store_followed = self.store_defaulted = False
        """Whether the store is the one this file's last run used (:func:`rbench.experiment.followed_store`),
        and whether nothing named one (the working folder's ``.rbench``)."""
        if kind in ("benchmark", "embeddings") and config_path is not None:
            from rbench.experiment import defaulted_store, followed_store

            self.store_defaulted = defaulted_store(config)
            self.config, self.store_followed = followed_store(config_path, config)

    @property
    def store(self) -> Path:
        """The store the run writes to."""
        return Path(self.config.store)

    @property
    def mirror(self) -> Path | None:
        """The mirror folder the run reads, or None."""
        return Path(self.config.mirror) if self.config.mirror else None

    @property
    def tracking_uri(self) -> str:
        """Where the run logs to MLflow."""
        return self.config.tracking_uri()

    def header(self) -> str:
        """The line a run of a ``benchmark`` or ``embeddings`` experiment opens with (``rbench run`` prints it,
        ``rbench.run`` logs it): the experiment, its pairs, store, mirror and runner."""
        cfg = self.config
        mirror = cfg.mirror or "none (each dataset reads its own path, else its source)"
        followed = " (this file's last run's: --store or the file's store: to choose)" if self.store_followed else ""
        return (f"rbench: experiment {cfg.name!r}: {len(cfg.datasets)} dataset(s) x {len(cfg.retrievers)} "
                f"retriever(s); store {cfg.store}{followed}; mirror {mirror}; runner {cfg.execution.runner}")

    def check(self) -> None:
        """The checks before any work (once): models load here, the store is writable with room,
        the tracking server answers."""
        from rbench.core.locations import remember_mirror, remember_store
        from rbench.experiment import check_grid, preflight

        if self.checked:
            return
        if self.kind == "chunking":
            check_grid(self.config)
        else:
            self._described = preflight(self.config)
        if self.kind != "chunking" and self.mirror:
            remember_mirror(self.store, self.mirror)
        if self.kind in ("benchmark", "embeddings") and self.config_path is not None:
            remember_store(self.config_path, self.store, defaulted=self.store_followed or self.store_defaulted)
        self.checked = True

    def plan(self) -> ExperimentPlan:
        """The run's :class:`~rbench.orchestration.plan.ExperimentPlan`, made once, after the data
        phase (the datasets are downloaded and prepared here); the flow :meth:`run` starts gets it."""
        if self._plan is None:
            from rbench.orchestration.graph import planned

            self.check()
            self._plan = planned(self.config, self._described)
        return self._plan

    def _opened(self) -> Any:
        return (self.config, self.search) if self.kind == "search" else self.config

    def run(self, **parameters: Any) -> Any:
        """Run this experiment's flow (what is in the store is reused) and return what it returns;
        ``parameters`` are the flow's own (``return_state``)."""
        from rbench.experiment import opened_config
        from rbench.orchestration.prefect_server import start_early

        self.check()
        start_early()
        if self.kind == "benchmark":
            from rbench.flows.benchmark import benchmark as flow_fn
        elif self.kind == "embeddings":
            from rbench.flows.embedding_benchmark import embedding_benchmark as flow_fn
        elif self.kind == "search":
            from rbench.flows.config_search import config_search as flow_fn
        elif self.search is not None:
            from rbench.flows.chunking_grid import chunking_search as flow_fn
        else:
            from rbench.flows.chunking_grid import chunking_grid as flow_fn
        if self.config_path is None:  # a structured config: the flow's experiment parameter
            parameters["experiment"] = self.config
        from rbench.orchestration.plan import handed

        with opened_config(self.kind, self.config_path, self._opened()), handed(self._plan):
            return run_flow(flow_fn, config_path=self.config_path, **parameters)


def _resolve(kind: Kind, path: str, corpora: list[str] | None) -> tuple[Any, Any]:
    if kind == "chunking":
        from rbench.config.chunking import load_grid_config

        cfg = load_grid_config(path, corpora=corpora)
        return cfg, cfg.search
    if kind == "search":
        from rbench.config.search import load_search_config

        return load_search_config(path)
    from rbench.experiment import resolve_experiment

    return resolve_experiment(path, None), None


@contextlib.contextmanager
def open_experiment(kind: Kind, config: str | Path | Mapping | Any, settings: DoorSettings = DoorSettings(), *,
                    corpora: list[str] | None = None, check: bool = True) -> Iterator[OpenedExperiment]:
    """Open the experiment file ``config`` for a run of ``kind`` with a door's ``settings``; the
    block runs it (:meth:`OpenedExperiment.run`). Its checks run here unless ``check`` is False
    (then before the first run: ``rbench reproduce`` opens studies it may not run). ``corpora``:
    a chunking grid's ``--corpus``. A ``benchmark`` also opens a structured config (a mapping, an
    :class:`~rbench.config.ExperimentConfig`), whose relative paths resolve against the working folder."""
    from rbench.core.session import run_session
    from rbench.core.stopping import interrupts_handled, signals_handled
    from rbench.orchestration.prefect_server import start_early, stop_temporary_server

    setup_environment()
    stops = interrupts_handled(_quiet_interrupted_runs) if in_a_notebook() else signals_handled(stop_temporary_server)
    with run_session(), stops, door(settings):
        if isinstance(config, (str, Path)):
            path = str(Path(config).resolve())
            opened = OpenedExperiment(kind, path, *_resolve(kind, path, corpora), corpora=corpora)
        elif kind == "benchmark":
            from rbench.experiment import resolve_experiment

            opened = OpenedExperiment(kind, None, resolve_experiment(None, config))
        else:
            raise ConfigError(f"a {kind} opens an experiment file: give its path, not {type(config).__name__}")
        if check:
            opened.check()
            start_early()  # it boots while the data phase runs and the flow's code loads
        yield opened
