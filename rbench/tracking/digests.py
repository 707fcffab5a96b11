"""The full digest of every file rbench logs to a child run, and the check of each copy read back.

MLflow's artifact store keeps what it is given and hands it out unchecked: a copy damaged there (a
flipped bit on the artifact server's disk, a partial upload) gave ``rbench show --measures`` other
numbers than the run's own table (issue 81, item 1). The logging records each file's sha256 in its
run's ``rbench.artifact_sha256`` tag (a JSON object by artifact path): a child's files when it is
logged, a parent's as each command adds one (a chunking grid's tables, each ``compare``'s document,
:func:`record`). Every read of an artifact goes through :func:`downloaded`, which refuses a copy
that differs. A run logged before the tag existed is read as it is.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping

from rbench.core.errors import DamagedArtifact
from rbench.core.hashing import file_digest

ARTIFACT_DIGESTS = "rbench.artifact_sha256"
RERUN = ("Rerun the experiment's config: its stages are cached and checked, and the new run logs clean "
         "copies")


def digests_tag(files: Mapping[str, Path]) -> str:
    """The tag value for the files logged to one run, by artifact name."""
    return json.dumps({name: file_digest(path) for name, path in sorted(files.items())}, separators=(",", ":"))


def record(client: Any, run_id: str, files: Mapping[str, Path]) -> None:
    """Add ``files``' digests (by artifact path) to run ``run_id``'s tag, keeping those it holds."""
    known = json.loads(client.get_run(run_id).data.tags.get(ARTIFACT_DIGESTS, "{}"))
    known.update({name: file_digest(path) for name, path in files.items()})
    client.set_tag(run_id, ARTIFACT_DIGESTS, json.dumps(dict(sorted(known.items())), separators=(",", ":")))


def downloaded(client: Any, run: Any, name: str, folder: str, repair: str = RERUN) -> Path:
    """Run ``run``'s artifact ``name`` downloaded into ``folder``, checked in full against the digest
    its logging recorded; a copy MLflow's store changed raises :class:`DamagedArtifact`, which says
    ``repair``."""
    path = Path(client.download_artifacts(run.info.run_id, name, folder))
    expected = json.loads(run.data.tags.get(ARTIFACT_DIGESTS, "{}")).get(name)
    if expected is not None:
        actual = file_digest(path)
        if actual != expected:
            tags = run.data.tags
            what = (f"{tags['rbench.dataset']}/{tags.get('rbench.retriever', '?')}" if "rbench.dataset" in tags
                    else run.info.run_name)
            raise DamagedArtifact(
                f"MLflow's copy of {name} in run {run.info.run_id} ({what}) is not the file rbench logged "
                f"(sha256 {actual[:12]}..., logged {expected[:12]}...): the artifact store changed it, and its "
                f"numbers would be wrong. {repair}")
    return path
