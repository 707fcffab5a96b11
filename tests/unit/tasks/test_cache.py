"""The artifact store: keys, atomic builds, verification of hits."""

from __future__ import annotations

import pytest

from rbench.core.errors import DamagedArtifact
from rbench.core.store import MANIFEST, Stage, Store, stage_key


def _writer(calls: list):
    def build(folder, inputs, config, **options):
        calls.append(config)
        (folder / "out.txt").write_text(f"value={config['v']}")
        (folder / "sub").mkdir()
        (folder / "sub" / "part.bin").write_bytes(b"\x00\x01" * 100)
        return {"rows": 2}

    return build


def test_stage_key_depends_on_name_version_config_and_inputs():
    base = stage_key("s", 1, {"a": 1, "b": [1, 2]}, ["k1"])
    assert base == stage_key("s", 1, {"b": [1, 2], "a": 1}, ["k1"])  # key order is irrelevant
    others = {
        stage_key("t", 1, {"a": 1, "b": [1, 2]}, ["k1"]),
        stage_key("s", 2, {"a": 1, "b": [1, 2]}, ["k1"]),
        stage_key("s", 1, {"a": 2, "b": [1, 2]}, ["k1"]),
        stage_key("s", 1, {"a": 1, "b": [1, 2]}, ["k2"]),
    }
    assert base not in others and len(others) == 4


def test_run_builds_once_then_reuses(tmp_path):
    calls: list = []
    stage, store = Stage("demo", 1, _writer(calls)), Store(tmp_path)
    first = stage.run(store, [], {"v": 1})
    second = stage.run(store, [], {"v": 1})
    assert calls == [{"v": 1}]
    assert first.path == second.path and second.info["rows"] == 2
    assert (first.path / MANIFEST).exists()
    stage.run(store, [], {"v": 2})
    assert len(calls) == 2


@pytest.mark.parametrize(
    "damage",
    [
        lambda p: (p / "out.txt").unlink(),
        lambda p: (p / "out.txt").write_text("value=9"),  # same size, other bytes
        lambda p: (p / "sub" / "part.bin").write_bytes(b"\x00"),
        lambda p: (p / "extra.txt").write_text("stray"),
        lambda p: (p / MANIFEST).write_text("{not json"),
        lambda p: (p / MANIFEST).unlink(),
    ],
    ids=["deleted-file", "corrupted-same-size", "truncated", "stray-file", "bad-manifest", "no-manifest"],
)
def test_damaged_artifact_is_detected_and_rebuilt(tmp_path, damage):
    calls: list = []
    stage, store = Stage("demo", 1, _writer(calls)), Store(tmp_path)
    artifact = stage.run(store, [], {"v": 1})
    damage(artifact.path)
    assert store.load("demo", artifact.key) is None
    rebuilt = stage.run(store, [], {"v": 1})
    assert len(calls) == 2
    assert (rebuilt.path / "out.txt").read_text() == "value=1"
    assert store.load("demo", artifact.key) is not None


def test_failed_build_leaves_nothing_behind(tmp_path):
    def broken(folder, inputs, config):
        (folder / "half.txt").write_text("partial")
        raise RuntimeError("killed")

    store = Store(tmp_path)
    with pytest.raises(RuntimeError):
        Stage("demo", 1, broken).run(store, [], {"v": 1})
    assert [p.name for p in (tmp_path / "demo").iterdir()] == [".locks"]
    assert list((tmp_path / "demo" / ".locks").iterdir()) == []  # the lease was released


def test_downstream_key_follows_upstream_key(tmp_path):
    store = Store(tmp_path)
    up = Stage("up", 1, _writer([]))
    down = Stage("down", 1, _writer([]))
    a = up.run(store, [], {"v": 1})
    b = up.run(store, [], {"v": 2})
    assert down.key([a], {"v": 0}) != down.key([b], {"v": 0})


def test_verify_finds_damage_the_fast_check_misses_and_removes_it(tmp_path):
    store = Store(tmp_path)
    big = Stage("big", 1, lambda folder, inputs, config: (folder / "data.bin").write_bytes(bytes(300_000)) and {})
    artifact = big.run(store, [], {})
    demo = Stage("demo", 1, _writer([]))
    demo.run(store, [], {"v": 1})
    data = bytearray((artifact.path / "data.bin").read_bytes())
    data[150_000] = 1  # in the middle: outside the fingerprinted head and tail
    (artifact.path / "data.bin").write_bytes(bytes(data))
    assert store.load("big", artifact.key) is not None and store.load("big", artifact.key, full=True) is None
    assert store.verify(full=False) == []
    assert [(f.stage, f.key, f.why) for f in store.verify(full=True, remove=True)] == [("big", artifact.key, "damaged")]
    assert store.artifacts() == [("demo", demo.key([], {"v": 1}))]


def test_verify_counts_an_artifact_whose_manifest_is_gone(tmp_path):
    store = Store(tmp_path)
    demo = Stage("demo", 1, _writer([]))
    artifact = demo.run(store, [], {"v": 1})
    other = demo.run(store, [], {"v": 2})
    (artifact.path / MANIFEST).unlink()
    (tmp_path / "_prefect-results").mkdir()
    (tmp_path / "llm-calls" / "ab").mkdir(parents=True)
    assert sorted(store.artifacts()) == sorted([("demo", artifact.key), ("demo", other.key)])
    assert [(f.stage, f.key) for f in store.verify(full=True, remove=True)] == [("demo", artifact.key)]
    assert demo.run(store, [], {"v": 1}).built


