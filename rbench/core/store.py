"""The content-hash keyed artifact store (the Prefect glue lives in ``rbench.orchestration.runner``).

Every stage output is a folder ``<store>/<stage>/<key>``. The key hashes the stage
name and version, the digest of its code (:mod:`rbench.core.identity`), the part of its
configuration that shapes the output, and the content digests (or keys) of its inputs, so a change upstream changes exactly the
keys that read what changed. A folder is
built under a temporary name and renamed into place once complete; its
``_manifest.json`` (written last) lists each file with size, sha256 and a fast
fingerprint, and the content digest of every input it was built from (each input is
re-hashed in full before a build reads it). A hit is trusted only when every file still
matches and every input still holds the content it was built from. Building a
key takes its lease (``rbench/core/lease.py``), so many workers can share one store.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import shutil
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from rbench.core.errors import DamagedArtifact, DiskFull, is_disk_full
from rbench.core.hashing import canonical_json, fast_fingerprint, file_digest
from rbench.core.identity import code_digest
from rbench.core.lease import Lease, LeaseCheck, LeaseLost
from rbench.core.stopping import stopping

MANIFEST = "_manifest.json"
LOCKS = ".locks"
PARTIAL = ".partial-"
TMP = ".tmp-"
TRASH = ".trash-"
log = logging.getLogger("rbench")


def stage_key(stage: str, version: int, config: Any, input_keys: Sequence[str], code: str = "") -> str:
    """Hash a stage's identity, version, code digest, resolved config and input keys into its store key."""
    payload = canonical_json(
        {"stage": stage, "version": version, "code": code, "config": config, "inputs": list(input_keys)}
    )
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:32]


def content_of(files: Mapping[str, Mapping[str, Any]]) -> str:
    """An artifact's content digest: sha256 over its manifest's file names and sha256s (what a
    dependent records of each input it read)."""
    return hashlib.sha256(canonical_json({n: m["sha256"] for n, m in files.items()}).encode()).hexdigest()[:32]


@dataclass(frozen=True)
class Finding:
    """What :meth:`Store.verify` found wrong with an artifact: ``why`` is ``damaged`` (a file does
    not match the manifest, or the manifest is gone), ``stale`` (an input now holds other content
    than it was built from) or ``built-from`` (an input, directly or further up, is damaged or
    stale); ``detail`` says which file or input."""

    stage: str
    key: str
    why: str
    detail: str = ""


@dataclass(frozen=True)
class Artifact:
    """A completed stage output: its stage, key, folder and the summary its builder returned.

    ``built`` is true when this process built it, false when it was found in the store.
    The folder is only valid on the node that made the object: :meth:`Store.attach`
    re-addresses an artifact that came from elsewhere (a Prefect record, another worker).
    """

    stage: str
    key: str
    path: Path
    info: dict = field(default_factory=dict, compare=False)
    built: bool = field(default=False, compare=False)

    def file(self, name: str) -> Path:
        """Path of a file inside the artifact folder."""
        return self.path / name

    def digest(self, part: str | None = None) -> str:
        """What a consumer's key should follow: the content digest of ``part`` (for example
        the prepared ``corpus``) when the builder recorded one in ``info["digests"]``, else the key."""
        if part is not None:
            recorded = (self.info.get("digests") or {}).get(part)
            if recorded:
                return recorded
        return self.key


