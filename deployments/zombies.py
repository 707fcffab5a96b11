"""Create (or replace) the Prefect automation that marks flow runs whose node died as Crashed.

A flow run emits a heartbeat event every ``PREFECT_FLOWS_HEARTBEAT_FREQUENCY`` seconds (set
to 30 in ``prefect.yaml``'s work pool). When a run that sent a heartbeat sends neither another
one nor a final state within ``--grace`` seconds, the automation sets it to Crashed, so that
the UI's Retry (or a new run) can pick the experiment up again; cached stages are reused.

    PREFECT_API_URL=http://prefect-server:4200/api python deployments/zombies.py --grace 120
"""

from __future__ import annotations

import argparse
from datetime import timedelta

NAME = "rbench: crash flow runs whose node died"


def create(grace_seconds: int) -> str:
    """Create the automation on the server in ``PREFECT_API_URL``; return its id."""
    from prefect.automations import Automation
    from prefect.client.schemas.objects import StateType
    from prefect.events.actions import ChangeFlowRunState
    from prefect.events.schemas.automations import EventTrigger, Posture
    from prefect.events.schemas.events import ResourceSpecification

    try:
        Automation.read(name=NAME).delete()
    except ValueError:  # none yet
        pass
    automation = Automation(
        name=NAME,
        description="A flow run stopped sending heartbeats without reaching a final state.",
        trigger=EventTrigger(
            after={"prefect.flow-run.heartbeat"},
            expect={"prefect.flow-run.heartbeat", "prefect.flow-run.Completed", "prefect.flow-run.Failed",
                    "prefect.flow-run.Cancelled", "prefect.flow-run.Crashed"},
            match=ResourceSpecification({"prefect.resource.id": ["prefect.flow-run.*"]}),
            for_each={"prefect.resource.id"},
            posture=Posture.Proactive,
            threshold=1,
            within=timedelta(seconds=grace_seconds),
        ),
        actions=[ChangeFlowRunState(state=StateType.CRASHED,
                                    message=f"no heartbeat for {grace_seconds}s: the node running it died")],
    ).create()
    return str(automation.id)


def main() -> None:
    """Command line: ``--grace`` seconds without a heartbeat before a run is marked Crashed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--grace", type=int, default=120, help="seconds without heartbeat (default 120)")
    args = parser.parse_args()
    print(f"automation {NAME!r}: {create(args.grace)}")


if __name__ == "__main__":
    main()
