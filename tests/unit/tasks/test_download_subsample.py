"""Download from a mirror with checksum verification; deterministic query subsampling."""

from __future__ import annotations

import hashlib

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from rbench.config import SubsampleConfig
from rbench.core.errors import ChecksumError, DataError
from rbench.core.store import Artifact, Store
from rbench.dataset_adapters.base import FileSpec
from rbench.dataset_adapters.fetaqa import DEV
from rbench.tasks.download import DOWNLOAD, DownloadConfig
from rbench.tasks.subsample import SUBSAMPLE, select_queries


def _spec(name: str, content: bytes, url: str | None = None) -> FileSpec:
    return FileSpec(name=name, sha256=hashlib.sha256(content).hexdigest(), url=url)


def test_mirror_copy_is_verified(tmp_path):
    mirror = tmp_path / "mirror"
    (mirror / "ds").mkdir(parents=True)
    (mirror / "ds" / "a.txt").write_bytes(b"hello")
    art = DOWNLOAD.run(Store(tmp_path / "s"), [], DownloadConfig(files=[_spec("ds/a.txt", b"hello")]), mirror=mirror)
    assert art.file("ds/a.txt").read_bytes() == b"hello"


def test_a_pinned_mirror_file_is_linked_an_unpinned_one_copied(tmp_path, monkeypatch):
    import os

    mirror = tmp_path / "mirror"
    mirror.mkdir()
    (mirror / "pinned.txt").write_bytes(b"release")
    (mirror / "own.txt").write_bytes(b"mine")
    files = [_spec("pinned.txt", b"release"), FileSpec(name="own.txt", hf_repo="org/data")]
    art = DOWNLOAD.run(Store(tmp_path / "s"), [], DownloadConfig.resolved(files, mirror), mirror=mirror)
    assert art.file("pinned.txt").stat().st_ino == (mirror / "pinned.txt").stat().st_ino  # no second copy
    assert art.file("own.txt").stat().st_ino != (mirror / "own.txt").stat().st_ino  # the user may edit it in place

    def cross_device(source, target):
        raise OSError(18, "Invalid cross-device link")

    monkeypatch.setattr(os, "link", cross_device)
    other = DOWNLOAD.run(Store(tmp_path / "s2"), [], DownloadConfig(files=files[:1]), mirror=mirror)
    assert other.file("pinned.txt").read_bytes() == b"release"
    assert other.file("pinned.txt").stat().st_ino != (mirror / "pinned.txt").stat().st_ino


def test_checksum_mismatch_names_file_and_both_digests(tmp_path):
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    (mirror / "a.txt").write_bytes(b"hellO")
    spec = _spec("a.txt", b"hello")
    with pytest.raises(ChecksumError) as e:
        DOWNLOAD.run(Store(tmp_path / "s"), [], DownloadConfig(files=[spec]), mirror=mirror)
    msg = str(e.value)
    assert "a.txt" in msg and spec.sha256 in msg and hashlib.sha256(b"hellO").hexdigest() in msg
    left = (tmp_path / "s" / "download").iterdir() if (tmp_path / "s" / "download").exists() else []
    assert [p.name for p in left if p.name != ".locks"] == []


def test_missing_file_without_url_or_network(tmp_path):
    with pytest.raises(DataError, match="not in the mirror"):
        DOWNLOAD.run(Store(tmp_path / "s"), [], DownloadConfig(files=[_spec("x.txt", b"")]), mirror=tmp_path)
    unreachable = _spec("x.txt", b"", url="http://127.0.0.1:9/x.txt")
    with pytest.raises(DataError, match="download from http://127.0.0.1:9/x.txt failed"):
        DOWNLOAD.run(Store(tmp_path / "s"), [], DownloadConfig(files=[unreachable]), mirror=None)


def test_mirror_path_is_not_part_of_the_key(tmp_path):
    config = DownloadConfig(files=[_spec("a.txt", b"x")])
    assert DOWNLOAD.key([], config) == DOWNLOAD.key([], DownloadConfig(files=[_spec("a.txt", b"x")]))
    local = FileSpec(name="a.txt", sha256=config.files[0].sha256, local=tmp_path / "elsewhere.txt")
    assert DOWNLOAD.key([], DownloadConfig(files=[local])) == DOWNLOAD.key([], config)