class Checkpoint:
    """Finished items of a build in progress, kept across kills until the artifact is published.

    Each item is written atomically beside a record of its size and sha256
    (``.<name>.item``); an item is reused only while it matches its record, so a truncated
    or overwritten item is redone (counted in :attr:`redone`), never trusted. Only the
    holder of the key's lease writes here: with ``lease`` given, every write first checks
    it, so a builder whose lease was broken stops with :class:`LeaseLost` instead of
    writing into a folder that its successor owns (or has already removed).
    """

    def __init__(self, folder: Path, lease: LeaseCheck | None = None):
        self.folder = folder
        self.lease = lease
        self.redone = 0

    def path(self, name: str) -> Path:
        """Where item ``name`` lives (it may not exist yet)."""
        return self.folder / name

    def _record(self, name: str) -> Path:
        return self.folder / f".{name}.item"

    def items(self) -> list[str]:
        """Names of the items present (whole or damaged)."""
        if not self.folder.is_dir():
            return []
        return sorted(p.name for p in self.folder.iterdir() if p.is_file() and not p.name.startswith("."))

    def intact(self, name: str) -> bool:
        """Whether item ``name`` matches the size and sha256 recorded when it was written."""
        try:
            record = json.loads(self._record(name).read_text())
            path = self.path(name)
            return path.stat().st_size == record["size"] and file_digest(path) == record["sha256"]
        except (OSError, ValueError, KeyError, TypeError):
            return False

    def done(self, name: str) -> bool:
        """Whether item ``name`` was finished, whole, by this or an earlier (killed) build; a
        damaged one is removed, logged and counted, and the caller redoes it."""
        if not self.path(name).is_file():
            return False
        if self.intact(name):
            return True
        log.warning("checkpoint item %s does not match its record: it is redone", self.path(name))
        self.discard(name)
        self.redone += 1
        return False

    def discard(self, name: str) -> None:
        """Remove item ``name`` and its record."""
        self.path(name).unlink(missing_ok=True)
        self._record(name).unlink(missing_ok=True)

    def write_parquet(self, name: str, table) -> None:
        """Save a pyarrow table as item ``name``."""
        import pyarrow.parquet as pq

        self._write(name, lambda tmp: pq.write_table(table, tmp))

    def write_array(self, name: str, array) -> None:
        """Save a numpy array as item ``name`` (``.npy`` format)."""
        import numpy as np

        def save(tmp: Path) -> None:
            with open(tmp, "wb") as f:
                np.save(f, array)

        self._write(name, save)

    def read_parquet(self, name: str):
        """Load item ``name`` as a pyarrow table."""
        import pyarrow.parquet as pq

        return pq.read_table(self.path(name))

    def read_array(self, name: str):
        """Load item ``name`` as a numpy array."""
        import numpy as np

        return np.load(self.path(name))

    def _write(self, name: str, writer: Callable[[Path], None]) -> None:
        self._check()
        self.folder.mkdir(parents=True, exist_ok=True)
        tmp = self.folder / f".{name}.{uuid.uuid4().hex[:8]}"
        try:
            writer(tmp)
            record = {"size": tmp.stat().st_size, "sha256": file_digest(tmp)}
            self._check()
            _write_text_atomic(self._record(name), canonical_json(record))
            tmp.replace(self.path(name))
        finally:
            tmp.unlink(missing_ok=True)

    def _check(self) -> None:
        if self.lease is not None:
            self.lease.check()


def _bytes_under(folder: Path) -> int:
    """The bytes of the files under ``folder`` (0 where it cannot be read)."""
    try:
        return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
    except OSError:
        return 0


