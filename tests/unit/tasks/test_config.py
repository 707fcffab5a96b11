"""Bad configs fail before any work, naming the key, the value and what is allowed."""

from __future__ import annotations

import re

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
    assert cfg.retrievers[0].label == "bm25" and cfg.retrievers[0].params == {
        "k1": 0.9, "b": 0.4, "prebuilt": None, "ids": "auto", "fields": "flat", "lucene_ids": "auto"}
    assert cfg.datasets[0].params == {"split": "dev", "form": "rbench", "granularity": "row", "title": "page_section"}
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


def test_every_path_field_resolves_against_the_config_file_from_any_folder(tmp_path, monkeypatch):
    """The reproduction: a config with a BEIR folder, a prompt file, a synonyms file and a model
    folder given relative to it loads the same from another working directory."""
    import shutil

    from rbench.llm.prompts import BUILTIN

    here = tmp_path / "exp"
    (here / "beir" / "qrels").mkdir(parents=True)
    (here / "beir" / "corpus.jsonl").write_text('{"_id": "d1", "title": "T", "text": "a volcano"}\n')
    (here / "beir" / "queries.jsonl").write_text('{"_id": "q1", "text": "volcano"}\n')
    (here / "beir" / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    (here / "prompts").mkdir()
    shutil.copy(BUILTIN / "decompose.yaml", here / "prompts" / "mine.yaml")
    (here / "syn.txt").write_text("volcano: mountain\n")
    (here / "models" / "enc").mkdir(parents=True)
    (here / "models" / "enc" / "modules.json").write_text("[]")
    (here / "exp.yaml").write_text(
        "datasets:\n  - {name: b, adapter: beir, params: {path: beir}}\n"
        "retrievers:\n"
        "  - {name: decompose, params: {prompt: prompts/mine.yaml, llm: {backend: openai, base_url: 'http://x/v1', "
        "model: m}}}\n"
        "  - {name: dense, params: {model: models/enc}}\n"
        "llms: {}\n"
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    cfg = load_config(here / "exp.yaml")
    assert cfg.datasets[0].params["path"] == str(here / "beir")
    assert cfg.retrievers[0].params["prompt"] == str(here / "prompts" / "mine.yaml")
    assert cfg.retrievers[1].params["model"] == str(here / "models" / "enc")
    from rbench.retrievers.multi_query import MultiQueryParams

    params = MultiQueryParams.model_validate(
        {"synonyms": "syn.txt", "llm": {"backend": "openai", "base_url": "http://x/v1", "model": "m"},
         "cross_encoder": {"model": str(here / "models" / "enc")}}, context={"base": here})
    assert params.synonyms == str(here / "syn.txt")


def test_a_name_that_is_not_a_file_beside_the_config_stays_a_name(tmp_path):
    (tmp_path / "exp.yaml").write_text("datasets: [{name: fetaqa}]\nretrievers: [{name: dense, params: {model: minilm}}]\n")
    assert load_config(tmp_path / "exp.yaml").retrievers[0].params["model"] == "sentence-transformers/all-MiniLM-L6-v2"


def test_the_chunking_and_search_loaders_are_as_strict_as_the_experiment_loader(tmp_path):
    from rbench.config.chunking import load_grid_config
    from rbench.config.search import load_search_config

    for load in (load_grid_config, load_search_config):
        with pytest.raises(ConfigError, match="does not exist: pass the path of a YAML file"):
            load(tmp_path / "missing.yaml")
        with pytest.raises(ConfigError, match="is a folder"):
            load(tmp_path)
    twice = tmp_path / "twice.yaml"
    twice.write_text("name: a\nchunk_sizes: [100]\nname: b\n")
    with pytest.raises(ConfigError, match=r"twice.yaml:3: key 'name' appears twice"):
        load_grid_config(twice)
    twice.write_text("datasets: [{name: fetaqa}]\nretrievers: [{name: bm25}]\nsearch: {}\nsearch: {}\n")
    with pytest.raises(ConfigError, match=r"twice.yaml:4: key 'search' appears twice"):
        load_search_config(twice)
    grid = tmp_path / "sub" / "grid.yaml"
    grid.parent.mkdir()
    grid.write_text("store: st\ndata: mydata\n")
    (grid.parent / "mydata").mkdir()
    cfg = load_grid_config(grid)
    assert cfg.store == grid.parent / "st" and cfg.data == str(grid.parent / "mydata")


@pytest.mark.parametrize("command", ["show", "report"])
def test_show_and_report_honour_the_store_and_tracking_uri_of_the_environment(tmp_path, monkeypatch, capsys, command):
    from rbench.cli import main

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.setenv("RBENCH_STORE", str(tmp_path / "envstore"))
    assert main([command, "latest"]) == 2
    assert f"sqlite:///{tmp_path / 'envstore' / 'mlflow.db'}" in capsys.readouterr().err
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'other.db'}")
    assert main([command, "latest"]) == 2
    assert f"sqlite:///{tmp_path / 'other.db'}" in capsys.readouterr().err
    assert main([command, "latest", "--tracking-uri", f"sqlite:///{tmp_path / 'flag.db'}"]) == 2
    assert "flag.db" in capsys.readouterr().err


def test_chunking_and_search_take_store_and_tracking_uri_from_the_environment(tmp_path, monkeypatch):
    from rbench.config.chunking import load_grid_config
    from rbench.config.search import load_search_config

    grid = tmp_path / "grid.yaml"
    grid.write_text("store: filestore\n")
    search = tmp_path / "search.yaml"
    search.write_text("datasets: [{name: fetaqa}]\nretrievers: [{name: bm25s}]\n"
                      "search: {retriever: bm25s, space: {k1: {low: 0.5, high: 1.5}}}\n")
    assert load_grid_config(grid).store == tmp_path / "filestore"
    monkeypatch.setenv("RBENCH_STORE", str(tmp_path / "envstore"))
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://tracking:5000")
    cfg = load_grid_config(grid)
    assert cfg.store == tmp_path / "envstore" and cfg.mlflow.tracking_uri == "http://tracking:5000"
    experiment, _ = load_search_config(search)
    assert experiment.store == tmp_path / "envstore" and experiment.tracking_uri() == "http://tracking:5000"
    assert load_grid_config(grid, store=str(tmp_path / "flag")).store == tmp_path / "flag"


def test_protocol_arm_builds_bm25_under_arms_doc_n_ids_unless_the_file_says_otherwise():
    arm = {**BASE, "protocol": "arm", "retrievers": [{"name": "bm25"}, {"name": "bm25", "label": "own",
                                                                         "params": {"lucene_ids": "object_id"}}]}
    first, second = parse_config(arm).retrievers
    assert first.params["lucene_ids"] == "position" and second.params["lucene_ids"] == "object_id"
    assert parse_config(BASE).retrievers[0].params["lucene_ids"] == "auto"


@pytest.mark.parametrize("subsample", ["all", False, {"size": "all"}])
def test_every_judged_query_is_asked_for_in_words(subsample):
    cfg = parse_config({**BASE, "subsample": subsample})
    assert cfg.subsample.size == "all" and cfg.subsample.count(1406) == 1406
    assert "size" in _error({**BASE, "subsample": {"size": "every"}})


def test_a_beir_dataset_scores_every_query_unless_the_file_sets_a_size():
    unset, given = parse_config(BASE).subsample, parse_config({**BASE, "subsample": {"size": 500}}).subsample
    assert unset.for_dataset(every_query=True).count(1406) == 1406 and unset.for_dataset(False).count(1406) == 500
    assert given.for_dataset(every_query=True).count(1406) == 500
    from rbench.dataset_adapters.base import get_adapter

    assert get_adapter("beir").every_query and not get_adapter("fetaqa").every_query


def test_a_misspelt_key_names_the_key_it_is_closest_to():
    assert "datasets.0.adaptor: unknown key; did you mean 'adapter'?" in _error(
        {**BASE, "datasets": [{"name": "fetaqa", "adaptor": "fetaqa"}]})
    assert "subsample.sise: unknown key; did you mean 'size'?" in _error({**BASE, "subsample": {"sise": 3}})
    assert "params.splitt: unknown key; did you mean 'split'?" in _error(
        {**BASE, "datasets": [{"name": "fetaqa", "params": {"splitt": "dev"}}]})
    assert "zzz: unknown key; remove it or check its spelling" in _error({**BASE, "zzz": 1})  # nothing close


def test_a_beir_folder_that_is_not_there_is_named_as_missing(tmp_path):
    msg = _error({**BASE, "datasets": [{"name": "b", "adapter": "beir", "params": {"path": str(tmp_path / "nope")}}]})
    assert f"BEIR folder {tmp_path / 'nope'} does not exist" in msg
    (tmp_path / "empty").mkdir()
    msg = _error({**BASE, "datasets": [{"name": "b", "adapter": "beir", "params": {"path": str(tmp_path / "empty")}}]})
    assert "lacks ['corpus.jsonl', 'queries.jsonl']" in msg


def test_the_parent_runs_headline_measures_are_configured_and_checked():
    from rbench.config import MlflowConfig
    from rbench.tracking.write import headline_metrics

    rows = [{"dataset": "d", "retriever": "bm25", "metric": m, "k": k, "value": v}
            for m, k, v in (("recall", 5, 0.5), ("recall", 10, 0.6), ("ndcg", 10, 0.4), ("map", 0, 0.3), ("map", 5, 0.2))]
    assert headline_metrics(rows) == {"d.bm25.recall_at_5": 0.5, "d.bm25.recall_at_10": 0.6, "d.bm25.ndcg_at_10": 0.4}
    chosen = MlflowConfig(headline=["recall@10", "map@all"]).headline
    assert headline_metrics(rows, chosen) == {"d.bm25.recall_at_10": 0.6, "d.bm25.map": 0.3}
    for bad in ("P@10", "recall@0", "recall@x"):
        with pytest.raises(ValueError, match=f"headline measure '{re.escape(bad)}' must be one of precision, recall"):
            MlflowConfig(headline=[bad])


def test_the_standard_measures_a_config_takes_are_the_evaluations():
    """``metrics.standard`` is a ``Literal`` (for the schema and the type checker), spelt out once more than
    :data:`rbench.evaluation.names.STANDARD`: the two agree, in order."""
    from typing import get_args

    from rbench.config import MetricsConfig
    from rbench.evaluation.names import STANDARD

    (choice,) = get_args(MetricsConfig.model_fields["standard"].annotation)
    assert get_args(choice) == STANDARD


def test_a_misspelt_closed_choice_names_the_closest_one():
    """Issue 81, item 7: ``mapp`` for a measure, ``targt`` for an adapter's form said only what is allowed."""
    msg = _error({**BASE, "metrics": {"standard": ["mapp"], "precision_denominator": "retreived"},
                  "datasets": [{"name": "fetaqa", "params": {"form": "targt"}}]})
    assert "metrics.standard.0: Input should be 'map', 'success' or 'rprec'; did you mean 'map'? (got 'mapp')" in msg
    assert "did you mean 'retrieved'? (got 'retreived')" in msg
    assert "params.form: Input should be 'rbench' or 'target'; did you mean 'target'? (got 'targt')" in msg
    assert "did you mean" not in _error({**BASE, "metrics": {"standard": ["zzzz"]}})  # nothing close: no guess
