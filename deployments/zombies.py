"""Create (or replace) the Prefect automation that marks rbench flow runs whose node died as Crashed.

It watches only flow runs tagged ``rbench-heartbeat``: the deployments in ``prefect.yaml`` carry
that tag and set ``PREFECT_FLOWS_HEARTBEAT_FREQUENCY`` in their work pool's environment, so
every watched run sends a heartbeat at least that often. Other flows on the server, and
``rbench run`` from a shell (tagged ``rbench`` only), are never touched. When a watched run
sends neither another heartbeat nor a final state within ``--grace`` seconds, it is set to
Crashed, so that the UI's Retry (or a new run) picks the experiment up again; cached stages
are reused. A run that already reached a final state is never changed (Prefect refuses the
transition from a terminal state).

    PREFECT_API_URL=http://prefect-server:4200/api python deployments/zombies.py --grace 120
"""

from __future__ import annotations

import argparse
from datetime import timedelta
from pathlib import Path

import yaml

NAME = "rbench: crash flow runs whose node died"
TAG = "rbench-heartbeat"
PREFECT_YAML = Path(__file__).with_name("prefect.yaml")


def heartbeat_seconds(prefect_yaml: Path = PREFECT_YAML) -> int:
    """The heartbeat frequency the deployments' work pool sets (``PREFECT_FLOWS_HEARTBEAT_FREQUENCY``)."""
    spec = yaml.safe_load(prefect_yaml.read_text(encoding="utf-8"))
    env = spec["definitions"]["work_pools"]["gpu"]["job_variables"]["env"]
    return int(env["PREFECT_FLOWS_HEARTBEAT_FREQUENCY"])


def create(grace_seconds: int) -> str:
    """Create the automation on the server in ``PREFECT_API_URL``; return its id. ``grace_seconds``
    must be at least twice the deployments' heartbeat frequency, so that one late heartbeat
    never crashes a healthy run."""
    from prefect.automations import Automation
    from prefect.client.schemas.objects import StateType
    from prefect.events.actions import ChangeFlowRunState
    from prefect.events.schemas.automations import EventTrigger, Posture
    from prefect.events.schemas.events import ResourceSpecification

    beat = heartbeat_seconds()
    if grace_seconds < 2 * beat:
        raise SystemExit(f"--grace {grace_seconds} is too short: the deployments send a heartbeat every {beat}s "
                         f"(PREFECT_FLOWS_HEARTBEAT_FREQUENCY in {PREFECT_YAML.name}); use --grace {2 * beat} or more")
    try:
        Automation.read(name=NAME).delete()
    except ValueError:  # none yet
        pass
    automation = Automation(
        name=NAME,
        description=f"A flow run tagged {TAG} stopped sending heartbeats without reaching a final state.",
        trigger=EventTrigger(
            after={"prefect.flow-run.heartbeat"},
            expect={"prefect.flow-run.heartbeat", "prefect.flow-run.Completed", "prefect.flow-run.Failed",
                    "prefect.flow-run.Cancelled", "prefect.flow-run.Crashed"},
            match=ResourceSpecification({"prefect.resource.id": ["prefect.flow-run.*"]}),
            match_related=ResourceSpecification({"prefect.resource.role": "tag",
                                                 "prefect.resource.id": f"prefect.tag.{TAG}"}),
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
