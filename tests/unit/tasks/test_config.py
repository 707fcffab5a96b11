"""Bad configs fail before any work, naming the key, the value and what is allowed."""

from __future__ import annotations

import pytest

from rbench.config import load_config, parse_config
from rbench.core.errors import ConfigError
from tests.conftest import tiny_dataset

BASE = {"datasets": [{"name": "fetaqa"}], "retrievers": [{"name": "bm25"}]}


def _error(raw: dict) -> str:
    with pytest.raises(ConfigError) as e:
        parse_config(raw)
    return str(e.value)


def test_valid_config_fills_defaults(tmp_path):
    cfg = parse_config({**BASE, "store": "s"}, base=tmp_path)
    assert cfg.metrics.k == [1, 3, 5, 10] and cfg.subsample.size == 500
    assert cfg.retrievers[0].label == "bm25" and cfg.retrievers[0].params == {"k1": 0.9, "b": 0.4}
    assert cfg.datasets[0].params == {"split": "dev", "granularity": "row", "title": "page_section"}
    assert cfg.store == tmp_path / "s"


def test_unknown_top_level_key():
    msg = _error({**BASE, "retreivers": []})
    assert "retreivers" in msg and "unknown key" in msg


def test_unknown_retriever_lists_known_ones():
    msg = _error({**BASE, "retrievers": [{"name": "bm52"}]})
    assert "bm52" in msg and "bm25" in msg and "dense" in msg


def test_unknown_dataset_adapter():
    msg = _error({**BASE, "datasets": [{"name": "nope"}]})
    assert "nope" in msg and "fetaqa" in msg and "jsonl" in msg


def test_bad_retriever_param_values():
    msg = _error({**BASE, "retrievers": [{"name": "bm25", "params": {"b": 3}}]})
    assert "params.b" in msg and "less than or equal to 1" in msg and "3" in msg
    msg = _error({**BASE, "retrievers": [{"name": "bm25", "params": {"kl": 1}}]})
    assert "params.kl" in msg and "unknown key" in msg


def test_unknown_model_name():
    msg = _error({**BASE, "retrievers": [{"name": "dense", "params": {"model": "no-such-model"}}]})
    assert "no-such-model" in msg and "sentence-transformers/all-MiniLM-L6-v2" in msg


def test_bad_granularity_and_k_and_depth():
    assert "granularity" in _error({**BASE, "datasets": [{"name": "fetaqa", "params": {"granularity": "rows"}}]})
    assert "metrics.k.0" in _error({**BASE, "metrics": {"k": [0]}})
    msg = _error({**BASE, "depth": 5, "metrics": {"k": [10]}})
    assert "depth 5" in msg and "10" in msg


def test_duplicate_labels():
    msg = _error({**BASE, "retrievers": [{"name": "bm25"}, {"name": "bm25"}]})
    assert "duplicate retriever label" in msg


def test_jsonl_missing_file_and_bad_chunker(tmp_path, tiny_files):
    corpus, queries = tiny_files
    ds = tiny_dataset(corpus, tmp_path / "missing.jsonl")
    msg = _error({**BASE, "datasets": [ds]})
    assert "missing.jsonl" in msg and "does not exist" in msg
    ds = tiny_dataset(corpus, queries)
    ds["params"]["chunker"] = {"size": 10, "overlap": 10}
    assert "overlap 10" in _error({**BASE, "datasets": [ds]})


def test_load_config_file_errors(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "absent.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("datasets: [unclosed")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(bad)
    bad.write_text("- just a list")
    with pytest.raises(ConfigError, match="must be a YAML mapping"):
        load_config(bad)


def test_relative_paths_resolve_against_the_config_file(tmp_path, tiny_files):
    corpus, queries = tiny_files
    (tmp_path / "exp.yaml").write_text(
        "store: st\ndatasets:\n  - name: t\n    adapter: jsonl\n    params:\n"
        f"      corpus: {corpus.name}\n      queries: {queries.name}\n"
        "retrievers:\n  - name: bm25\n"
    )
    cfg = load_config(tmp_path / "exp.yaml")
    assert cfg.store == tmp_path / "st"
    assert cfg.datasets[0].params["corpus"] == str(corpus)


def test_sweep_expands_datasets_with_that_parameter(tmp_path, tiny_files):
    corpus, queries = tiny_files
    cfg = parse_config({**BASE, "sweep": {"granularity": ["table", "row"]},
                        "datasets": [{"name": "fetaqa"}, tiny_dataset(corpus, queries)]})
    assert [d.name for d in cfg.datasets] == ["fetaqa[granularity=table]", "fetaqa[granularity=row]", "tiny"]
    assert cfg.datasets[0].adapter == "fetaqa" and cfg.datasets[0].params["granularity"] == "table"
    assert "no dataset or retriever has a parameter 'granularity'" in _error(
        {**BASE, "sweep": {"granularity": ["row"]}, "datasets": [tiny_dataset(corpus, queries)]})
    assert "granularity" in _error({**BASE, "sweep": {"granularity": ["rows"]}})


def test_sweep_expands_retrievers_with_that_parameter_into_a_grid(tmp_path, tiny_files):
    corpus, queries = tiny_files
    cfg = parse_config({**BASE, "datasets": [tiny_dataset(corpus, queries)],
                        "sweep": {"query_weighting": ["unique", "tf"], "stemmer": ["english", "none"]},
                        "retrievers": [{"name": "bm25s", "label": "b"}, {"name": "dense", "params": {"model": "static-64d"}}]})
    assert [r.label for r in cfg.retrievers] == [
        "b[query_weighting=unique][stemmer=english]", "b[query_weighting=unique][stemmer=none]",
        "b[query_weighting=tf][stemmer=english]", "b[query_weighting=tf][stemmer=none]", "dense"]
    assert cfg.retrievers[3].params["query_weighting"] == "tf" and cfg.retrievers[3].params["stemmer"] == "none"