class Store:
    """A folder of artifacts addressed by (stage, key), written atomically and verified on read.

    Safe for many processes on many nodes: building a key takes its lease (the second
    builder waits, then reuses the first one's artifact), a healthy artifact is never
    replaced, and temporary folders are only removed by the key's lease holder.
    """

    def __init__(self, root: Path | str):
        self.root = Path(root).expanduser().resolve()
        self._verified: set[tuple[str, str]] = set()

    def folder(self, stage: str, key: str) -> Path:
        """Final folder of an artifact (which may not exist yet)."""
        return self.root / stage / key

    def attach(self, artifact: Artifact) -> Artifact:
        """The same artifact addressed inside this store (paths are never trusted across nodes)."""
        return Artifact(artifact.stage, artifact.key, self.folder(artifact.stage, artifact.key),
                        artifact.info, artifact.built)

    def lease(self, stage: str, key: str) -> Lease:
        """The build lease of (stage, key)."""
        return Lease(self.root / stage / LOCKS / key)

    def checkpoint(self, stage: str, key: str, lease: Lease | None = None) -> Checkpoint:
        """Resumable items of the build of (stage, key), written only while ``lease`` holds (when
        given); removed once the artifact is published."""
        return Checkpoint(self.root / stage / f"{PARTIAL}{key}", lease)

    def load(self, stage: str, key: str, full: bool = False) -> Artifact | None:
        """Return the artifact if present, intact and fresh, else None.

        By default each file's size and fast fingerprint are checked (O(number of files));
        ``full`` re-hashes every byte against the manifest's sha256. Fresh: each input recorded in
        the manifest still holds the content it was built from (its manifest is read, not its files).
        A lease its builder left behind on a complete artifact (a kill after publishing) is broken.
        """
        folder = self.folder(stage, key)
        manifest, _ = self._examine(folder, full)
        if manifest is None:
            return None
        stale = self._stale_input(manifest)
        if stale is not None:
            log.info("%s/%s is stale: %s", stage, key, stale)
            return None
        lease = self.lease(stage, key)
        if lease.path.exists():
            lease.break_if_abandoned()
        return Artifact(stage, key, folder, manifest.get("info", {}))

    @staticmethod
    def _examine(folder: Path, full: bool) -> tuple[dict | None, str | None]:
        """``(manifest, None)`` when every file of ``folder`` matches its manifest, else ``(None, what does not)``."""
        try:
            manifest = json.loads((folder / MANIFEST).read_text())
            files = manifest["files"]
            present = {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()} - {MANIFEST}
            if present != set(files):
                extra, gone = sorted(present - set(files)), sorted(set(files) - present)
                return None, f"files {'added: ' + ', '.join(extra) if extra else 'missing: ' + ', '.join(gone)}"
            for name, meta in files.items():
                path = folder / name
                if path.stat().st_size != meta["size"]:
                    return None, f"{name}: size {path.stat().st_size}, manifest {meta['size']}"
                if full or "fast" not in meta:
                    if file_digest(path) != meta["sha256"]:
                        return None, f"{name}: its bytes differ from the manifest's sha256"
                elif fast_fingerprint(path) != meta["fast"]:
                    return None, f"{name}: its bytes differ from the manifest's fingerprint"
        except FileNotFoundError as e:
            return None, f"{Path(e.filename).name if e.filename else MANIFEST} is gone"
        except (OSError, ValueError, KeyError, TypeError) as e:
            return None, f"unreadable manifest or file ({type(e).__name__}: {e})"
        return manifest, None

    def _content(self, stage: str, key: str) -> str | None:
        """The content digest an artifact's manifest records, or None when it has none."""
        try:
            return content_of(json.loads((self.folder(stage, key) / MANIFEST).read_text())["files"])
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def _stale_input(self, manifest: Mapping[str, Any]) -> str | None:
        """Which input of a manifest no longer holds the content it was built from, or None."""
        for recorded in manifest.get("inputs") or ():
            now = self._content(recorded["stage"], recorded["key"])
            if now != recorded["content"]:
                what = "is gone" if now is None else "was rebuilt with other content"
                return f"its input {recorded['stage']}/{recorded['key']} {what}"
        return None

    def read_inputs(self, inputs: Sequence[Artifact]) -> list[dict]:
        """Check every byte of each input against its manifest before a build reads it, and return
        what the new manifest records of each (stage, key, content digest). A damaged input raises
        :class:`DamagedArtifact`, naming it and the repair: its numbers must never become a result.
        An input folder outside the store (a hand-made one; a flow's are all attached to the store)
        has no manifest: nothing is checked or recorded of it."""
        recorded, seen = [], set()
        for artifact in inputs:
            if (artifact.stage, artifact.key) in seen:
                continue
            seen.add((artifact.stage, artifact.key))
            manifest = self._whole(artifact, "built from")
            if manifest is not None:
                recorded.append({"stage": artifact.stage, "key": artifact.key,
                                 "content": content_of(manifest["files"])})
        return recorded

    def verified(self, artifact: Artifact) -> Artifact:
        """``artifact``, once every byte of it matches its manifest (checked once per store object and
        artifact): whatever hands a stored file on, to MLflow, a user or the Python API, reads it through
        this, as a build reads its inputs (:meth:`read_inputs`). A cache hit's check reads a file's size
        and ends only, so damage in the middle of a file is found here, as :class:`DamagedArtifact`."""
        if (artifact.stage, artifact.key) not in self._verified:
            self._whole(artifact, "handed on from")
            self._verified.add((artifact.stage, artifact.key))
        return artifact

    def _whole(self, artifact: Artifact, doing: str) -> dict | None:
        """``artifact``'s manifest once every byte matches it; None for a folder outside the store (a
        hand-made one: no manifest); damage raises :class:`DamagedArtifact` with the repair."""
        folder = artifact.path
        if not folder.resolve().is_relative_to(self.root):
            return None
        manifest, damage = self._examine(folder, full=True)
        if manifest is None:
            raise DamagedArtifact(
                f"the stored {artifact.stage} artifact {folder} is damaged ({damage}): nothing is {doing} it. "
                f"Run `rbench verify --remove --store {self.root}` (it removes it and everything built from "
                "it), then run again to rebuild them")
        return manifest

    def build(
        self, stage: str, key: str, builder: Callable[[Path, Checkpoint], dict | None],
        inputs: Sequence[Artifact] = (),
    ) -> tuple[Artifact, bool]:
        """Return ``(artifact, built)``: the verified cached artifact, or a freshly built one.

        ``builder(folder, checkpoint)`` writes into an empty temporary folder and returns a
        JSON-able summary (counts, timings) stored in the manifest; ``checkpoint`` keeps
        finished items across a killed build. Builders of one key run one at a time. ``inputs``
        (the artifacts the builder reads) are checked in full first (:meth:`read_inputs`) and
        recorded, so that the artifact goes stale when one of them is rebuilt with other content.
        """
        cached = self.load(stage, key)
        if cached is not None:
            return cached, False
        try:
            with self.lease(stage, key) as lease:
                cached = self.load(stage, key)
                if cached is not None:
                    return cached, False
                read = self.read_inputs(inputs)
                final = self.folder(stage, key)
                self._remove_temporaries(final.parent, key)
                tmp = final.parent / f"{TMP}{key}-{uuid.uuid4().hex[:8]}"
                tmp.mkdir()
                checkpoint = self.checkpoint(stage, key, lease)
                try:
                    started = time.perf_counter()
                    info = dict(builder(tmp, checkpoint) or {})
                    info["build_seconds"] = round(time.perf_counter() - started, 3)
                    files = {
                        p.relative_to(tmp).as_posix(): {
                            "size": p.stat().st_size, "sha256": file_digest(p), "fast": fast_fingerprint(p)}
                        for p in sorted(tmp.rglob("*"))
                        if p.is_file()
                    }
                    manifest = {"stage": stage, "key": key, "files": files, "info": info, "inputs": read}
                    _write_text_atomic(tmp / MANIFEST, canonical_json(manifest))
                    lease.check()
                    if final.exists():
                        log.warning("replacing incomplete, corrupt or stale artifact %s", final)
                        trash = final.parent / f"{TRASH}{key}-{uuid.uuid4().hex[:8]}"
                        final.rename(trash)
                        shutil.rmtree(trash, ignore_errors=True)
                    tmp.rename(final)
                except BaseException as e:
                    written = _bytes_under(tmp) if is_disk_full(e) else None
                    shutil.rmtree(tmp, ignore_errors=True)
                    if not isinstance(e, LeaseLost) and not stopping() and lease.holder() != lease.token:  # taken away
                        raise LeaseLost(f"lease {lease.path} was taken over by {lease.holder()} during the build "
                                        f"({type(e).__name__}: {e}): this build is abandoned") from e
                    if written is not None:
                        raise DiskFull.of(self.root, e, f"building {stage} {key}", written) from None
                    raise
                shutil.rmtree(checkpoint.folder, ignore_errors=True)
        except OSError as e:  # the lease's own file, the folders: a full disk before the build wrote anything
            if not is_disk_full(e):
                raise
            raise DiskFull.of(self.root, e, f"building {stage} {key}") from None
        return Artifact(stage, key, final, info, built=True), True

    @staticmethod
    def _remove_temporaries(stage_folder: Path, key: str) -> int:
        removed = 0
        for prefix in (TMP, TRASH):
            for tmp in stage_folder.glob(f"{prefix}{key}-*"):
                shutil.rmtree(tmp, ignore_errors=True)
                removed += 1
        return removed

    def artifacts(self) -> list[tuple[str, str]]:
        """``(stage, key)`` of every artifact folder in the store, published or damaged: every
        folder of a stage folder (one holding a ``.locks`` folder or a manifest) that is not
        temporary, including one whose ``_manifest.json`` is gone."""
        if not self.root.is_dir():
            return []
        found = []
        for stage in sorted(p for p in self.root.iterdir() if p.is_dir() and not p.name.startswith((".", "_"))):
            folders = sorted(p for p in stage.iterdir() if p.is_dir() and not p.name.startswith("."))
            if (stage / LOCKS).is_dir() or any((f / MANIFEST).is_file() for f in folders):
                found.extend((stage.name, f.name) for f in folders)
        return found

    def verify(self, full: bool = True, remove: bool = False) -> list[Finding]:
        """Check every artifact (``full``: every byte against its sha256) and what it was built from;
        return what is damaged, stale, or built from either (directly or further up). ``remove``
        deletes all of those (each under its lease) so that the next run rebuilds them."""
        findings: dict[tuple[str, str], Finding] = {}
        built_from: dict[tuple[str, str], list[tuple[str, str]]] = {}
        for stage, key in self.artifacts():
            manifest, damage = self._examine(self.folder(stage, key), full)
            if manifest is None:
                findings[(stage, key)] = Finding(stage, key, "damaged", damage or "")
                continue
            for recorded in manifest.get("inputs") or ():
                built_from.setdefault((recorded["stage"], recorded["key"]), []).append((stage, key))
            stale = self._stale_input(manifest)
            if stale is not None:
                findings[(stage, key)] = Finding(stage, key, "stale", stale)
        bad = list(findings)
        while bad:
            source = bad.pop()
            for dependent in built_from.get(source, ()):
                if dependent not in findings:
                    findings[dependent] = Finding(*dependent, "built-from", f"{source[0]}/{source[1]}")
                    bad.append(dependent)
        if remove:
            for (stage, key), finding in findings.items():
                with self.lease(stage, key):
                    if finding.why != "damaged" or self._examine(self.folder(stage, key), full)[0] is None:
                        self._discard(stage, key)
        return sorted(findings.values(), key=lambda f: (f.why != "damaged", f.stage, f.key))

    def discard(self, artifact: Artifact) -> None:
        """Remove an artifact this process built whose content was refused downstream (a user's file
        that preparation rejected), under its lease, so that the store keeps no copy of it."""
        with self.lease(artifact.stage, artifact.key):
            self._discard(artifact.stage, artifact.key)

    def _discard(self, stage: str, key: str) -> None:
        """Move an artifact folder aside and delete it (the caller holds its lease)."""
        folder = self.folder(stage, key)
        if folder.exists():
            trash = self.root / stage / f"{TRASH}{key}-{uuid.uuid4().hex[:8]}"
            folder.rename(trash)
            shutil.rmtree(trash, ignore_errors=True)

    def abandoned_leases(self, remove: bool = False) -> list[tuple[Path, str]]:
        """``(lease file, why)`` of every lease whose holder left it (its process gone on this host,
        or no heartbeat for twice the TTL); ``remove`` breaks them."""
        found = []
        for path in sorted(self.root.glob(f"*/{LOCKS}/*")) if self.root.is_dir() else ():
            if not path.is_file() or ".stale-" in path.name:
                continue
            lease = Lease(path)
            why = lease.break_if_abandoned() if remove else lease.abandoned()
            if why is not None:
                found.append((path, why))
        return found

    def verify_checkpoints(self, remove: bool = False) -> list[tuple[str, str, str]]:
        """``(stage, key, item)`` of every checkpoint item of an unfinished build that does not
        match its record; ``remove`` deletes them (unless a live build holds the key's lease),
        so that the next run redoes them."""
        damaged = []
        for partial in sorted(self.root.glob(f"*/{PARTIAL}*")) if self.root.is_dir() else ():
            stage, key = partial.parent.name, partial.name[len(PARTIAL):]
            checkpoint = Checkpoint(partial)
            bad = [name for name in checkpoint.items() if not checkpoint.intact(name)]
            damaged += [(stage, key, name) for name in bad]
            if remove and bad:
                lease = self.lease(stage, key)
                if lease.try_acquire():
                    try:
                        for name in bad:
                            checkpoint.discard(name)
                    finally:
                        lease.release()
        return damaged

    def clean_temporaries(self) -> int:
        """Remove temporary folders left by dead builders, and checkpoint folders of artifacts
        already published (a builder that lost its lease may have written them); return how many.

        A key's folders are removed only while holding its lease, so a live build (which
        holds the lease) never loses its folder.
        """
        removed = 0
        for stage_folder in (p for p in self.root.iterdir() if p.is_dir()) if self.root.is_dir() else ():
            keys = {p.name[len(prefix):].rsplit("-", 1)[0]
                    for prefix in (TMP, TRASH) for p in stage_folder.glob(f"{prefix}*")}
            published = {p.name[len(PARTIAL):] for p in stage_folder.glob(f"{PARTIAL}*")
                         if (stage_folder / p.name[len(PARTIAL):] / MANIFEST).is_file()}
            for key in keys | published:
                lease = self.lease(stage_folder.name, key)
                if lease.try_acquire():
                    try:
                        removed += self._remove_temporaries(stage_folder, key)
                        if key in published and self.load(stage_folder.name, key) is not None:
                            shutil.rmtree(stage_folder / f"{PARTIAL}{key}", ignore_errors=True)
                            removed += 1
                    finally:
                        lease.release()
        return removed


