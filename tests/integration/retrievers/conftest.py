"""The tiny corpus as a prepared Parquet file, and indexing a retriever's leaves into folders."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.conftest import CORPUS


@pytest.fixture(scope="module")
def corpus_file(tmp_path_factory):
    """The tiny corpus with object ids ``o0``.. in the corpus contract's columns."""
    path = tmp_path_factory.mktemp("corpus") / "corpus.parquet"
    pq.write_table(pa.table({
        "object_id": [f"o{i}" for i in range(len(CORPUS))],
        "text": [c["object"] for c in CORPUS],
        "doc_id": [f"{c['page_title']} :: {c['source']}" for c in CORPUS],
        "page_title": [c["page_title"] for c in CORPUS],
        "modality": ["text"] * len(CORPUS),
    }), path)
    return path


def index_leaves(retriever, corpus: Path, root: Path) -> list[Path]:
    """Build the index of each of ``retriever``'s leaves in its own folder under ``root``."""
    folders = []
    for i, leaf in enumerate(retriever.leaves()):
        folder = root / f"index{i}"
        folder.mkdir()
        assert leaf.index(corpus, folder)["indexed"] == len(CORPUS)
        folders.append(folder)
    return folders
