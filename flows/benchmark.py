"""The benchmark flow: download -> prepare -> subsample -> (encode) -> index -> (rewrite)
-> retrieve -> evaluate -> MLflow, with independent work submitted concurrently
(the experiment's plan, :mod:`rbench.orchestration.plan`, is that chain)."""

from __future__ import annotations

from dataclasses import replace
from typing import Mapping

from prefect import flow, tags, task
from prefect.runtime import flow_run
from prefect.states import Completed, Failed

from rbench.config import ExperimentConfig
from rbench.core import settings
from rbench.core.errors import quiet_user_errors
from rbench.core.secrets import redact
from rbench.core.store import Store
from rbench.experiment import config_text, experiment_for_flow, run_name
from rbench.orchestration.attempts import bury_earlier_attempts
from rbench.orchestration.graph import handed_on, planned, summarize_results
from rbench.orchestration.plan import ExperimentPlan, handed, handed_plan, run_plan
from rbench.orchestration.prefect_seam import result_now
from rbench.orchestration.runner import StoppableThreads, Submitter, ended_by_termination, task_runner
from rbench.results import Failure, FlowSummary, PairResult, StageRow, StagesOutcome
from rbench.retrievers.base import Retriever
from rbench.tracking.logged import remember_logged
from rbench.tracking.pending import log_pending_for, save_pending
from rbench.tracking.write import log_experiment, publish_run_link, warm_up

log_to_mlflow = task(log_experiment, name="mlflow")
LOGGING_PENDING = "LoggingPending"


def run_stages(plan: ExperimentPlan) -> tuple[list[PairResult], list[Failure], list[StageRow]]:
    """Every stage of the plan as Prefect tasks on this flow's task runner; returns (results,
    failures, stage report). What the MLflow logging imports loads while the stages run."""
    cfg = plan.experiment
    return run_plan(plan, Submitter(str(cfg.store), cfg.execution, plan.prebuilt), while_waiting=warm_up)


@flow(name="rbench-stages")
def run_experiment(cfg: ExperimentConfig) -> StagesOutcome:
    """The stages of one experiment under the task runner its ``execution`` section names, by the
    plan its parent flow hands over (else one made here).

    A SIGTERM (Prefect's ``TerminationSignal``) is handled here, inside the task runner: leaving
    it first would wait for every running stage thread to finish."""
    with ended_by_termination():
        results, failures, report = run_stages(handed_plan(cfg) or planned(cfg))
    return StagesOutcome(tuple(results), tuple(failures), tuple(report))


def run_with_runner(cfg: ExperimentConfig, described: Mapping[str, Retriever] | None = None,
                    ) -> tuple[list[PairResult], list[Failure], list[StageRow]]:
    """Run :func:`run_experiment` as a subflow on the configured task runner (each finished pair's
    evaluation and run then checked in full, :func:`handed_on`), named after the run
    that calls it (``<run>-stages``) and with its tags: a deployment's ``rbench-heartbeat`` among
    them, so that the zombie automation crashes the subflow too when its node dies (it stayed
    Running before). The plan is the door's (:func:`rbench.orchestration.plan.handed_plan`), or,
    in a run no door started, made here after the data phase, asking the retrievers the flow's
    checks built (``described``)."""
    Store(cfg.store).clean_temporaries()
    plan = handed_plan(cfg) or planned(cfg, described)
    stages_only = cfg.model_copy(update={"mlflow": cfg.mlflow.model_copy(update={"tracking_uri": None})})
    subflow = run_experiment.with_options(task_runner=task_runner(cfg.execution),
                                          flow_run_name=f"{flow_run.name or cfg.name}-stages")
    with tags(*flow_run.tags), handed(plan):
        out = subflow(stages_only)  # a flow run's parameters are stored by Prefect: no tracking credentials in them
    return (*handed_on(cfg, out.results, out.failures), list(out.stages))