def _write_text_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    tmp.replace(path)


def write_atomic(path: Path, text: str) -> None:
    """Write a text file atomically (temporary file in the same folder, then rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    _write_text_atomic(path, text)


@dataclass(frozen=True)
class Stage:
    """A pipeline stage: a name, a version (for intent), and its builder.

    ``build(folder, inputs, config, **options)`` writes the stage output into ``folder``
    and returns a summary. The key hashes ``key_view(config)`` (default: the whole config;
    a view leaves out what cannot change the output, such as devices and labels) and, per
    input, its content digest of the part this stage reads (``input_parts``: input stage
    name -> part, for example ``("prepare", "corpus")``), else its key. ``options`` (mirror
    folders, devices) never enter the key. A ``resumable`` stage's builder also gets
    ``checkpoint=`` (a :class:`Checkpoint`) to keep finished items across a killed build;
    a stage that ``uses_store`` gets ``store=`` (the LLM call cache lives there).
    ``check(artifact, config)`` runs on every built or reused artifact: a policy that
    does not shape the output (a threshold) refuses there, so it stays out of the key.
    ``native(config)`` tells whether a build loads a native runtime (torch, FAISS, an LLM
    client); the flow runs those in a stage process (``call=`` of :meth:`run`). A stage retries
    nothing itself: what may succeed later (a download's fetch) is tried again where it is made.
    The key also holds the digest of the builder's import closure
    (:func:`rbench.core.identity.code_digest`), so an edit to its code or a helper reruns it.
    """

    name: str
    version: int
    build: Callable[..., dict | None]
    resumable: bool = False
    key_view: Callable[[Any], Any] | None = None
    input_parts: tuple[tuple[str, str], ...] = ()
    uses_store: bool = False
    check: Callable[[Artifact, Any], None] | None = None
    native: Callable[[Any], bool] | None = None

    def key(self, inputs: Sequence[Artifact], config: Any) -> str:
        """Store key for this stage given its inputs and resolved config."""
        return self.key_of([a.digest(self.part_of(a.stage)) for a in inputs], config)

    def part_of(self, stage: str) -> str | None:
        """The part of an input of ``stage`` this stage reads (its key follows that part's content), or None."""
        return dict(self.input_parts).get(stage)

    def key_of(self, digests: Sequence[str], config: Any) -> str:
        """Store key for this stage given what its key follows of each input (:meth:`Artifact.digest`
        of the part it reads) and its resolved config: the one derivation of a key, which
        :class:`rbench.orchestration.plan.ExperimentPlan` makes before any stage runs."""
        view = self.key_view(config) if self.key_view is not None else config
        module = getattr(self.build, "__module__", None)
        return stage_key(self.name, self.version, view, list(digests), code_digest(module) if module else "")

    def run(
        self, store: Store, inputs: Sequence[Artifact], config: Any, *,
        call: Callable[..., Any] | None = None, key: str | None = None, **options: Any
    ) -> Artifact:
        """Return the cached artifact when intact, else build it. Plain function; no Prefect.
        ``call(build, *args, **kwargs)`` runs the build elsewhere (a stage process,
        :func:`rbench.core.processes.call_in_process`) while this process holds the lease and
        publishes the artifact; by default it runs here. ``key``: the key a plan made for these
        inputs and config (by default derived here)."""
        key = key or self.key(inputs, config)
        if self.uses_store:
            options = {**options, "store": store}
        run = functools.partial(call, self.build) if call is not None else self.build
        if self.resumable:
            def builder(folder: Path, checkpoint: Checkpoint) -> dict | None:
                return run(folder, list(inputs), config, checkpoint=checkpoint, **options)
        else:
            def builder(folder: Path, checkpoint: Checkpoint) -> dict | None:
                return run(folder, list(inputs), config, **options)
        artifact, built = store.build(self.name, key, builder, inputs)
        verb = "built" if built else "reused"
        log.debug("%s %s %s: %s", self.name, verb, key[:12], summarize(artifact.info))
        if self.check is not None:
            self.check(artifact, config)
        return artifact


def summarize(info: Mapping[str, Any]) -> str:
    """One line of ``key=value`` pairs from a stage summary (nested values left out)."""
    return ", ".join(f"{k}={v}" for k, v in info.items() if not isinstance(v, (dict, list)))
