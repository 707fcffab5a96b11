"""Upstream repositories whose files are fetched by raw address, pinned by commit.

``pins/<name>.json`` holds the repository, the commit and each file's path with its sha256:
``null`` until recorded, which fetches every file at the commit (``python -m
rbench.dataset_adapters.pinned <name>``, with a network). A recorded digest is checked by the
download stage; an address at a commit never changes, so a run is keyed by it either way.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import sys
import tempfile
import urllib.request
from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from rbench.core.errors import DataError
from rbench.core.pinned_files import RAW
from rbench.dataset_adapters.base import FileSpec

PINS = Path(__file__).parent / "pins"


class Pin(BaseModel):
    """One pinned repository: ``files`` maps each path in it to its sha256 (None: not recorded)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    repository: str = Field(pattern=r"^[\w.-]+/[\w.-]+$")
    commit: str = Field(pattern=r"^[0-9a-f]{40}$")
    source: str = ""
    files: dict[str, Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")] | None]

    def base(self) -> str:
        """The raw address of the repository at the commit, ending in ``/``."""
        return RAW.format(repository=self.repository, commit=self.commit)

    def url(self, path: str) -> str:
        """The raw address of ``path`` at the commit; a DataError for a path the pin does not list."""
        if path not in self.files:
            raise DataError(f"{path} is not among the pinned files of {self.repository}@{self.commit[:8]} "
                            f"(dataset_adapters/pins): give the file yourself, or pin it")
        return self.base() + path

    def spec(self, name: str, path: str) -> FileSpec:
        """The download of ``path`` under ``name``, with its digest where recorded."""
        return FileSpec(name=name, url=self.url(path), sha256=self.files[path])


@functools.cache
def pin(name: str) -> Pin:
    """The pin ``pins/<name>.json``."""
    path = PINS / f"{name}.json"
    try:
        return Pin.model_validate_json(path.read_text())
    except (OSError, ValidationError) as e:
        raise DataError(f"pin {path} is unreadable or malformed ({e})") from None


def record_digests(path: Path, base: str | None = None, timeout: float = 60.0) -> int:
    """Fetch every file of the pin file ``path`` whose digest is not recorded (from ``base``, by
    default the raw address at the commit), record its sha256 and rewrite the file atomically;
    returns how many were recorded. A file that cannot be fetched is a DataError naming it, raised
    after the digests recorded before it are written."""
    try:
        data = json.loads(path.read_text())
        pinned = Pin.model_validate(data)
    except (OSError, ValueError) as e:  # ValidationError is a ValueError
        known = sorted(p.stem for p in PINS.glob("*.json"))
        raise DataError(f"pin {path} is unreadable or malformed ({e}); the pins are {known}") from None
    base = base or pinned.base()
    recorded, failure = 0, None
    for name, digest in data["files"].items():
        if digest is not None:
            continue
        h = hashlib.sha256()
        try:
            with urllib.request.urlopen(base + name, timeout=timeout) as response:
                for block in iter(lambda: response.read(1 << 20), b""):
                    h.update(block)
        except (OSError, ValueError) as e:
            failure = DataError(f"{name} of {pinned.repository}@{pinned.commit[:8]} cannot be fetched from "
                                f"{base + name} ({e}): is the path right at that commit? ({recorded} digest(s) "
                                "recorded before it are kept)")
            break
        data["files"][name] = h.hexdigest()
        recorded += 1
    if recorded:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
        with os.fdopen(fd, "w") as out:
            out.write(json.dumps(data, indent=1) + "\n")
        os.replace(tmp, path)
        pin.cache_clear()
    if failure is not None:
        raise failure
    return recorded


def main(argv: list[str] | None = None) -> int:
    """``python -m rbench.dataset_adapters.pinned NAME...``: record the missing digests of each pin."""
    names = (sys.argv[1:] if argv is None else argv) or sorted(p.stem for p in PINS.glob("*.json"))
    for name in names:
        try:
            count = record_digests(PINS / f"{name}.json")
        except DataError as e:
            print(f"rbench: {e}", file=sys.stderr)
            return 2
        print(f"{name}: {count} digest(s) recorded")
    return 0


if __name__ == "__main__":
    sys.exit(main())