def test_an_unpinned_mirror_file_is_keyed_by_its_content_not_its_place(tmp_path):
    files = [FileSpec(name="ds/a.txt", hf_repo="org/data")]
    for folder, text in (("m1", "v1"), ("m2", "v1"), ("m3", "v2")):
        (tmp_path / folder / "ds").mkdir(parents=True)
        (tmp_path / folder / "ds" / "a.txt").write_text(text)
    keys = {m: DOWNLOAD.key([], DownloadConfig.resolved(files, tmp_path / m)) for m in ("m1", "m2", "m3")}
    assert keys["m1"] == keys["m2"] != keys["m3"]
    store = Store(tmp_path / "s")
    first = DOWNLOAD.run(store, [], DownloadConfig.resolved(files, tmp_path / "m1"), mirror=tmp_path / "m1")
    changed = DOWNLOAD.run(store, [], DownloadConfig.resolved(files, tmp_path / "m3"), mirror=tmp_path / "m3")
    assert first.file("ds/a.txt").read_text() == "v1" and changed.file("ds/a.txt").read_text() == "v2"


def test_a_hub_branch_is_keyed_by_the_commit_it_points_at(tmp_path, monkeypatch, caplog):
    import rbench.tasks.download as download

    files = [FileSpec(name="a.txt", hf_repo="org/data", revision="main")]
    commits = iter(["a" * 40, "b" * 40, None])
    monkeypatch.setattr(download, "_hub_commit", lambda repo, revision: next(commits))
    first, second = DownloadConfig.resolved(files), DownloadConfig.resolved(files)
    assert first.files[0].revision == "a" * 40 and DOWNLOAD.key([], first) != DOWNLOAD.key([], second)
    offline = DownloadConfig.resolved(files)
    assert offline.files[0].revision == "main" and "pin revision to a commit" in caplog.text
    pinned = [FileSpec(name="a.txt", hf_repo="org/data", revision="c" * 40)]
    assert DownloadConfig.resolved(pinned).files == pinned  # a commit is not looked up


def test_fetaqa_from_shared_mirror(shared_data, tmp_path):
    art = DOWNLOAD.run(Store(tmp_path), [], DownloadConfig(files=[DEV]), mirror=shared_data)
    assert art.info["bytes"] == (shared_data / DEV.name).stat().st_size


TEXTS = [
    "who won the tony award in 2014", "which tony award did he win in 2014", "tony award winner 2014",
    "how tall is the eiffel tower", "eiffel tower height in meters", "what is the height of eiffel tower",
    "penguins live where", "where do penguins live", "habitat of penguins",
]