def test_verify_refuses_a_store_that_is_missing_or_a_file(tmp_path):
    import subprocess
    import sys

    from tests.conftest import REPO

    (tmp_path / "file").write_text("x")
    for target, says in ((tmp_path / "absent", "does not exist"), (tmp_path / "file", "is a file")):
        proc = subprocess.run([sys.executable, "-m", "rbench.cli", "verify", "--store", str(target)], cwd=REPO,
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 2 and says in proc.stderr and "Traceback" not in proc.stderr
        assert "0 damaged" not in proc.stdout


def _chain(tmp_path, content: dict):
    """up -> down -> further, up's bytes from ``content["up"]`` (a build that is not reproducible),
    each counting its builds in ``content``."""
    def up_build(folder, inputs, config):
        content["up_builds"] = content.get("up_builds", 0) + 1
        (folder / "data.bin").write_bytes(content["up"])

    def down_build(folder, inputs, config):
        builds = f"{folder.parent.name}_builds"  # down or further
        content[builds] = content.get(builds, 0) + 1
        read = b"".join(f.read_bytes() for f in sorted(inputs[0].path.iterdir()) if f.name != MANIFEST)
        (folder / "sum.txt").write_text(f"{sum(read)} {config}")

    up, down, further = Stage("up", 1, up_build), Stage("down", 1, down_build), Stage("further", 1, down_build)
    store = Store(tmp_path)
    a = up.run(store, [], {})
    b = down.run(store, [a], {"d": 1})
    c = further.run(store, [b], {"f": 1})
    return store, (up, down, further), (a, b, c)


def test_a_dependent_follows_its_inputs_content_not_only_its_key(tmp_path):
    content = {"up": bytes(1000)}
    store, (up, down, further), (a, b, c) = _chain(tmp_path, content)
    (a.path / "data.bin").unlink()
    up.run(store, [], {})  # rebuilt with the same bytes: what was built from it stays good
    assert store.load("down", b.key) is not None and content["down_builds"] == 1
    (a.path / "data.bin").unlink()
    content["up"] = bytes([1]) * 1000
    rebuilt = up.run(store, [], {})  # same key, other content
    assert rebuilt.key == a.key
    assert store.load("down", b.key) is None  # stale: its input was rebuilt with other content
    assert [(f.stage, f.why) for f in store.verify()] == [("down", "stale"), ("further", "built-from")]
    down.run(store, [rebuilt], {"d": 1})
    assert content["down_builds"] == 2 and (b.path / "sum.txt").read_text().startswith("1000")
    assert store.load("further", c.key) is None  # one floor further: its input changed in turn


def test_a_build_never_reads_a_damaged_input(tmp_path):
    content = {"up": bytes(300_000)}
    store, (up, down, further), (a, b, c) = _chain(tmp_path, content)
    data = bytearray((a.path / "data.bin").read_bytes())
    data[150_000:150_000 + 65_536] = b"\x07" * 65_536  # in the middle: a cache hit's fingerprint misses it
    (a.path / "data.bin").write_bytes(bytes(data))
    cached = up.run(store, [], {})
    with pytest.raises(DamagedArtifact, match="rbench verify --remove") as raised:
        down.run(store, [cached], {"d": 2})  # a new key reads the damaged bytes
    assert str(a.path) in str(raised.value) and "data.bin" in str(raised.value)
    assert content["down_builds"] == 1 and len(list((tmp_path / "down").glob("[0-9a-f]*"))) == 1


def test_verify_remove_removes_a_damaged_artifact_and_everything_built_from_it(tmp_path):
    content = {"up": bytes(300_000)}
    store, (up, down, further), (a, b, c) = _chain(tmp_path, content)
    other = Stage("other", 1, _writer([])).run(store, [], {"v": 1})
    data = bytearray((a.path / "data.bin").read_bytes())
    data[150_000] = 9
    (a.path / "data.bin").write_bytes(bytes(data))
    findings = store.verify(full=True, remove=True)
    assert [(f.stage, f.why, f.detail) for f in findings] == [
        ("up", "damaged", "data.bin: its bytes differ from the manifest's sha256"),
        ("down", "built-from", f"up/{a.key}"), ("further", "built-from", f"down/{b.key}")]
    assert store.artifacts() == [("other", other.key)]
    rebuilt = up.run(store, [], {})
    assert down.run(store, [rebuilt], {"d": 1}).built and store.verify() == []


def test_a_lease_left_by_a_kill_after_publishing_is_broken_by_the_next_reader(tmp_path):
    import json
    import socket
    import subprocess
    import sys

    store = Store(tmp_path)
    demo = Stage("demo", 1, _writer([]))
    artifact = demo.run(store, [], {"v": 1})
    other = demo.run(store, [], {"v": 2})
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    for key in (artifact.key, other.key):  # kill -9 between the rename and the release
        lease = store.lease("demo", key).path
        lease.write_text(json.dumps({"owner": f"{socket.gethostname()}:{gone.stdout.strip()}:x", "since": 0}))
    assert [why for _, why in store.abandoned_leases()] == ["its process is gone"] * 2
    assert store.load("demo", artifact.key) is not None
    assert not store.lease("demo", artifact.key).path.exists()
    assert [p.name for p, _ in store.abandoned_leases(remove=True)] == [other.key]
    assert store.abandoned_leases() == [] and not store.lease("demo", other.key).path.exists()
