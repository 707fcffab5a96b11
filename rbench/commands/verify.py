"""``rbench verify``: every stored artifact checked against its manifest and what it was built from."""

from __future__ import annotations

import argparse
import time

from rbench.commands.common import Command
from rbench.core.errors import RbenchError

def main(args: argparse.Namespace) -> int:
    """The work of ``rbench verify``; the exit code."""
    from rbench.core.locations import resolve_store
    from rbench.core.store import Store

    root = resolve_store(args.store)
    if not root.is_dir():
        what = "is a file, not a store folder" if root.exists() else "does not exist"
        raise RbenchError(f"the store {root} {what}: pass the folder a run wrote to (--store, or RBENCH_STORE)")
    store = Store(root)
    started = time.perf_counter()
    total = len(store.artifacts())
    findings = store.verify(full=not args.fast, remove=args.remove)
    mode = "sizes and fingerprints" if args.fast else "every byte (sha256)"
    damaged = sum(f.why == "damaged" for f in findings)
    print(f"rbench: verified {total} artifact(s) in {store.root} ({mode}) in {time.perf_counter() - started:.1f}s: "
          f"{damaged} damaged, {len(findings) - damaged} stale or built from one")
    reasons = {"damaged": "damaged", "stale": "stale", "built-from": "built from"}
    for f in findings:
        print(f"  {f.stage}/{f.key}: {reasons[f.why]} {f.detail}" +
              (" (removed: the next run rebuilds it)" if args.remove else ""))
    items = store.verify_checkpoints(remove=args.remove)
    print(f"rbench: {len(items)} damaged checkpoint item(s) of unfinished builds")
    for stage, key, item in items:
        print(f"  {stage}/.partial-{key}/{item}" + (" (removed: the next run redoes it)" if args.remove else ""))
    leases = store.abandoned_leases(remove=args.remove)
    print(f"rbench: {len(leases)} lease(s) left by a builder that is gone")
    for path, why in leases:
        print(f"  {path.relative_to(store.root)}: {why}" + (" (broken)" if args.remove else ""))
    found = findings or items or leases
    if found and not args.remove:
        print("rerun with --remove to delete them (and what was built from them) so that the next run rebuilds them")
    return 1 if found and not args.remove else 0


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--store", help="store folder (default: $RBENCH_STORE, else ./.rbench)")
    parser.add_argument("--fast", action="store_true", help="sizes and fingerprints only (what a cache hit checks)")
    parser.add_argument("--remove", action="store_true", help="delete damaged artifacts so that they are rebuilt")


COMMANDS = [
    Command("verify",
            help="check every stored artifact against its manifest",
            description="Check every stored artifact against its manifest (sizes and SHA-256 digests) and against "
                        "what it was built from; --remove deletes the damaged and stale ones, everything built from "
                        "them, and leases left by killed builders, so that the next run rebuilds them.",
            examples=["rbench verify --store .rbench", "rbench verify --fast"],
            arguments=_arguments, main=main),
]
