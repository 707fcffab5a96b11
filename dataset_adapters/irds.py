"""Any dataset ir_datasets names (``beir/scifact/test``, ``msmarco-passage/dev/small``,
``trec-robust04``; https://ir-datasets.com), read through ir_datasets itself.

ir_datasets downloads a dataset's files from their source on first use and keeps them in its
home folder (``IR_DATASETS_HOME``, default ``~/.ir_datasets``); rbench's download stage holds no
file of its own for it (the dataset's id, a fixed release, is its key). Each document is one
object, its text ir_datasets' ``default_text()`` (title and text joined, where a document has
both); queries are ``default_text()`` too. Judgements keep their grades: grade > 0 is gold,
the rest are kept as judged not relevant."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Callable, Iterator

from pydantic import BaseModel, ConfigDict, Field, field_validator

from rbench.core.errors import DataError, MissingExtraError, Unreachable
from rbench.dataset_adapters.base import ADAPTERS, Adapter, CorpusObject, FileSpec, Query

log = logging.getLogger(__name__)


def _ir_datasets():
    try:
        import ir_datasets
    except ImportError:
        raise MissingExtraError("ir_datasets", "irds", "reading a dataset by its ir_datasets id") from None
    return ir_datasets


class IrDatasetsParams(BaseModel):
    """A dataset by its ir_datasets id."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(description="The ir_datasets id, such as `beir/scifact/test` or `msmarco-passage/dev/small` "
                                "(https://ir-datasets.com lists them); it needs documents, queries and qrels.")

    @field_validator("id")
    @classmethod
    def _known(cls, name: str) -> str:
        if name not in _ir_datasets().registry:
            raise ValueError(f"ir_datasets has no dataset {name!r}: see https://ir-datasets.com for the ids (such as "
                             "beir/scifact/test), or register your own with ir_datasets.registry.register")
        return name


@ADAPTERS.register
class IrDatasets(Adapter):
    """A dataset read through ir_datasets, by its id."""

    name = "ir_datasets"
    description = "any dataset ir_datasets names (beir/scifact/test, msmarco-passage/dev/small, ...); downloads it"
    Params = IrDatasetsParams
    graded = True
    where_from = "downloaded by ir_datasets on first use into IR_DATASETS_HOME (needs the network that once)"

    def files(self, params: IrDatasetsParams) -> list[FileSpec]:
        return []

    def _load(self, params: IrDatasetsParams) -> Any:
        dataset = _ir_datasets().load(params.id)
        lacking = [part for part in ("docs", "queries", "qrels") if not getattr(dataset, f"has_{part}")()]
        if lacking:
            raise DataError(f"ir_datasets' {params.id!r} has no {', '.join(lacking)}: choose an id with documents, "
                            "queries and qrels (a split, such as beir/scifact/test, not beir/scifact)")
        return dataset

    def _read(self, params: IrDatasetsParams, what: str, items: Callable[[], Iterator]) -> Iterator:
        """What ``items()`` iterates, ``what`` it is; a failed download (when ``items`` is called, as
        ir_datasets builds a docstore there, or while iterating) named with the id and the network."""
        try:
            yield from items()
        except OSError as e:  # requests' ConnectionError is one
            raise Unreachable(f"ir_datasets could not get the {what} of {params.id!r}: {str(e).splitlines()[0][:300]}. "
                              "It downloads a dataset from its source on first use, which needs the network; on a "
                              "machine without one, run it once where there is one and copy ir_datasets' home folder "
                              "(IR_DATASETS_HOME, default ~/.ir_datasets), or give the files to the beir adapter") \
                from None

    def objects(self, raw: Path, params: IrDatasetsParams) -> Iterator[CorpusObject]:
        dataset = self._load(params)
        for doc in self._read(params, "documents", dataset.docs_iter):
            title = str(getattr(doc, "title", "") or "")
            yield CorpusObject(text=doc.default_text(), doc_id=doc.doc_id, page_title=title, source=doc.doc_id,
                               modality="text", position=0, origin=f"{params.id} document {doc.doc_id}")

    def queries(self, raw: Path, params: IrDatasetsParams) -> Iterator[Query]:
        dataset = self._load(params)
        judged: dict[str, dict[str, int]] = {}
        for qrel in self._read(params, "qrels", dataset.qrels_iter):
            judged.setdefault(qrel.query_id, {})[qrel.doc_id] = int(qrel.relevance)
        unjudged = 0
        for query in self._read(params, "queries", dataset.queries_iter):
            grades = judged.get(query.query_id, {})
            relevant = {d: g for d, g in grades.items() if g > 0}
            if not relevant:
                unjudged += 1
                continue
            yield Query(query_id=query.query_id, text=query.default_text(), gold_doc_ids=list(relevant),
                        gold_grades=list(relevant.values()), nonrelevant_doc_ids=[d for d, g in grades.items() if g <= 0],
                        origin=f"{params.id} query {query.query_id}")
        if unjudged:
            log.warning("ir_datasets %s: %d queries have no document graded > 0 and are left out", params.id, unjudged)
