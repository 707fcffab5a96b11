"""Every split of FeTaQA and TabFact, pinned by the shipped manifests; title options of the
table adapters; TARGET titles from its ``context`` column."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from rbench.config import DatasetConfig
from rbench.core.errors import ChecksumError, DataError
from rbench.core.store import Store
from rbench.dataset_adapters import base
from rbench.dataset_adapters.base import expand, get_adapter, known_file, manifest
from rbench.dataset_adapters.target import context_title
from rbench.tasks.download import DOWNLOAD, DownloadConfig
from tests.conftest import write_jsonl
from tests.unit.datasets.test_adapters import _prepare, _table, write_target


def _files(adapter: str, **params):
    a = get_adapter(adapter)
    return expand(a.files(a.Params.model_validate(params)))


def test_fetaqa_splits_are_pinned_by_the_manifest_and_train_is_not():
    dev, test, train = (_files("fetaqa", split=s)[0] for s in ("dev", "test", "train"))
    assert dev.name == "fetaqa/fetaQA-v1_dev.jsonl" and dev.sha256.startswith("94ec2dcc")
    assert test.name == "fetaqa/fetaQA-v1_test.jsonl" and test.sha256.startswith("3d4b9b1f")
    assert train.sha256 is None and train.url.endswith("/data/fetaQA-v1_train.jsonl")
    with pytest.raises(ValueError, match="params.split: Input should be 'dev', 'test' or 'train'"):
        DatasetConfig.model_validate({"name": "fetaqa", "params": {"split": "validation"}})


def test_tabfact_full_splits_pin_every_table_and_the_sample_stays_the_default():
    test = _files("tabfact", split="test")
    tables = [f for f in test if "/all_csv/" in f.name]
    assert len(tables) == 16573 and all(f.sha256 and f.url.startswith("https://raw.githubusercontent.com/") for f in tables)
    assert {f.name for f in test if "/all_csv/" not in f.name} == {"tabfact/table_to_page.json", "tabfact/test_examples.json"}
    assert all(f.sha256 for f in test)
    assert next(f for f in test if f.name == "tabfact/test_examples.json").url.endswith("/tokenized_data/test_examples.json")
    train = {f.name: f for f in _files("tabfact", split="train")}
    assert train["tabfact/train_examples.json"].sha256 is None
    assert len(_files("tabfact")) == 42


def test_a_full_tabfact_split_goes_to_the_download_stage_by_reference_and_shows_progress(tmp_path, monkeypatch,
                                                                                       caplog):
    """A generated mirror of the full release's shape: 16,573 tables, the page titles and the
    test examples, pinned by a generated manifest in place of the shipped one."""
    mirror, manifests = tmp_path / "mirror", tmp_path / "manifests"
    (mirror / "tabfact" / "all_csv").mkdir(parents=True)
    shutil.copytree(base.MANIFESTS, manifests)
    pinned = {}
    for i in range(16573):
        name = f"tabfact/all_csv/1-{i}-1.html.csv"
        data = f"year#team\n{2000 + i % 20}#team {i}\n".encode()
        (mirror / name).write_bytes(data)
        pinned[name] = hashlib.sha256(data).hexdigest()
    for name, data in (("tabfact/table_to_page.json", b"{}"), ("tabfact/test_examples.json", b"{}")):
        (mirror / name).write_bytes(data)
        pinned[name] = hashlib.sha256(data).hexdigest()
    (manifests / "tabfact.json").write_text(json.dumps(pinned))
    monkeypatch.setattr(base, "MANIFESTS", manifests)
    manifest.cache_clear()
    monkeypatch.setattr("rbench.tasks.download.PROGRESS_SECONDS", 0.0)
    try:
        config = DownloadConfig.of(DatasetConfig.model_validate({"name": "tabfact", "params": {"split": "test"}}))
        assert len(config.all_files()) == 16575 and len(config.model_dump_json()) < 1000
        with caplog.at_level("INFO", logger="rbench"):
            raw = DOWNLOAD.run(Store(tmp_path / "store"), [], config, mirror=mirror)
        assert raw.info["files"] == 16575 and raw.info["unverified"] == 0
        assert "download: 1 of 16575 files fetched and verified (0%" in caplog.text
        assert "of 16575 files fetched and verified (99%" in caplog.text

        (mirror / "tabfact/all_csv/1-9000-1.html.csv").write_bytes(b"changed")
        with pytest.raises(ChecksumError, match="checksum mismatch for tabfact/all_csv/1-9000-1.html.csv"):
            DOWNLOAD.run(Store(tmp_path / "store2"), [], config, mirror=mirror)
        (manifests / "tabfact.json").write_text(json.dumps({**pinned, "tabfact/extra.csv": "0" * 64}))
        manifest.cache_clear()
        with pytest.raises(DataError, match="manifest tabfact.json has sha256 .* plan the run again"):
            config.all_files()
    finally:
        manifest.cache_clear()


def test_shipped_manifests_equal_the_published_digests(shared_data):
    published = json.loads((shared_data / "manifests" / "tabfact.json").read_text())["files"]
    ours = manifest("tabfact")
    assert len(ours) == len(published) == 16576
    renamed = {("tabfact/all_csv/" if k.startswith("data/all_csv/") else "tabfact/") + k.rsplit("/", 1)[1]: v["sha256"]
               for k, v in published.items()}
    assert renamed == ours
    feta = json.loads((shared_data / "manifests" / "fetaqa.json").read_text())["files"]
    assert {"fetaqa/" + k.rsplit("/", 1)[1]: v["sha256"] for k, v in feta.items()} == manifest("fetaqa")


def test_the_sample_tables_are_the_full_releases_tables(shared_data):
    full = manifest("tabfact")
    for path in sorted((shared_data / "tabfact_sample" / "all_csv").glob("*.csv")):
        assert hashlib.sha256(path.read_bytes()).hexdigest() == full[f"tabfact/all_csv/{path.name}"], path.name


def test_a_split_file_under_another_splits_name_is_named_for_what_it_is(shared_data, tmp_path):
    mirror = tmp_path / "mirror" / "fetaqa"
    mirror.mkdir(parents=True)
    shutil.copyfile(shared_data / "fetaqa" / "fetaQA-v1_dev.jsonl", mirror / "fetaQA-v1_test.jsonl")
    config = DownloadConfig.of(DatasetConfig.model_validate({"name": "fetaqa", "params": {"split": "test"}}))
    with pytest.raises(ChecksumError, match=r"That is the pinned file fetaqa/fetaQA-v1_dev.jsonl, not "
                                            r"fetaqa/fetaQA-v1_test.jsonl.*choose the dataset split"):
        DOWNLOAD.run(Store(tmp_path / "store"), [], config, mirror=tmp_path / "mirror")
    assert known_file("0" * 64) is None


FETAQA = [{"feta_id": 7, "table_page_title": "Lions", "table_section_title": "Seasons",
           "table_array": [["Year", "Wins"], ["2001", "3"]], "question": "How many wins in 2001?"}]


@pytest.mark.parametrize("title, head", [("page_section", "Lions - Seasons"), ("page", "Lions"), ("none", "")])
def test_fetaqa_test_split_and_title_options(tmp_path, title, head):
    raw = tmp_path / "raw"
    (raw / "fetaqa").mkdir(parents=True)
    write_jsonl(raw / "fetaqa" / "fetaQA-v1_test.jsonl", FETAQA)
    prepared = _prepare(tmp_path, raw, {"name": "fetaqa", "params": {"split": "test", "title": title}})
    (row,) = _table(prepared.file("corpus.parquet"))
    assert row["text"] == f"{head} [SEP] [H] Year : 2001 , [H] Wins : 3"
    assert row["doc_id"] == "Lions :: Seasons"
    assert _table(prepared.file("queries.parquet"))[0]["gold_doc_ids"] == ["Lions :: Seasons"]


def _tabfact_full(raw: Path) -> None:
    (raw / "tabfact" / "all_csv").mkdir(parents=True)
    (raw / "tabfact" / "all_csv" / "1-1-1.html.csv").write_text("rank#team\n1#lions\n")
    (raw / "tabfact" / "all_csv" / "2-2-2.html.csv").write_text("year#winner\n1999#ann\n")
    (raw / "tabfact" / "val_examples.json").write_text(json.dumps({
        "1-1-1.html.csv": [["the lions rank first"], [1], "the league"]}))
    (raw / "tabfact" / "table_to_page.json").write_text(json.dumps(
        {"1-1-1.html.csv": ["league table", "https://en.wikipedia.org/wiki/League"]}))


@pytest.mark.parametrize("title, head", [("page", "league table"), ("caption", "the league"), ("none", "")])
def test_tabfact_full_split_with_its_own_tables_and_title_options(tmp_path, title, head):
    raw = tmp_path / "raw"
    _tabfact_full(raw)
    prepared = _prepare(tmp_path, raw, {"name": "tabfact",
                                        "params": {"split": "val", "tables": "split", "title": title}})
    (row,) = _table(prepared.file("corpus.parquet"))
    assert row["text"] == f"{head} [SEP] [H] rank : 1 , [H] team : lions"
    assert _table(prepared.file("queries.parquet")) == [
        {"query_id": "1-1-1.html.csv#0", "text": "the lions rank first", "gold_doc_ids": ["league table :: 1-1-1.html.csv"],
         "gold_found": 1}]


def test_tabfact_full_split_over_all_tables_names_a_missing_table(tmp_path):
    from rbench.core.errors import DataError

    raw = tmp_path / "raw"
    _tabfact_full(raw)
    with pytest.raises(DataError, match=r"TabFact table 1-10006830-1.html.csv cannot be read from .*tabfact/all_csv"):
        _prepare(tmp_path, raw, {"name": "tabfact", "params": {"split": "val"}})


def test_context_title_reads_structs_json_and_text():
    assert context_title({"table_page_title": "Lions", "table_section_title": "Seasons"}) == "Lions - Seasons"
    assert context_title('{"section_title": "Seasons", "page_title": "Lions"}') == "Lions - Seasons"
    assert context_title({"caption": "2001 results"}) == "2001 results"
    assert context_title({"note": "", "other": "x"}) == "x"
    assert context_title("Lions") == "Lions"
    assert context_title(None) == "" and context_title({"note": ""}) == ""


@pytest.mark.parametrize("title, head", [("context", "Lions - Seasons"), ("table_id", "t1"), ("none", "")])
def test_target_rows_are_titled_from_context(tmp_path, title, head, caplog):
    raw = tmp_path / "raw"
    write_target(raw, "fetaqa", {
        "database_id": ["0", "0"], "table_id": ["t1", "t2"],
        "table": [[["Year", "Wins"], ["2001", "3"]], [["a"], ["b"]]],
        "context": [{"table_page_title": "Lions", "table_section_title": "Seasons"},
                    {"table_page_title": "", "table_section_title": ""}],
    }, {"query_id": [1], "query": ["How many wins?"], "database_id": ["0"], "table_id": ["t1"], "answer": ["3"]})
    prepared = _prepare(tmp_path, raw, {"name": "t", "adapter": "target",
                                        "params": {"benchmark": "fetaqa", "title": title}})
    rows = _table(prepared.file("corpus.parquet"))
    assert rows[0]["text"] == f"{head} [SEP] [H] Year : 2001 , [H] Wins : 3"
    assert rows[0]["page_title"] == "Lions - Seasons" and rows[0]["doc_id"] == "0 :: t1"
    assert rows[1]["text"].startswith({"context": "t2 ", "table_id": "t2 ", "none": " "}[title])
    assert ("1 table(s) have no page or section title" in caplog.text) == (title == "context")


def test_a_split_of_its_own_tables_downloads_only_the_tables_its_examples_name(tmp_path, shared_data):
    from rbench.dataset_adapters.base import FileSpec, ManifestFiles

    listed = {"listed_in": "tabfact/test_examples.json", "listed_under": "tabfact/all_csv/"}
    plan = get_adapter("tabfact").files(get_adapter("tabfact").Params(split="test", tables="split"))
    assert [m.model_dump(include={"listed_in", "listed_under"}) for m in plan if isinstance(m, ManifestFiles)] == [
        listed]
    # The real download path on the 40 real validation tables: a mirror with an examples file
    # naming them, and no other table file; the manifest's other 16,533 tables are never asked for.
    mirror = tmp_path / "mirror"
    (mirror / "tabfact" / "all_csv").mkdir(parents=True)
    sample = sorted((shared_data / "tabfact_sample" / "all_csv").glob("*.csv"))
    for path in sample:
        shutil.copy(path, mirror / "tabfact" / "all_csv" / path.name)
    (mirror / "tabfact" / "test_examples.json").write_text(json.dumps({p.name: [[], [], "none"] for p in sample}))
    config = DownloadConfig.resolved([ManifestFiles.of("tabfact", exclude=".json", **listed),
                                      FileSpec(name="tabfact/test_examples.json")], mirror)
    assert len(config.all_files()) == 16_573 + 1 and len(config.all_files(mirror)) == 40 + 1
    raw = DOWNLOAD.run(Store(tmp_path / "store"), [], config, mirror=mirror)
    got = sorted(p.name for p in (raw.path / "tabfact" / "all_csv").iterdir())
    assert got == [p.name for p in sample] and raw.info["files"] == 41
