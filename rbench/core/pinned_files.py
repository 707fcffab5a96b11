"""Single files of a public repository pinned by commit and sha256, read from a mirror, rbench's cache or
their raw address, and never handed on unless their bytes match the digest."""

from __future__ import annotations

import hashlib
import os
import tempfile
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from rbench.core.errors import DataError

RAW = "https://raw.githubusercontent.com/{repository}/{commit}/"
"""A GitHub repository's raw address at a commit (``dataset_adapters/pinned.py`` pins whole sets of files by it)."""


@dataclass(frozen=True)
class PinnedFile:
    """``path`` of GitHub repository ``repository`` (``owner/name``) at ``commit``, whose bytes hash to ``sha256``."""

    repository: str
    commit: str
    path: str
    sha256: str

    @property
    def url(self) -> str:
        """The file's raw address at the commit."""
        return RAW.format(repository=self.repository, commit=self.commit) + self.path

    @property
    def mirror_path(self) -> str:
        """Where the file lies in a mirror folder: ``github/<owner>/<name>/<path>`` (a checkout of the repository
        at the commit there serves every pinned file of it)."""
        return f"github/{self.repository}/{self.path}"

    def __str__(self) -> str:
        return f"{self.path} of {self.repository}@{self.commit[:8]}"


def read_pinned(file: PinnedFile, mirror: Path | None = None, timeout: float = 60.0) -> bytes:
    """The bytes of ``file``, checked against its sha256: from ``mirror``, else rbench's cache
    (``$RBENCH_CACHE/pinned``), else its raw address, then kept in the cache. A DataError names the file,
    where it was looked for and the fix."""
    from rbench.core.settings import cache_dir

    cached = cache_dir() / "pinned" / file.sha256
    local = Path(mirror) / file.mirror_path if mirror else None
    for source in (local, cached):
        if source is not None and source.is_file():
            data = source.read_bytes()
            if hashlib.sha256(data).hexdigest() != file.sha256:
                raise DataError(f"{source} is not {file} (its sha256 is not {file.sha256}): put the file of that "
                                "commit there, or remove it")
            return data
    try:
        with urllib.request.urlopen(file.url, timeout=timeout) as response:
            data = response.read()
    except (OSError, ValueError) as e:
        where = f"not at {local}, " if local else "no mirror given (--mirror or RBENCH_MIRROR), "
        raise DataError(f"{file}: {where}not cached and not fetched from {file.url} ({e}): put a checkout of "
                        f"{file.repository} at that commit under <mirror>/github/{file.repository}") from None
    if hashlib.sha256(data).hexdigest() != file.sha256:
        raise DataError(f"{file.url} did not give the pinned {file} (its sha256 is not {file.sha256})")
    cached.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=cached.parent, prefix=f".{file.sha256}.")
    with os.fdopen(fd, "wb") as out:
        out.write(data)
    os.replace(tmp, cached)
    return data
