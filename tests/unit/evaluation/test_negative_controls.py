"""Negative controls (issue 79, item 8): for each benchmark of ARM's BM25 cells with an exact rule, one
run per setting family that is not ARM's computation (a retriever param, the fields, an adapter
param, the query sample, the depth, a metric definition), each judged by the same comparison as a
run; none may be ``equal``. The runs are their logged settings, as MLflow keeps them, beside scores
that average the published values exactly, so that only the settings can tell them apart. Costs
about two seconds."""

from __future__ import annotations

import typing
from pathlib import Path
from typing import Any

import pytest
import yaml

from rbench.config import ExperimentConfig
from rbench.dataset_adapters.base import ADAPTERS
from rbench.config.exact import SETTINGS
from rbench.evaluation.reproduction import Cell, compare, exempt, load_published
from tests.unit.evaluation.test_exact_rules import ARM_BM25, DATASETS, cells, logged

PUBLISHED = Path(__file__).resolve().parents[3] / "evaluation" / "published"
BENCHMARKS = {**DATASETS, "ottqa": {"name": "ottqa"}}
BY_HAND = {"protocol": "standard", "depth": 30, "subsample": {"method": "arm", "size": 100, "seed": 42},
           "metrics": {"k": [1, 3, 5, 10], "precision_denominator": "retrieved", "recall_denominator": "gold"}}
"""What protocol ``arm`` fixes, given by hand under ``standard``: a run that differs from ARM's in one
of these settings cannot be written under ``protocol: arm``, which refuses it."""
BY_HAND_BM25 = {"name": "bm25", "params": {"lucene_ids": "position"}}
"""ARM's BM25 as protocol ``arm`` gives it (``rbench.config.PROTOCOL_RETRIEVER_PARAMS``), by hand."""


def by_hand(dataset: dict) -> dict:
    """``dataset`` with the corpus form protocol ``arm`` gives it (``rbench.config.PROTOCOL_FORMS``), by hand."""
    adapter = ADAPTERS.get(dataset.get("adapter", dataset["name"]))
    if "form" not in adapter.Params.model_fields:
        return dataset
    return {**dataset, "params": {"form": "target", **dataset.get("params", {})}}


def named(table: str, dataset: str) -> set[str]:
    """The adapter params the table's rules for ``dataset`` name (``any_of`` and ``exact``)."""
    rules = yaml.safe_load((PUBLISHED / f"{table}.yaml").read_text())["datasets"][dataset]
    return {key.removeprefix("dataset.params.") for rule in (*rules.get("any_of", []), *rules.get("exact", []))
            for key in rule if key.startswith("dataset.params.")}


def another_adapter_setting(dataset: dict, table: str = "arm-report-table6") -> dict:
    """``dataset`` with one closed-choice param of its adapter (a ``Literal`` or ``bool`` field, or
    a free text such as a revision) changed to another value that validates under protocol ``arm``:
    one the table's rules do not name where there is one (the rule covers every setting, not a list),
    else one they name (under ``form: target`` FeTaQA and OTT-QA have no other)."""
    adapter = ADAPTERS.get(dataset.get("adapter", dataset["name"]))
    given = dataset.get("params", {})
    resolved = ExperimentConfig.model_validate({"name": "t", "protocol": "arm", "datasets": [dataset],
                                                "retrievers": [ARM_BM25]}).datasets[0].model_dump(mode="json")
    rule = named(table, dataset["name"])
    fields = sorted(adapter.Params.model_fields.items(), key=lambda item: item[0] in rule)  # unnamed first
    for name, field in fields:
        if name in given or exempt(f"dataset.params.{name}"):
            continue
        choices = (typing.get_args(field.annotation) if typing.get_origin(field.annotation) is typing.Literal
                   else (True, False) if field.annotation is bool else ("0123456789abcdef",)
                   if field.annotation is str else ())
        for value in choices:
            if value == resolved["params"][name]:  # what the protocol gives it (form target) is ARM's
                continue
            changed = {**dataset, "params": {**given, name: value}}
            try:
                ExperimentConfig.model_validate({"name": "t", "protocol": "arm", "datasets": [changed],
                                                 "retrievers": [ARM_BM25]})
            except ValueError:
                continue
            return changed
    raise AssertionError(f"{dataset['name']}: no adapter param left to change")


