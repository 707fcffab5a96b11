"""Download stage: fetch each raw file (or copy it from a mirror) and verify its sha256, several
files at once, with progress in the log."""

from __future__ import annotations

import hashlib
import logging
import os
import re
import shutil
import tempfile
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from pydantic import BaseModel

from rbench.config import DatasetConfig
from rbench.core.errors import ChecksumError, DataError, MissingExtraError, Unreachable
from rbench.core.hashing import fast_fingerprint, file_digest
from rbench.core.locations import rbench_command
from rbench.core.store import Artifact, Stage
from rbench.dataset_adapters.base import FileSpec, ManifestFiles, expand, get_adapter, known_file

log = logging.getLogger("rbench")
COMMIT = re.compile(r"[0-9a-f]{40}")
PROGRESS_SECONDS = 10.0


class DownloadConfig(BaseModel):
    """The files of one dataset; only names, digests and URLs enter the cache key. Long pinned
    lists come by reference (``manifests``), so the stage's parameters stay small."""

    files: list[FileSpec]
    manifests: list[ManifestFiles] = []

    def all_files(self, listings: Path | None = None) -> list[FileSpec]:
        """Every file, the manifests' expanded (filtered by a ``listed_in`` file found under
        ``listings``: the download folder, or a mirror)."""
        return expand(list(self.manifests), listings) + list(self.files)

    @classmethod
    def of(cls, dataset: DatasetConfig, mirror: Path | None = None) -> "DownloadConfig":
        """The raw files a configured dataset needs, resolved against ``mirror``."""
        adapter = get_adapter(dataset.adapter)
        return cls.resolved(adapter.files(adapter.Params.model_validate(dataset.params)), mirror)

    @classmethod
    def resolved(cls, files: list[FileSpec | ManifestFiles], mirror: Path | None = None) -> "DownloadConfig":
        """Key unpinned files by what will be read: a mirror copy by its fingerprint, a
        Hugging Face branch or tag by the commit it points at now (when the hub answers)."""
        return cls(files=[_resolve(spec, Path(mirror) if mirror else None) for spec in files
                          if isinstance(spec, FileSpec)],
                   manifests=[spec for spec in files if isinstance(spec, ManifestFiles)])


def _resolve(spec: FileSpec, mirror: Path | None) -> FileSpec:
    if spec.sha256 is not None or spec.local is not None:
        return spec
    if spec.in_mirror(mirror) is not None:
        return spec.model_copy(update={"observed": tree_fingerprint(spec.in_mirror(mirror))})
    if spec.hf_repo and not COMMIT.fullmatch(spec.revision):
        commit = _hub_commit(spec.hf_repo, spec.revision)
        if commit is not None:
            return spec.model_copy(update={"revision": commit})
        log.warning("%s: could not resolve revision %r of %s; keyed by that name, so a new commit there "
                    "is not noticed: pin revision to a commit", spec.name, spec.revision, spec.hf_repo)
    return spec


def _hub_commit(repo: str, revision: str) -> str | None:
    try:
        from huggingface_hub import HfApi

        return HfApi().dataset_info(repo, revision=revision, timeout=20).sha
    except Exception:  # offline, unknown repo or revision: the download step names it
        return None


PROBE_SECONDS = 15.0
PROBE_SAMPLE = 20


