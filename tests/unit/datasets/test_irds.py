"""Datasets by their ir_datasets id, offline: a tiny dataset registered locally the way
ir_datasets allows (``ir_datasets.registry.register`` over local files), read through the
download and prepare stages; an unknown id, and a source that does not answer. About 2 s."""

from __future__ import annotations

import uuid

import pyarrow.parquet as pq
import pytest

from rbench.config import DatasetConfig
from rbench.core.errors import Unreachable
from rbench.core.store import Store
from rbench.tasks.download import DOWNLOAD, DownloadConfig
from rbench.tasks.prepare import PREPARE
from tests.conftest import need

ir_datasets = need("ir_datasets")


def _register(tmp_path, docs) -> str:
    from ir_datasets.datasets.base import Dataset
    from ir_datasets.formats import TrecQrels, TsvDocs, TsvQueries
    from ir_datasets.util import LocalDownload

    (tmp_path / "queries.tsv").write_text("q1\tdo cats purr\nq2\twho barks\nq3\tunjudged\n")
    (tmp_path / "qrels").write_text("q1 0 d1 2\nq1 0 d2 0\nq2 0 d2 1\nq3 0 d1 0\n")
    name = f"rbench-test/{uuid.uuid4().hex[:8]}"
    docs = docs if hasattr(docs, "docs_iter") else TsvDocs(docs)  # a download, or a docs object as is
    ir_datasets.registry.register(name, Dataset(docs, TsvQueries(LocalDownload(tmp_path / "queries.tsv")),
                                                TrecQrels(LocalDownload(tmp_path / "qrels"), {0: "no", 1: "yes"})))
    return name


def _prepared(tmp_path, name: str):
    cfg = DatasetConfig.model_validate({"name": "tiny-irds", "adapter": "ir_datasets", "params": {"id": name}})
    store = Store(tmp_path / "store")
    return PREPARE.run(store, [DOWNLOAD.run(store, [], DownloadConfig.of(cfg))], cfg)


def test_a_locally_registered_dataset_is_read_with_its_grades(tmp_path, caplog):
    from ir_datasets.util import LocalDownload

    (tmp_path / "docs.tsv").write_text("d1\tCats purr.\nd2\tDogs bark.\n")
    prepared = _prepared(tmp_path, _register(tmp_path, LocalDownload(tmp_path / "docs.tsv")))
    corpus = pq.read_table(prepared.file("corpus.parquet")).to_pylist()
    assert [(o["doc_id"], o["text"]) for o in corpus] == [("d1", "Cats purr."), ("d2", "Dogs bark.")]
    assert pq.read_table(prepared.file("queries.parquet")).to_pylist() == [
        {"query_id": "q1", "text": "do cats purr", "gold_doc_ids": ["d1"], "gold_grades": [2],
         "nonrelevant_doc_ids": ["d2"], "gold_found": 1},
        {"query_id": "q2", "text": "who barks", "gold_doc_ids": ["d2"], "gold_grades": [1], "nonrelevant_doc_ids": [],
         "gold_found": 1}]
    assert "1 queries have no document graded > 0 and are left out" in caplog.text


def test_an_unknown_id_and_a_source_that_does_not_answer_are_named(tmp_path):
    from ir_datasets.util import Cache, RequestsDownload

    with pytest.raises(ValueError, match="ir_datasets has no dataset 'beir/nope/test': see https://ir-datasets.com"):
        DatasetConfig.model_validate({"name": "x", "adapter": "ir_datasets", "params": {"id": "beir/nope/test"}})
    source = Cache(RequestsDownload("http://127.0.0.1:9/docs.tsv"), tmp_path / "docs.tsv")  # nothing listens on 9
    name = _register(tmp_path, source)
    with pytest.raises(Unreachable, match=f"ir_datasets could not get the documents of '{name}': .* needs the network"):
        _prepared(tmp_path, name)


def test_a_download_that_fails_when_the_docstore_is_built_is_named_too(tmp_path):
    """ir_datasets' BEIR datasets download while ``docs_iter()`` builds their docstore, before the
    first document: on main at 3f3249c that error escaped the adapter, and ``rbench run`` printed
    the raw ``HTTPSConnectionPool(...) NameResolutionError`` behind ``dataset 'x':``, without the id
    or the offline advice (issue 70, item 11)."""
    import requests
    from ir_datasets.formats import BaseDocs

    class DocstoreDocs(BaseDocs):
        def docs_iter(self):
            raise requests.ConnectionError("Failed to resolve 'public.ukp.informatik.tu-darmstadt.de'")

    name = _register(tmp_path, DocstoreDocs())
    with pytest.raises(Unreachable, match=f"documents of '{name}': Failed to resolve .*IR_DATASETS_HOME"):
        _prepared(tmp_path, name)
