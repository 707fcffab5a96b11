"""The deployments' pull step: Prefect's ``git_clone``, with a failure that says which repository,
which commit and what git answered in the flow run's own state (not only in the worker's log),
and the clone recorded so that a config missing from it is reported as such."""

from __future__ import annotations

import os
import subprocess
from typing import Any, cast

from rbench.core import settings
from rbench.core.errors import RbenchError
from rbench.core.secrets import redact


def git_clone(repository: str, commit_sha: str | None = None, branch: str | None = None,
              **options: Any) -> dict[str, str]:
    """Clone ``repository`` at ``commit_sha`` (or ``branch``) into the working directory, as
    ``prefect.deployments.steps.git_clone`` does with the same arguments; return its result.
    On failure the current flow run is set Failed with the repository (credentials hidden),
    the commit and git's last error line, and RbenchError is raised."""
    from prefect.deployments.steps.pull import git_clone as prefect_git_clone

    try:
        result = cast("dict[str, str]", prefect_git_clone(  # called outside an event loop: the dict, not a coroutine
            repository=repository, commit_sha=commit_sha, branch=branch, **options))
    except (subprocess.CalledProcessError, RuntimeError, ValueError, OSError) as e:
        message = (f"could not clone {redact(repository)} at {what_was_cloned(commit_sha, branch)}: "
                   f"{_git_error(e)}. Push that commit to the repository the workers clone (or deploy a "
                   "pushed one); a private repository needs credentials (deployments/README.md, private "
                   "repositories); an uncommitted config runs through the deployment's experiment parameter")
        _fail_flow_run(message)
        raise RbenchError(message) from None
    settings.write(settings.CLONE, f"{redact(repository)} at {what_was_cloned(commit_sha, branch)}")
    return result


def what_was_cloned(commit_sha: str | None, branch: str | None) -> str:
    """``commit <sha>``, ``branch <name>`` or the default branch: how a clone is named in messages."""
    return f"commit {commit_sha}" if commit_sha else f"branch {branch}" if branch else "its default branch"


def _git_error(error: Exception) -> str:
    stderr = getattr(error, "stderr", None)
    if isinstance(stderr, bytes):
        stderr = stderr.decode("utf-8", "replace")
    lines = [line.strip() for line in (stderr or "").splitlines() if line.strip()]
    return redact(lines[-1] if lines else str(error)).rstrip(".")


def _fail_flow_run(message: str) -> None:
    """Set the flow run this process executes (``PREFECT__FLOW_RUN_ID``) to Failed with ``message``:
    the worker only reports "Process exited with status code: 1"."""
    flow_run_id = os.environ.get("PREFECT__FLOW_RUN_ID")
    if not flow_run_id:
        return
    from prefect import get_client
    from prefect.states import Failed

    with get_client(sync_client=True) as client:
        client.set_flow_run_state(flow_run_id, Failed(message=message), force=True)