def unreachable(config: DownloadConfig, mirror: Path | None) -> list[tuple[FileSpec, str]]:
    """Ask each source of a file that is neither the user's nor in ``mirror`` whether it holds
    the file now, several at once: ``(file, why not)`` for each one that does not answer or does
    not have it. A pinned list (a manifest's files, verified by digest when fetched) is asked
    for ``PROBE_SAMPLE`` files spread over it; a file without any source is named too."""
    def remote(spec: FileSpec) -> bool:
        return spec.local is None and spec.in_mirror(mirror) is None

    listed = [f for f in expand(list(config.manifests), mirror) if remote(f)]
    step = max(1, len(listed) // PROBE_SAMPLE)
    files = [f for f in config.files if remote(f)] + listed[::step][:PROBE_SAMPLE]
    if not files:
        return []
    with ThreadPoolExecutor(min(8, len(files)), thread_name_prefix="rbench-probe") as pool:
        answers = list(pool.map(probe, files))
    return [(spec, why) for spec, why in zip(files, answers) if why is not None]


def source_of(spec: FileSpec) -> str:
    """Where a file is downloaded from, as a user would look it up."""
    if spec.hf_repo:
        return f"hf://datasets/{spec.hf_repo}@{spec.revision}/{spec.hf_path or spec.name}"
    return spec.url or "(no source)"


def probe(spec: FileSpec, timeout: float = PROBE_SECONDS) -> str | None:
    """Why ``spec``'s download source does not give it now, or None when it does: a HEAD request
    for an address (a server that refuses HEAD counts as answering), the hub's file metadata
    for a Hugging Face file, the dataset's for a folder."""
    if spec.hf_repo:
        return _probe_hub(spec)
    if spec.url is None:
        return "it has no download source"
    request = urllib.request.Request(spec.url, method="HEAD", headers={"User-Agent": "rbench"})
    try:
        urllib.request.urlopen(request, timeout=timeout).close()
    except urllib.error.HTTPError as e:
        return None if e.code in (405, 501) else f"HTTP {e.code} {e.reason}"
    except (OSError, ValueError) as e:
        return f"unreachable ({getattr(e, 'reason', None) or e})"
    return None


def _probe_hub(spec: FileSpec) -> str | None:
    try:
        from huggingface_hub import HfApi, try_to_load_from_cache
    except ImportError:
        return "huggingface_hub is not installed (pip install 'rbench[hub]')"
    if not spec.patterns and isinstance(try_to_load_from_cache(spec.hf_repo, spec.hf_path or spec.name,
                                                               revision=spec.revision, repo_type="dataset"), str):
        return None  # in the hub's local cache: the download reads it there, with or without a network
    try:
        api = HfApi()
        if spec.patterns:
            api.dataset_info(spec.hf_repo, revision=spec.revision, timeout=PROBE_SECONDS)
        elif not api.file_exists(spec.hf_repo, spec.hf_path or spec.name, repo_type="dataset",
                                 revision=spec.revision):
            return "not in that repository at that revision"
    except Exception as e:  # offline, unknown repository, gated: named, not raised
        text = str(e).strip().splitlines()
        return f"the hub does not answer ({type(e).__name__}: {text[0] if text else ''})"
    return None


def tree_fingerprint(path: Path) -> str:
    """Fingerprint of a file or folder: relative names, sizes and each file's fast fingerprint."""
    h = hashlib.sha256()
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    for p in files:
        h.update(f"{p.relative_to(path).as_posix() if path.is_dir() else ''}\0{fast_fingerprint(p)}\n".encode())
    return h.hexdigest()


def _link_or_copy(source: str | Path, target: str | Path) -> None:
    """A hard link when source and store share a file system (no second copy of a 25 GB
    corpus: the store never writes into a published file), else a copy."""
    try:
        os.link(source, target)
    except OSError:
        shutil.copyfile(source, target)


def _copy(source: Path, target: Path, link: bool = False) -> None:
    """Copy a file or folder; with ``link``, hard-link its files where the file system allows."""
    if source.is_dir():
        shutil.copytree(source, target, copy_function=_link_or_copy if link else shutil.copy2)
    elif link:
        _link_or_copy(source, target)
    else:
        shutil.copyfile(source, target)


def _from_hub(spec: FileSpec, target: Path) -> None:
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        raise MissingExtraError("huggingface_hub", "hub", f"downloading {spec.name}") from None
    path = spec.hf_path or spec.name
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        snapshot_download(
            spec.hf_repo, repo_type="dataset", revision=spec.revision,
            allow_patterns=spec.patterns or [path], local_dir=tmp,
        )
        if not spec.patterns:
            (Path(tmp) / path).rename(target)
            return
        target.mkdir()
        for child in Path(tmp).iterdir():
            if child.name != ".cache":
                child.rename(target / child.name)


def _fetch(spec: FileSpec, target: Path, mirror: Path | None) -> str:
    if spec.local is not None:  # a user's own file is copied (an edit in place must not change an artifact)
        _copy(spec.local, target, spec.link)
        return str(spec.local)
    link = spec.sha256 is not None or spec.link  # a pinned file is checked after linking
    source = spec.in_mirror(mirror)
    if source is not None:
        if source.is_dir() != bool(spec.patterns):
            want, got = ("a folder", "a file") if spec.patterns else ("a file", "a folder")
            raise DataError(f"mirror entry {source} is {got}, but {spec.name} is {want}: "
                            f"put {want} there (the mirror keeps the source's layout)")
        _copy(source, target, link)
        return str(source)
    where = f"not in the mirror {mirror}; " if mirror else ""
    if spec.hf_repo is None and spec.url is None:
        raise DataError(f"{spec.name}: {where}it has no download source: put it in the mirror folder")
    source = f"hf://datasets/{spec.hf_repo}@{spec.revision}" if spec.hf_repo else spec.url
    try:
        if spec.hf_repo:
            _from_hub(spec, target)
        else:
            with urllib.request.urlopen(spec.url, timeout=60) as response, open(target, "wb") as out:
                shutil.copyfileobj(response, out)
    except (OSError, ValueError) as e:
        error = Unreachable if _transient(e) else DataError
        raise error(
            f"{spec.name}: {where}download from {source} failed ({e}). Without network, pass "
            "--mirror DIR (or set RBENCH_MIRROR) to a folder that holds it"
        ) from None
    return source


RETRY_DELAYS = (10.0, 60.0)
"""Seconds waited before each new try of a fetch that failed with a transient error
(:class:`~rbench.core.errors.Unreachable`): three tries in all, wherever the download runs
(the data phase before a flow, a chunking grid's flow); a bad or missing file is never tried again."""


def _fetch_retried(spec: FileSpec, target: Path, mirror: Path | None) -> str:
    """:func:`_fetch`, tried again after each of :data:`RETRY_DELAYS` while its source is unreachable."""
    for delay in RETRY_DELAYS:
        try:
            return _fetch(spec, target, mirror)
        except Unreachable as e:
            log.warning("%s: trying again in %.0f s", e, delay)
            time.sleep(delay)
    return _fetch(spec, target, mirror)


RETRY_STATUS = {408, 429, 500, 502, 503, 504}


def _transient(error: BaseException) -> bool:
    """Whether a failed fetch may succeed later: a timeout, a dropped or refused connection, or an HTTP
    status that says so (408, 429, 5xx); not a missing file (404) or a refused access (401, 403)."""
    if isinstance(error, urllib.error.HTTPError):
        return error.code in RETRY_STATUS
    status = getattr(getattr(error, "response", None), "status_code", None)  # the hub client's errors
    if status is not None:
        return status in RETRY_STATUS
    return isinstance(error, (urllib.error.URLError, TimeoutError, ConnectionError))


def _fetch_verified(spec: FileSpec, folder: Path, mirror: Path | None) -> tuple[int, bool]:
    """Fetch one file into ``folder`` and check its pinned digest: ``(bytes, pinned)``."""
    target = folder / spec.name
    target.parent.mkdir(parents=True, exist_ok=True)
    origin = _fetch_retried(spec, target, mirror)
    if spec.sha256 is not None:
        actual = file_digest(target)
        if actual != spec.sha256:
            other = known_file(actual)
            why = (f"That is the pinned file {other}, not {spec.name}: put it under its own name in the "
                   f"mirror, and choose the dataset split that reads it (see `{rbench_command()} list datasets`)"
                   if other else "The file is corrupt or a different version; fetch it again")
            raise ChecksumError(f"checksum mismatch for {spec.name} from {origin}: expected sha256 "
                                f"{spec.sha256}, got {actual}. {why}")
    size = sum(p.stat().st_size for p in target.rglob("*") if p.is_file()) if target.is_dir() else target.stat().st_size
    log.debug("download %s from %s (%d bytes)", spec.name, origin, size)
    return size, spec.sha256 is not None


def build_download(folder: Path, inputs: list[Artifact], config: DownloadConfig, mirror: Path | None = None) -> dict:
    """Copy or fetch every file into ``folder`` and check pinned digests, several at once (the
    work is reading, hashing and waiting on the network); progress is logged every
    ``PROGRESS_SECONDS``."""
    mirror = Path(mirror) if mirror else None
    listings = [s for s in config.files if any(m.listed_in == s.name for m in config.manifests)]
    total, unpinned, done = 0, 0, 0
    for spec in listings:  # first: a manifest's listed_in file filters its list
        size, pinned = _fetch_verified(spec, folder, mirror)
        total, unpinned, done = total + size, unpinned + (not pinned), done + 1
    files = [f for f in config.all_files(folder) if f not in listings]
    last = started = time.monotonic()
    workers = min(8, 2 * (os.cpu_count() or 1), max(1, len(files)))
    with ThreadPoolExecutor(workers, thread_name_prefix="rbench-download") as pool:
        try:
            for size, pinned in pool.map(lambda spec: _fetch_verified(spec, folder, mirror), files):
                total, unpinned, done = total + size, unpinned + (not pinned), done + 1
                if time.monotonic() - last >= PROGRESS_SECONDS and done < len(files) + len(listings):
                    last = time.monotonic()
                    count = len(files) + len(listings)
                    log.info("download: %d of %d files fetched and verified (%.0f%%, %.1f MB, %.0f s)", done,
                             count, 100 * done / count, total / 1e6, last - started)
        except BaseException:
            pool.shutdown(wait=True, cancel_futures=True)
            raise
    if unpinned:
        log.warning("%d file(s) have no pinned sha256 and were not verified", unpinned)
    return {"files": len(files) + len(listings), "bytes": total, "unverified": unpinned}


DOWNLOAD = Stage("download", 2, build_download)
