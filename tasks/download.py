"""Download stage: fetch each raw file (or copy it from a mirror) and verify its sha256."""

from __future__ import annotations

import logging
import shutil
import urllib.request
from pathlib import Path

from pydantic import BaseModel

from rbench.config import DatasetConfig
from rbench.errors import ChecksumError, DataError
from tasks.cache import Artifact, Stage, file_digest
from tasks.datasets import get_adapter
from tasks.datasets.base import FileSpec

log = logging.getLogger("rbench")


class DownloadConfig(BaseModel):
    """The files of one dataset; only names, digests and URLs enter the cache key."""

    files: list[FileSpec]

    @classmethod
    def of(cls, dataset: DatasetConfig) -> "DownloadConfig":
        """The raw files a configured dataset needs."""
        adapter = get_adapter(dataset.adapter)
        return cls(files=adapter.files(adapter.Params.model_validate(dataset.params)))


def _fetch(spec: FileSpec, target: Path, mirror: Path | None) -> str:
    if spec.local is not None:
        shutil.copyfile(spec.local, target)
        return str(spec.local)
    if mirror is not None and (mirror / spec.name).is_file():
        shutil.copyfile(mirror / spec.name, target)
        return str(mirror / spec.name)
    if spec.url is None:
        raise DataError(
            f"{spec.name} is not in the mirror {mirror} and has no download URL: "
            "put the file in the mirror folder"
        )
    where = f"not in the mirror {mirror}; " if mirror else ""
    try:
        with urllib.request.urlopen(spec.url, timeout=60) as response, open(target, "wb") as out:
            shutil.copyfileobj(response, out)
    except OSError as e:
        raise DataError(
            f"{spec.name}: {where}download from {spec.url} failed ({e}). Without network, pass "
            "--mirror DIR (or set RBENCH_MIRROR) to a folder that holds it"
        ) from None
    return spec.url


def build_download(folder: Path, inputs: list[Artifact], config: DownloadConfig, mirror: Path | None = None) -> dict:
    """Copy or fetch every file into ``folder`` and check its digest."""
    for spec in config.files:
        target = folder / spec.name
        target.parent.mkdir(parents=True, exist_ok=True)
        origin = _fetch(spec, target, Path(mirror) if mirror else None)
        actual = file_digest(target)
        if actual != spec.sha256:
            raise ChecksumError(
                f"checksum mismatch for {spec.name} from {origin}: expected sha256 {spec.sha256}, "
                f"got {actual}. The file is corrupt or a different version; fetch it again"
            )
        log.info("download %s from %s (%d bytes)", spec.name, origin, target.stat().st_size)
    return {"files": len(config.files), "bytes": sum((folder / s.name).stat().st_size for s in config.files)}


DOWNLOAD = Stage("download", 1, build_download)