FAMILIES: dict[str, Any] = {
    "retriever params": lambda d: (d, {"name": "bm25", "params": {"k1": 1.2}}, {}),
    "fields": lambda d: (d, {"name": "bm25", "params": {"fields": "multifield"}}, {}),
    "adapter params": lambda d: (another_adapter_setting(d), ARM_BM25, {}),
    "sample": lambda d: (by_hand(d), BY_HAND_BM25, {**BY_HAND, "subsample": {**BY_HAND["subsample"], "seed": 7}}),
    "depth": lambda d: (by_hand(d), BY_HAND_BM25, {**BY_HAND, "depth": 50}),
    "metric settings": lambda d: (by_hand(d), BY_HAND_BM25, {**BY_HAND, "metrics": {**BY_HAND["metrics"],
                                                                                     "precision_denominator": "k"}}),
}


@pytest.mark.parametrize("benchmark", sorted(BENCHMARKS))
def test_arms_computation_is_equal_and_each_setting_family_changed_is_not(benchmark):
    base = BENCHMARKS[benchmark]
    for table in ("arm-report-table6",):  # Table 7's cells reprint Table 6's, some rounded again
        found = cells(table, base, ARM_BM25)
        assert found and {c.verdict for c in found} == {"equal"}, (table, found[0].reason if found else None)
        controls = cells(table, by_hand(base), BY_HAND_BM25, **BY_HAND)  # the base of the last three controls
        assert {c.verdict for c in controls} == {"equal"}, (table, controls[0].reason)
        for family, variant in FAMILIES.items():
            dataset, retriever, top = variant(base)
            judged = cells(table, dataset, retriever, **top)
            assert judged, (table, family)
            assert all(c.verdict != "equal" and not c.exact for c in judged), (table, family, judged[0])
            assert all(c.reason for c in judged), (table, family)  # the difference is named


BEIR_TOP = {"protocol": "trec", "depth": 1000, "metrics": {"k": [10, 100, 1000]}}
"""Pyserini's 2CR runs: 1,000 hits (``--hits 1000``), every judged query, trec_eval's measures and order of ties."""


def beir_cells(folder: Path, params: dict, retriever: dict, **top: Any) -> list[Cell]:
    """Pyserini's bm25-flat cells on NFCorpus for a run of ``retriever`` on a BEIR folder read with
    ``params``, whose per-query scores (323, or the subsample's size) average each published value exactly."""
    published = load_published("pyserini-beir-bm25")
    dataset = {"name": "nfcorpus", "adapter": "beir", "params": {"path": str(folder), **params}}
    parent, children = logged([dataset], {"label": "bm25-flat", **retriever}, **{**BEIR_TOP, **top})
    scores = {("nfcorpus", "bm25-flat"): {(metric, int(k), f"q{i}"): v for cell, v in
                                          published.values["bm25-flat"]["nfcorpus"].items()
                                          for metric, k in [cell.split("@")]
                                          for i in range(top.get("subsample", {}).get("size", 323))}}
    return [c for c in compare(published, scores, trials=20, params=children, parent=parent, settings=SETTINGS)
            if (c.system, c.dataset, c.missing) == ("bm25-flat", "nfcorpus", "")]


BEIR_FAMILIES: dict[str, tuple[dict, dict, dict]] = {  # no depth: under 1,000 it is refused (R@1000), over it
    # every cell reads the same first 1,000 hits
    "retriever params": ({}, {"name": "bm25", "params": {"b": 0.75}}, {}),
    "fields": ({}, {"name": "bm25", "params": {"fields": "multifield"}}, {}),
    "adapter params": ({"title": "sep"}, {"name": "bm25"}, {}),
    "sample": ({}, {"name": "bm25"}, {"subsample": {"size": 100}}),  # seen in the count: BEIR scores every query
    "metric settings": ({}, {"name": "bm25"}, {"metrics": {"k": [10, 100, 1000], "recall_denominator": "capped"}}),
    "ties": ({}, {"name": "bm25"}, {"protocol": "standard"}),  # equal scores in Lucene's order, not trec_eval's
}


def test_pyserinis_bm25_flat_is_equal_and_each_setting_family_changed_is_not(tmp_path):
    for name in ("corpus.jsonl", "queries.jsonl", "qrels/test.tsv"):  # the folder's layout; no file is read
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).touch()
    base = beir_cells(tmp_path, {}, {"name": "bm25"})
    assert len(base) == 3 and {c.verdict for c in base} == {"equal"}, base[0].reason
    for family, (params, retriever, top) in BEIR_FAMILIES.items():
        judged = beir_cells(tmp_path, params, retriever, **top)
        assert judged, family
        assert all(c.verdict != "equal" and not c.exact and c.reason for c in judged), (family, judged[0])