def test_select_queries_picks_one_per_topic_deterministically():
    chosen = select_queries(TEXTS, 3, seed=0)
    assert chosen == select_queries(TEXTS, 3, seed=0)
    assert len(chosen) == 3
    assert sorted(i // 3 for i in chosen) == [0, 1, 2]  # one representative from each topic
    assert select_queries(TEXTS, 50, seed=0) == list(range(9))


def test_subsample_stage_caps_and_keeps_columns(tmp_path):
    folder = tmp_path / "prep"
    folder.mkdir()
    table = pa.table({"query_id": [str(i) for i in range(9)], "text": TEXTS, "gold_doc_ids": [["d"]] * 9})
    pq.write_table(table, folder / "queries.parquet")
    art = SUBSAMPLE.run(Store(tmp_path / "s"), [Artifact("prepare", "p", folder)], SubsampleConfig(size=3))
    out = pq.read_table(art.file("queries.parquet"))
    assert out.num_rows == 3 and out.column_names == ["query_id", "text", "gold_doc_ids"]


def test_a_users_file_fixed_in_place_leaves_the_earlier_download_intact(tmp_path):
    """A user's own file is copied, not hard-linked: rewriting it in place (``cat fixed > file``
    keeps the inode) and rerunning leaves both download artifacts whole for ``rbench verify``."""
    import os

    from rbench.cli import main
    from rbench.dataset_adapters.base import local_file

    path = tmp_path / "corpus.jsonl"
    path.write_text('{"id": "d1", "text": "broken\n')
    store = Store(tmp_path / "s")
    first = DOWNLOAD.run(store, [], DownloadConfig(files=[local_file("corpus.jsonl", path)]))
    inode = path.stat().st_ino
    with open(path, "w") as f:  # in place, as a shell redirection writes
        f.write('{"id": "d1", "text": "fixed"}\n')
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    assert path.stat().st_ino == inode
    second = DOWNLOAD.run(store, [], DownloadConfig(files=[local_file("corpus.jsonl", path)]))
    assert second.key != first.key and first.file("corpus.jsonl").read_text().endswith("broken\n")
    assert store.verify() == []
    assert main(["verify", "--store", str(tmp_path / "s")]) == 0


def test_a_users_file_is_hashed_once_per_process_until_it_changes(tmp_path, monkeypatch):
    import os

    import rbench.dataset_adapters.base as base

    path = tmp_path / "corpus.jsonl"
    path.write_text('{"a": 1}\n')
    hashed = []
    real = base.file_digest
    monkeypatch.setattr(base, "file_digest", lambda p: hashed.append(p) or real(p))
    first = base.local_file("corpus.jsonl", path)
    assert base.local_file("corpus.jsonl", path) == first and len(hashed) == 1
    path.write_text('{"a": 2}\n')
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    changed = base.local_file("corpus.jsonl", path)
    assert len(hashed) == 2 and changed.sha256 != first.sha256 and changed.sha256 == real(path)


def test_a_hub_file_is_asked_for_unless_the_hubs_cache_holds_it(tmp_path, monkeypatch):
    """Offline (HF_HUB_OFFLINE), a Hugging Face file is named as not answering, unless it is in
    the hub's local cache, where the download reads it; a file with no source is named too."""
    from huggingface_hub import constants

    from rbench.tasks.download import probe, unreachable

    commit = "a" * 40
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    spec = FileSpec(name="bright/examples/x.parquet", hf_repo="org/data", hf_path="examples/x.parquet", revision=commit)
    assert probe(spec).startswith("the hub does not answer (")
    cached = tmp_path / "hub" / "datasets--org--data" / "snapshots" / commit / "examples" / "x.parquet"
    cached.parent.mkdir(parents=True)
    cached.write_bytes(b"PAR1")
    assert probe(spec) is None
    nowhere = FileSpec(name="x.txt")
    assert unreachable(DownloadConfig(files=[spec, nowhere]), None) == [(nowhere, "it has no download source")]


@pytest.mark.parametrize("error, transient", [
    ("HTTPError(503)", True), ("HTTPError(429)", True), ("HTTPError(404)", False), ("HTTPError(403)", False),
    ("URLError", True), ("TimeoutError", True), ("ConnectionResetError", True), ("FileNotFoundError", False),
])
def test_a_source_that_may_answer_later_fails_the_download_as_unreachable(tmp_path, monkeypatch, error, transient):
    """A timeout, a dropped connection or HTTP 408/429/5xx fails the download with ``Unreachable``, after
    three tries (the fetch tries again itself, in the data phase as in a chunking grid's flow); a missing
    file or a refused access is a plain DataError at once."""
    import urllib.error
    import urllib.request

    import rbench.tasks.download as download
    from rbench.core.errors import Unreachable

    made = {"URLError": urllib.error.URLError("no route"), "TimeoutError": TimeoutError("timed out"),
            "ConnectionResetError": ConnectionResetError("reset"), "FileNotFoundError": FileNotFoundError("gone")}
    if error.startswith("HTTPError"):
        code = int(error[10:13])
        raised = urllib.error.HTTPError("https://example.org/f", code, "status", {}, None)
    else:
        raised = made[error]

    tries = []

    def fail(*args, **kwargs):
        tries.append(args[0])
        raise raised

    monkeypatch.setattr(urllib.request, "urlopen", fail)
    monkeypatch.setattr(download, "RETRY_DELAYS", (0.0, 0.0))
    spec = _spec("f.txt", b"x", url="https://example.org/f")
    with pytest.raises(DataError, match="download from https://example.org/f failed") as caught:
        DOWNLOAD.run(Store(tmp_path / "store"), [], DownloadConfig(files=[spec]))
    assert isinstance(caught.value, Unreachable) is transient
    assert len(tries) == (3 if transient else 1)
