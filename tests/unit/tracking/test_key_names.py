"""Names in MLflow metric keys are escaped reversibly (issue 81, item 6): on main the datasets ``my,data``
and ``my_data`` shared one parent metric set and ``rbench runs`` listed one system. Costs milliseconds."""

from __future__ import annotations

import re

import pytest

from rbench.tracking.names import key_part, name_of
from rbench.tracking.write import headline_metrics

MLFLOW_KEY = re.compile(r"[\w\-. /]+")  # what MLflow accepts in a metric name


@pytest.mark.parametrize("name", ["fetaqa", "beir/scifact", "dense-minilm", "my data", "my_data", "a_b_c"])
def test_plain_names_stay_as_they_are(name):
    assert key_part(name) == name


@pytest.mark.parametrize("name", ["my,data", "a.b", "x__y", "q&a:1", "50%", "tab\tle", "émoji 🙂", "__x2c_", "a_,"])
def test_other_names_are_escaped_into_one_key_part_and_back(name):
    part = key_part(name)
    assert MLFLOW_KEY.fullmatch(part) and "." not in part and part != name
    assert name_of(part) == name


def test_distinct_names_never_share_a_key():
    names = ["my,data", "my_data", "my.data", "my__data", "my__x2c_data", "my data", "my-data", "my/data"]
    assert len({key_part(n) for n in names}) == len(names)
    rows = [{"dataset": d, "retriever": "bm25", "metric": "recall", "k": 5, "value": float(i)}
            for i, d in enumerate(names)]
    keys = headline_metrics(rows)
    assert len(keys) == len(names) and all(MLFLOW_KEY.fullmatch(k) for k in keys)
    assert {tuple(name_of(p) for p in k.split(".")[:2]) for k in keys} == {(n, "bm25") for n in names}


def test_two_pairs_that_display_alike_get_two_columns_of_differing_params():
    """Dataset ``a/b`` x system ``c`` and dataset ``a`` x system ``b/c`` both read ``a/b/c``: their
    parameters were one column of the runs-compared table (issue 80, item 4), now each has its own;
    names that read alike nowhere stay plain."""
    from rbench.tracking.read import param_columns

    keys = {("a/b", "c", "k1"), ("a", "b/c", "k1"), ("a", "c", "k1"), ("", "", "depth")}
    assert param_columns(keys) == {("a/b", "c", "k1"): "'a/b'/'c': k1", ("a", "b/c", "k1"): "'a'/'b/c': k1",
                                   ("a", "c", "k1"): "a/c: k1", ("", "", "depth"): "depth"}
