"""Existing indexes as a retriever's input (a Lucene or FAISS index built elsewhere, or one
Pyserini downloads by name): the index stage writes only a pointer to it, keyed by the
index's fingerprint, so a large index is never rebuilt or copied per experiment. Loading
checks that the index is still the one the pointer was keyed by."""

from __future__ import annotations

import json
from pathlib import Path

from rbench.core.errors import DataError
from rbench.core.store import folder_fingerprint

POINTER = "prebuilt.json"


def index_folder(value: str, what: str, files: tuple[str, ...]) -> Path:
    """``value`` as an existing folder holding one of ``files`` (a name ending in ``*`` is a
    prefix); a ValueError that names what is missing otherwise."""
    folder = Path(value).expanduser()
    if not folder.is_dir():
        raise ValueError(f"prebuilt {what} {value!r} is not a folder")
    names = [p.name for p in folder.iterdir()]
    if not any(n == f or (f.endswith("*") and n.startswith(f[:-1])) for f in files for n in names):
        raise ValueError(f"prebuilt {what} {value!r} has none of {list(files)}: give the folder the index was "
                         "written to")
    return folder.resolve()


def fingerprint(folder: Path) -> str:
    """The identity of an index folder: its files' names, sizes and edges (O(1) per file)."""
    return f"folder:{folder_fingerprint(folder)}"


def write_pointer(folder: Path, location: str, identity: str, **info) -> dict:
    """Record, in the index stage's ``folder``, which existing index it stands for."""
    record = {"location": location, "identity": identity, **info}
    (folder / POINTER).write_text(json.dumps(record, indent=1))
    return record


def read_pointer(folder: Path) -> dict | None:
    """The pointer in an index stage's ``folder`` (None: the index was built there); a folder
    index that changed since it was keyed is a DataError."""
    path = folder / POINTER
    if not path.exists():
        return None
    record = json.loads(path.read_text())
    location = Path(record["location"])
    if record["identity"].startswith("folder:"):
        if not location.is_dir() or fingerprint(location) != record["identity"]:
            raise DataError(f"the prebuilt index {location} changed (or is gone) since this experiment keyed it: "
                            "run the experiment again, and it is keyed by the index as it is now")
    return record
