"""Files pinned by commit (dataset_adapters/pins): addresses, recorded digests, clear errors."""

import hashlib
import json

import pytest

from rbench.core.errors import DataError
from rbench.dataset_adapters.pinned import Pin, main, pin, record_digests
from tests.unit.datasets.test_bright import _serve

COMMIT = "0123456789abcdef0123456789abcdef01234567"


def test_a_pinned_file_has_its_address_at_the_commit_and_an_unlisted_one_is_refused():
    pinned = Pin(repository="org/tools", commit=COMMIT, files={"qrels/a.txt": "ab" * 32, "topics/b.tsv": None})
    spec = pinned.spec("mine/a.txt", "qrels/a.txt")
    assert spec.url == f"https://raw.githubusercontent.com/org/tools/{COMMIT}/qrels/a.txt"
    assert spec.sha256 == "ab" * 32 and pinned.spec("b.tsv", "topics/b.tsv").sha256 is None
    with pytest.raises(DataError, match="topics/c.tsv is not among the pinned files of org/tools@01234567"):
        pinned.url("topics/c.tsv")
    with pytest.raises(ValueError, match="commit"):
        Pin(repository="org/tools", commit="master", files={})
    with pytest.raises(ValueError, match="files"):
        Pin(repository="org/tools", commit=COMMIT, files={"a.txt": "not-a-digest"})


def test_recording_fetches_each_unrecorded_file_at_the_commit_and_keeps_the_recorded(tmp_path):
    served = tmp_path / "served"
    (served / "qrels").mkdir(parents=True)
    (served / "qrels" / "a.txt").write_bytes(b"1 0 d1 1\n")
    path = tmp_path / "tools.json"
    path.write_text(json.dumps({"repository": "org/tools", "commit": COMMIT,
                                "files": {"qrels/a.txt": None, "topics/b.tsv": "cd" * 32}}))
    server = _serve(served)
    try:
        base = f"http://127.0.0.1:{server.server_port}/"
        assert record_digests(path, base) == 1
        assert json.loads(path.read_text())["files"] == {"qrels/a.txt": hashlib.sha256(b"1 0 d1 1\n").hexdigest(),
                                                         "topics/b.tsv": "cd" * 32}
        (served / "topics").mkdir()
        (served / "topics" / "c.tsv").write_bytes(b"1\tq\n")
        data = json.loads(path.read_text())
        data["files"].update({"topics/c.tsv": None, "qrels/gone.txt": None})
        path.write_text(json.dumps(data))
        with pytest.raises(DataError, match=r"qrels/gone.txt of org/tools@01234567 cannot be fetched .*404.*1 digest"):
            record_digests(path, base)
        kept = json.loads(path.read_text())["files"]
        assert kept["topics/c.tsv"] == hashlib.sha256(b"1\tq\n").hexdigest() and kept["qrels/gone.txt"] is None
        assert not list(tmp_path.glob(".tools.json.*"))
    finally:
        server.shutdown()
        server.server_close()


def test_a_malformed_or_unknown_pin_is_one_message(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text('{"repository": "org/tools", "commit": "master", "files": {}}')
    with pytest.raises(DataError, match="bad.json is unreadable or malformed"):
        record_digests(bad)
    assert main(["no-such-pin"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no-such-pin.json is unreadable" in err and "the pins are ['anserini-tools']" in err


def test_the_shipped_pin_of_anserini_tools_is_valid():
    pinned = pin("anserini-tools")
    assert pinned.repository == "castorini/anserini-tools" and len(pinned.files) == 25
    assert all(d is None or len(d) == 64 for d in pinned.files.values())
