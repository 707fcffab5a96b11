"""Thin Prefect wrappers around stages: a cache policy on content keys, and a call helper.

Prefect's own policies are not used: INPUTS hashes a ``Path`` by name, and a cache
hit would hand back a path whose files may have been deleted. ``StageCachePolicy``
uses the stage's content key and, when the artifact behind an existing Prefect
record is missing or corrupt, returns a one-off key so that the task runs and
rebuilds it instead of reporting a stale hit.
"""

from __future__ import annotations

import hashlib
import time
import uuid
from dataclasses import dataclass
from typing import Any, Sequence

from prefect import get_run_logger, task
from prefect.cache_policies import CachePolicy

from tasks.cache import Artifact, Stage, Store, summarize


@dataclass
class StageCachePolicy(CachePolicy):
    """Cache key = the stage's content key and its store, valid only while the artifact verifies."""

    stage: Stage | None = None

    def compute_key(self, task_ctx, inputs, flow_parameters, **kwargs) -> str | None:
        if self.stage is None:
            return None
        store = Store(inputs["store"])
        content_key = self.stage.key(inputs["inputs"], inputs["config"])
        # Prefect's result storage may be shared by several stores: a record holds its store's path
        where = hashlib.sha256(str(store.root).encode()).hexdigest()[:8]
        key = f"{self.stage.name}-{content_key}-{where}"
        intact = store.load(self.stage.name, content_key) is not None
        if not intact and task_ctx.result_store.exists(key):
            return f"{key}-rebuild-{uuid.uuid4().hex}"
        return key


def stage_task(stage: Stage):
    """Wrap a stage in a Prefect task cached by its content key."""

    def run(store: str, inputs: Sequence[Artifact], config: Any, options: dict) -> Artifact:
        return stage.run(Store(store), inputs, config, **options)

    return task(
        run,
        name=stage.name,
        cache_policy=StageCachePolicy(stage=stage),
        persist_result=True,
    )


def call_stage(
    stage_tsk,
    store: str,
    inputs: Sequence[Artifact],
    config: Any,
    label: str,
    report: list[dict],
    **options: Any,
) -> Artifact:
    """Run a stage task, log whether it ran or was cached, and append that to ``report``."""
    started = time.perf_counter()
    named = stage_tsk.with_options(task_run_name=f"{stage_tsk.name}[{label}]")
    state = named(store, list(inputs), config, options, return_state=True)
    artifact: Artifact = state.result()
    status = "cached" if state.name == "Cached" else "ran"
    elapsed = time.perf_counter() - started
    report.append(
        {"stage": stage_tsk.name, "label": label, "key": artifact.key, "status": status,
         "seconds": round(elapsed, 2)}
    )
    get_run_logger().info(
        "%-9s %-28s %-6s %6.1fs  %s", stage_tsk.name, label, status, elapsed,
        summarize(artifact.info),
    )
    return artifact