class PartialFailure(Exception):
    """The result of a flow run where some pairs (or the MLflow logging) failed: the message says
    which, ``summary`` holds what the flow returns otherwise (the metrics of the pairs that
    finished). An exception, so that Prefect can resolve the Failed state it is the data of."""

    def __init__(self, message: str, summary: FlowSummary | None = None):
        super().__init__(message)
        self.summary = summary


def summary_of(state) -> FlowSummary | BaseException | None:
    """The summary of a finished benchmark flow run, whether it completed or partly failed; read
    synchronously in a running event loop too (a Jupyter kernel's), where Prefect would hand back
    a coroutine."""
    result = result_now(state)
    return result.summary if isinstance(result, PartialFailure) else result


def finish(cfg: ExperimentConfig, summary: FlowSummary):
    """The flow's final state: Completed with the summary; Failed naming the failed pairs (and an
    MLflow logging failure); or, where every pair finished and only the MLflow logging failed,
    Completed named ``LoggingPending``: the results are complete and in the store, the logging is
    kept for ``rbench log`` (a scheduler tells it from a failure; ``rbench run`` exits 3)."""
    problems = []
    if summary.failures:
        names = "; ".join(f"{f.dataset}/{f.retriever} ({f.error})" for f in summary.failures)
        total = len(cfg.datasets) * len(cfg.retrievers)
        problems.append(f"{len(summary.failures)} of {total} dataset x retriever pairs failed: {names}")
    if summary.mlflow_error:
        problems.append(f"MLflow logging failed ({summary.mlflow_error}); the metrics are in the store and "
                        f"the logging is kept in {summary.mlflow_pending}: `rbench log` logs it, and so does the "
                        "next run that logs to this tracking URI")
    if not problems:
        return summary
    message = redact("; ".join(problems))
    if not summary.failures:
        return Completed(name=LOGGING_PENDING, message=message, data=summary)
    return Failed(message=message, data=PartialFailure(message, summary))


@flow(name="rbench-benchmark", flow_run_name=run_name, log_prints=True, task_runner=StoppableThreads())
def benchmark(config_path: str | None = None, experiment: ExperimentConfig | None = None,
              mirror: str | None = None, store: str | None = None, tracking_uri: str | None = None,
              runner: str | None = None, address: str | None = None):
    """Run every configured retriever on every configured dataset; return metrics and stage report.

    The experiment is a YAML path (``config_path``) or the structured ``experiment``. Mirror,
    store and tracking URI come from the parameters, else from the worker's environment
    (``RBENCH_MIRROR``, ``RBENCH_STORE``, ``MLFLOW_TRACKING_URI``) at run time, else the file.
    A retried run keeps its name and MLflow parent run; what its earlier attempt left unfinished
    is marked Crashed first. Started by a door (:func:`rbench.door.open_experiment`) for its file,
    it takes the experiment the door resolved and checked.
    """
    if not settings.debug():
        quiet_user_errors()
    with ended_by_termination():  # a stop anywhere in the flow, the MLflow logging included
        bury_earlier_attempts()
        cfg, described = experiment_for_flow("benchmark", config_path, experiment, mirror=mirror, store=store,
                                             tracking_uri=tracking_uri, runner=runner, address=address)
        results, failures, report = run_with_runner(cfg, described)
        if not results:  # no pair finished: nothing to log, the failures say it all
            return finish(cfg, summarize_results(cfg, results, report, None, failures))
        text = redact(config_text(cfg, config_path if experiment is None else None))
        logged = log_to_mlflow(cfg, results, report, text, failures=failures, reuse_parent=True, return_state=True)
        run_id = logged.result() if logged.is_completed() else None
        if run_id is not None:
            publish_run_link(cfg, run_id)
            if not failures:
                remember_logged(cfg, results, text, run_id)
            log_pending_for(cfg)
        summary = summarize_results(cfg, results, report, run_id, failures)
        if run_id is None:
            error = result_now(logged)
            why = redact(str(error) if isinstance(error, Exception) else logged.message or "MLflow logging failed")
            summary = replace(summary, mlflow_error=why,
                              mlflow_pending=str(save_pending(cfg, results, report, text, failures, why)))
        return finish(cfg, summary)
