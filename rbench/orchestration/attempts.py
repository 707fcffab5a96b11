"""What a retried flow run finds of its earlier attempts: task runs and subflow runs that a killed
attempt left Running (or Pending) in the UI are marked Crashed before the new attempt starts."""

from __future__ import annotations

NOT_FINAL = ("RUNNING", "PENDING", "SCHEDULED", "PAUSED")


def attempt() -> int:
    """The current flow run's attempt (1 for the first, 2 after one retry...); 0 outside a flow run."""
    from prefect.runtime import flow_run

    return int(flow_run.run_count or 0) if flow_run.id else 0


def bury_earlier_attempts() -> int:
    """Mark Crashed every unfinished task run and subflow run of the current flow run's earlier
    attempts; return how many. Call it first thing in a retried flow, before it submits anything
    (then every unfinished run under it belongs to an attempt that ended)."""
    from prefect import get_client
    from prefect.client.schemas.filters import (
        FlowRunFilter,
        FlowRunFilterId,
        FlowRunFilterParentFlowRunId,
        TaskRunFilter,
        TaskRunFilterState,
        TaskRunFilterStateType,
    )
    from prefect.client.schemas.objects import StateType
    from prefect.runtime import flow_run
    from prefect.states import Crashed

    if attempt() <= 1:
        return 0
    current = flow_run.id
    message = f"left unfinished by an earlier attempt of flow run {flow_run.name}; attempt {attempt()} replaces it"
    buried = 0
    with get_client(sync_client=True) as client:
        children = client.read_flow_runs(
            flow_run_filter=FlowRunFilter(parent_flow_run_id=FlowRunFilterParentFlowRunId(any_=[current])))
        for child in children:
            if child.state is not None and child.state.type.value in NOT_FINAL:
                client.set_flow_run_state(child.id, Crashed(message=message), force=True)
                buried += 1
        unfinished = client.read_task_runs(
            flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[current, *(c.id for c in children)])),
            task_run_filter=TaskRunFilter(state=TaskRunFilterState(
                type=TaskRunFilterStateType(any_=[StateType(t) for t in NOT_FINAL]))))
        for task_run in unfinished:
            client.set_task_run_state(task_run.id, Crashed(message=message), force=True)
            buried += 1
    return buried
