"""Thin Prefect wrappers around stages: task runners, concurrent submission with per-stage
outcomes, and the stop path.

The store is the only cache. Stage tasks run with no Prefect cache policy and no result
persistence: each task asks the store (:meth:`rbench.core.store.Stage.run`), which returns the
artifact when it is there, intact and fresh, and builds it otherwise, so a rerun (a retry from
Prefect's UI included) builds only what the store lacks, on whichever node runs it, and says
``ran`` or ``cached`` from the store itself. Artifacts handed between tasks are re-addressed
inside the receiving worker's store (:meth:`Store.attach`), so a node that mounts the store
elsewhere reads the same artifact.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import signal
import threading
import time
from concurrent.futures import CancelledError
from dataclasses import dataclass, replace
from typing import Any, ContextManager, Iterator, Sequence, cast

from prefect import Task, get_run_logger, task
from prefect.cache_policies import NO_CACHE
from prefect.context import TagsContext
from prefect.futures import PrefectFuture
from prefect.task_runners import ThreadPoolTaskRunner

from rbench.config import ExecutionConfig
from rbench.core.errors import MissingExtraError
from rbench.core.processes import call_in_process, loads_native
from rbench.core.session import RunSession, current
from rbench.core.stopping import in_a_notebook, stopping, wait_for_the_end
from rbench.core.store import Artifact, Stage, Store, summarize
from rbench.orchestration.prefect_seam import shut_down_now
from rbench.results import StageRow

WAKE_SECONDS = 0.5
log = logging.getLogger("rbench")
_GPU_SLOTS: dict[int, threading.BoundedSemaphore] = {}
_GPU_LOCK = threading.Lock()


def _gpu_slot(slots: int) -> ContextManager[Any]:
    """An in-process limit on concurrent GPU tasks (the thread runner's share of the GPUs)."""
    if slots <= 0:
        return contextlib.nullcontext()
    with _GPU_LOCK:
        semaphore = _GPU_SLOTS.setdefault(slots, threading.BoundedSemaphore(slots))
    return semaphore


@functools.cache
def stage_task(stage: Stage) -> Task[..., Artifact]:
    """Wrap a stage in a Prefect task (one task per stage), without Prefect caching or result
    persistence: the store decides what runs.

    The task takes the store's path, its input artifacts (or futures of them), the
    stage config and build options; ``gpu_slots`` > 0 limits how many GPU tasks of
    this process run at once; with ``in_a_process``, the build runs in a stage process
    (:meth:`Submitter.submit` decides).
    """

    def run(store: str, inputs: Sequence[Artifact], config: Any, options: dict[str, Any], gpu_slots: int = 0,
            in_a_process: bool = False) -> Artifact:
        here = Store(store)
        call = call_in_process if in_a_process else None
        try:
            with _gpu_slot(gpu_slots):
                return stage.run(here, [here.attach(a) for a in inputs], config, call=call, **options)
        except BaseException:
            if stopping():  # its leases were released, its children killed: the process ends within seconds
                wait_for_the_end()
            raise

    return task(name=stage.name, cache_policy=NO_CACHE, persist_result=False)(run)


class StoppableThreads(ThreadPoolTaskRunner[Any]):
    """Prefect's thread-pool runner, except that a stop does not wait for its threads.

    When Prefect turns a SIGTERM into ``TerminationSignal``, the flow engine cancels the
    runner's tasks before it reports the run Crashed, and Prefect's ``cancel_all`` waits for
    every running thread: a stage thread waiting on a dense encode held it past the process's
    grace period, so the ``-stages`` subflow stayed Running for good. While the run whose stages
    it runs is stopping (its :class:`~rbench.core.session.RunSession`, taken at the first submit:
    the engine cancels after the flow's body, and its session, have ended), the pool is shut down
    without waiting; the threads end with the process."""

    _session: RunSession | None = None

    def submit(self, *args: Any, **kwargs: Any) -> Any:
        self._session = self._session or current()  # the run whose stop cancels these threads
        return super().submit(*args, **kwargs)

    def cancel_all(self) -> None:
        stopped = self._session is not None and self._session.stopping.is_set()
        if not (stopped or stopping()) or not shut_down_now(self):
            return super().cancel_all()
        return None


def task_runner(execution: ExecutionConfig) -> Any:
    """The Prefect task runner an experiment's ``execution`` section asks for."""
    if execution.runner == "sequential":
        return StoppableThreads(max_workers=1)
    if execution.runner == "threads":
        return StoppableThreads(max_workers=execution.max_workers)
    if execution.runner == "dask":
        try:
            from prefect_dask.task_runners import DaskTaskRunner
        except ImportError:
            raise MissingExtraError("prefect-dask", "dask", "the dask task runner") from None
        if execution.address:
            return DaskTaskRunner(address=execution.address)
        workers = execution.max_workers or os.cpu_count() or 1
        resources = {"GPU": execution.gpus} if execution.gpus else None
        return DaskTaskRunner(cluster_kwargs={
            "n_workers": workers, "threads_per_worker": 1, "processes": True, "dashboard_address": None,
            "env": _thread_env(workers), **({"resources": resources} if resources else {}),
        })
    try:
        from prefect_ray import RayTaskRunner
    except ImportError:
        raise MissingExtraError("prefect-ray", "ray", "the ray task runner") from None
    init: dict[str, Any] = {}
    if execution.max_workers and not execution.address:
        init["num_cpus"] = execution.max_workers
    if execution.gpus and not execution.address:
        init["num_gpus"] = execution.gpus
    if not execution.address:
        init["runtime_env"] = {"env_vars": _thread_env(execution.max_workers or os.cpu_count() or 1)}
    return RayTaskRunner(address=execution.address, init_kwargs={"include_dashboard": False, **init})


def _thread_env(workers: int) -> dict[str, str]:
    """Math-library threads per local worker process: the cores shared out, so that workers
    running torch side by side do not oversubscribe the machine."""
    threads = str(max(1, (os.cpu_count() or 1) // workers))
    return {"OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads, "TOKENIZERS_PARALLELISM": "false"}


def _gpu_placement(execution: ExecutionConfig) -> ContextManager[Any]:
    """Context for submitting one GPU task: a Dask resource or a Ray ``num_gpus`` request."""
    if not execution.gpus:
        return contextlib.nullcontext()
    if execution.runner == "dask":
        from dask.base import annotate

        return cast("ContextManager[Any]", annotate(resources={"GPU": 1}))
    if execution.runner == "ray":
        from prefect_ray.context import remote_options

        return cast("ContextManager[Any]", remote_options(num_gpus=1))
    return contextlib.nullcontext()


@dataclass
class Submitted:
    """One submitted stage task: its stage name, label and future."""

    stage: str
    label: str
    future: PrefectFuture[Artifact]


def describe(stage: str, label: str, state: Any, prebuilt: frozenset[tuple[str, str]] = frozenset()) -> StageRow:
    """The report row of a finished stage task: key, status (ran, cached, failed, skipped),
    build seconds (with ``finished``, the epoch second it was seen to end, for a stage that
    ran), and the error or the artifact's summary. ``prebuilt``: ``(stage, key)`` of what this
    run built before its flow (:func:`rbench.orchestration.graph.check_data`), reported ran."""
    if state.is_completed():
        artifact: Artifact = state.result()
        fresh = artifact.built or (artifact.stage, artifact.key) in prebuilt
        return StageRow(stage=stage, label=label, key=artifact.key, status="ran" if fresh else "cached",
                        seconds=artifact.info.get("build_seconds") if fresh else 0.0,
                        finished=round(time.time(), 3) if fresh else None, summary=summarize(artifact.info))
    if state.is_pending() or state.name == "NotReady":
        return StageRow(stage=stage, label=label, key=None, status="skipped", seconds=None,
                        error="a stage it needs did not finish")
    return StageRow(stage=stage, label=label, key=None, status="failed", seconds=None, error=_state_message(state))


class _NamedByRun(logging.Filter):
    """Names the flow run a record was made in beside rbench's logger name (``rbench [run-stages]``),
    so that a worker's output tells the runs it holds apart."""

    def filter(self, record: logging.LogRecord) -> bool:
        from prefect.context import FlowRunContext

        context = FlowRunContext.get()
        if record.name == "rbench" and context is not None and context.flow_run is not None:
            record.name = f"rbench [{context.flow_run.name}]"
        return True


class _InRun(logging.Filter):
    """Passes the records made in a flow or task run (Prefect files them under that run)."""

    def filter(self, record: logging.LogRecord) -> bool:
        from prefect.context import get_run_context
        from prefect.exceptions import MissingContextError

        if getattr(record, "flow_run_id", None):
            return True
        try:
            get_run_context()
        except MissingContextError:
            return False
        return True


def forward_logs_to_prefect() -> bool:
    """Against a Prefect server of one's own (``PREFECT_API_URL``: a deployed run, a worker), send
    rbench's records made in a run (stage progress, from stage processes too) to that run's logs
    in the Prefect API, and at INFO to the process's output (a worker's log, each line naming its
    run: ``rbench [<run>-stages] - ...``), unless the user set
    rbench's level. Records made outside a run (a lease's heartbeat) stay local; Prefect's handler
    sends them in batches, and a stopped run sends what is batched before its process ends.
    ``rbench run``'s temporary server gets none: the terminal shows them. Returns whether records
    are forwarded; a second call adds no handler."""
    from prefect.logging.handlers import APILogHandler

    from rbench.core.stopping import before_exit
    from rbench.orchestration.prefect_server import own_server

    if not own_server():
        return False
    logger = logging.getLogger("rbench")
    if not any(isinstance(h, APILogHandler) for h in logger.handlers):
        handler = APILogHandler()
        handler.addFilter(_InRun())
        logger.addHandler(handler)
        logger.addFilter(_NamedByRun())
        if logger.level == logging.NOTSET:
            logger.setLevel(logging.INFO)
    before_exit(_send_batched_logs)  # the run's session's: a stopped run sends what is batched
    return True


def _send_batched_logs(timeout: float = 3.0) -> None:
    """Send the records Prefect's log worker still holds (it sends every couple of seconds)."""
    from prefect.logging.handlers import APILogWorker

    APILogWorker.drain_all(timeout=timeout)


PRINTED = "rbench_printed"
"""The attribute of a progress record whose line a notebook's cell shows as printed text."""


class _NotPrinted(logging.Filter):
    """Keeps a record whose line was printed to the cell off Prefect's console, which shows a run's
    WARNING records in a notebook: a failed stage's line appeared twice (issue 81, item 7)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not getattr(record, PRINTED, False)


def _printed_lines_off_the_console() -> None:
    """Add :class:`_NotPrinted` to the root logger's console handlers (Prefect's), once each."""
    for handler in logging.getLogger().handlers:
        if isinstance(handler, logging.StreamHandler) and not any(isinstance(f, _NotPrinted) for f in handler.filters):
            handler.addFilter(_NotPrinted())


class Submitter:
    """Submits stage tasks through the flow's task runner, logs each as it finishes (and prints it
    in a notebook's cell), and reports how each ended. Against a Prefect server of one's own,
    rbench's progress records go to the run's logs too (:func:`forward_logs_to_prefect`)."""

    def __init__(self, store: str, execution: ExecutionConfig, prebuilt: frozenset[tuple[str, str]] = frozenset()):
        self.store = Store(store)
        self.execution = execution
        self.prebuilt = prebuilt
        self.submitted: list[Submitted] = []
        self._logger = get_run_logger()
        self._in_a_notebook = in_a_notebook()
        if self._in_a_notebook:
            _printed_lines_off_the_console()
        self._session = current()  # done callbacks run outside the run's context: its stop is read from here
        forward_logs_to_prefect()

    def submit(self, stage: Stage, inputs: Sequence[Any], config: Any, label: str, gpu: bool = False,
               key: str | None = None, native: bool | None = None, **options: Any) -> PrefectFuture[Artifact]:
        """Submit a stage's task; ``inputs`` may be artifacts or futures of artifacts; ``key`` and
        ``native``: its plan's (:class:`rbench.orchestration.plan.PlanNode`; ``native`` None: the
        stage's own answer for ``config``), a native build running in a stage process where the
        ``execution`` section says so. The task run carries no tags: Prefect's
        task engine asks the server for a ``tag:<name>`` concurrency slot per tag of every task run
        (``prefect/task_engine.py``, ``_concurrency``), so the flow's tags on each stage were one request
        per stage that a busy server answered 503 (issue 81: 1 of 6 runs started together failed);
        ``execution`` limits the stages."""
        stage_tsk = stage_task(stage)
        named = stage_tsk.with_options(task_run_name=f"{stage_tsk.name}[{label}]")
        slots = self.execution.gpus if gpu and self.execution.in_process() else 0
        native = loads_native(stage, config) if native is None else native
        in_a_process = native and self.execution.native_builds_apart()
        with TagsContext(current_tags=set()), _gpu_placement(self.execution) if gpu else contextlib.nullcontext():
            future = named.submit(str(self.store.root), list(inputs), config, {**options, "key": key}, slots,
                                  in_a_process)
        self.submitted.append(Submitted(stage_tsk.name, label, future))
        name = stage_tsk.name
        future.add_done_callback(lambda f: self._progress(name, label, f))
        return future

    def _progress(self, stage: str, label: str, future: PrefectFuture[Artifact]) -> None:
        stopped = self._session is not None and self._session.stopping.is_set()
        if not settle(future) or stopped or stopping():  # a stop cancelled or ended it: the stop's own line says so
            return
        row = describe(stage, label, future.state, self.prebuilt)
        level = logging.INFO if row.status in ("ran", "cached") else logging.WARNING
        line = f"{stage:<9} {label:<32} {row.status:<7} {row.summary or row.error}"
        self._logger.log(level, "%s", line, extra={PRINTED: self._in_a_notebook})
        if self._in_a_notebook:  # Prefect's console records stay out of a cell (rbench.door): the line goes there
            print(line, flush=True)

    def artifact(self, future: PrefectFuture[Artifact]) -> Artifact | None:
        """The future's artifact in this store, or None when its task failed or never ran."""
        wait_for(future)
        if not future.state.is_completed():
            return None
        return self.store.attach(future.state.result())

    def report(self) -> list[StageRow]:
        """One row per submitted task, in submission order (waits for all of them)."""
        rows = []
        for s in self.submitted:
            wait_for(s.future)
            rows.append(replace(describe(s.stage, s.label, s.future.state, self.prebuilt), summary=None))
        return rows


def wait_for(future: PrefectFuture[Any]) -> None:
    """Wait for ``future`` in steps of ``WAKE_SECONDS``, so that the main thread runs Python code
    at least that often. A signal that the kernel delivers to a stage thread (torch's, say) sets
    Python's flag, but only the main thread runs the handler, and a main thread asleep in an
    untimed wait would run it only when the stage ends: Ctrl-C to the process group was ignored
    for minutes."""
    done = threading.Event()
    future.add_done_callback(lambda _: done.set())
    while not done.wait(WAKE_SECONDS):
        pass
    settle(future)


def settle(future: PrefectFuture[Any]) -> bool:
    """Fix a finished future's final state (the API may still say Running); False when a stop
    cancelled its task. Prefect cancels a task still queued in its thread pool with
    ``asyncio.CancelledError``, a BaseException: raised from a done-callback, it escaped the
    callback's guard and killed the pool's thread with a traceback."""
    try:
        future.wait()
    except (CancelledError, asyncio.CancelledError):
        return False
    return True


def _state_message(state: Any) -> str:
    """The error of a failed task state, one line."""
    try:
        state.result(raise_on_failure=True)
    except BaseException as e:  # the task's own exception, re-raised by Prefect
        text = f"{type(e).__name__}: {e}"
        return text.splitlines()[0] if text else type(e).__name__
    return str(state.message or state.name)


def call_stage(stage: Stage, store: str, inputs: Sequence[Artifact], config: Any, label: str,
               report: list[StageRow], **options: Any) -> Artifact:
    """Run one stage's task and wait for it (for loops whose next step depends on this one);
    append its report row; re-raise its error."""
    sub = Submitter(store, ExecutionConfig.model_validate({}))
    future = sub.submit(stage, inputs, config, label, **options)
    report.extend(sub.report())
    return sub.store.attach(future.result())


@contextlib.contextmanager
def ended_by_termination(grace_seconds: float = 5.0) -> Iterator[None]:
    """Around a flow's work: when Prefect turns SIGTERM (a cancellation from the UI or ``prefect
    flow-run cancel``, a pod deletion, a worker's stop) into ``TerminationSignal``, leases are
    released and the process ends ``grace_seconds`` later, after Prefect has recorded the run's
    state (Crashed, or Cancelled), instead of waiting for the stages still running in worker
    threads. In ``rbench run`` on its temporary server, whose states nobody reads, SIGTERM stays
    rbench's own from here to the flow's end, so it ends the run at once as it does outside a
    flow: one line, no "Crash detected" record per flow level. The next run resumes from the last
    finished item. On a server of one's own a top-level run watches for its own cancel
    (:mod:`rbench.orchestration.cancel_watch`), whatever Prefect's runner saw. A flow no door
    started (a deployed run) opens its run session here (:mod:`rbench.core.session`)."""
    from prefect.exceptions import TerminationSignal

    from rbench.core.session import run_session
    from rbench.core.stopping import exit_soon, handles_signals, stop_now, take_back_sigterm
    from rbench.orchestration.cancel_watch import watched_for_cancel
    from rbench.orchestration.prefect_server import own_server

    with run_session():
        temporary_server = handles_signals() and not own_server()
        if temporary_server:
            take_back_sigterm()
        try:
            with watched_for_cancel():
                yield
        except TerminationSignal as e:
            if temporary_server:  # it came while Prefect held SIGTERM: a subflow was starting
                stop_now(e.signal)
            exit_soon(128 + e.signal, grace_seconds, reason=signal.Signals(e.signal).name)
            _cancelled_if_asked()
            raise


def _cancelled_if_asked() -> None:
    """Record this flow run Cancelled now where a cancel was asked for it (its state Cancelling):
    a subflow's engine records its own cancel, but the run that was cancelled stayed Running until
    its worker noticed the process had ended, half a minute later. The engine's copy of the run gets
    that state too: Prefect's flow engine reports Crashed on ``TerminationSignal`` unless the run it
    holds is already final (``prefect/flow_engine.py``, ``except TerminationSignal``), and a run that
    stopped on its own cancel watch (no runner to record the cancel after it) ended Crashed."""
    from prefect.client.orchestration import get_client
    from prefect.context import FlowRunContext
    from prefect.states import Cancelled

    context = FlowRunContext.get()
    if context is None or context.flow_run is None:
        return
    try:
        with get_client(sync_client=True) as client:
            state = client.read_flow_run(context.flow_run.id).state
            if state is not None and state.is_cancelling():
                cancelled: Any = client.set_flow_run_state(
                    context.flow_run.id, Cancelled(message=state.message or "cancelled"), force=True).state
                if cancelled is not None and cancelled.is_cancelled():
                    context.flow_run.state = cancelled  # the engine's own copy: its crash report is not sent over it
    except Exception as e:  # the stop goes on: the worker records the cancel when the process has ended
        log.debug("could not record the cancel of flow run %s: %s", context.flow_run.id, e)
