"""A change to the code that shapes a stored output comes with a version bump."""

from __future__ import annotations

import json

from tests.fingerprints import RECORD, current


def test_every_changed_component_was_bumped_and_recorded():
    recorded = json.loads(RECORD.read_text())
    now = current()
    assert set(now) == set(recorded), (
        f"components added or removed: {sorted(set(now) ^ set(recorded))}; run: python -m tests.fingerprints --update")
    unbumped = [n for n in now if now[n]["sha256"] != recorded[n]["sha256"] and now[n]["version"] == recorded[n]["version"]]
    assert not unbumped, (
        f"the source of {unbumped} changed but the version did not: bump its version if the change can alter "
        "an output (cached artifacts would be reused otherwise), then run: python -m tests.fingerprints --update")
    unrecorded = [n for n in now if now[n] != recorded[n]]
    assert not unrecorded, f"{unrecorded} were bumped but not recorded: run python -m tests.fingerprints --update"
