"""Bad input gets one named error (the value, the user's file and line, the fix) or a counted
warning, before work where it can, and never leaves a partial artifact."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest
import yaml

from rbench.config import load_config
from rbench.core.errors import ConfigError, DataError
from rbench.core.secrets import redact
from rbench.core.store import Store
from rbench.tasks.download import DOWNLOAD, DownloadConfig
from rbench.tasks.prepare import PREPARE
from tests.conftest import CORPUS, QUERIES, tiny_dataset

SECRET = "s3cr3t-pa55"


def _config(tmp_path: Path, tiny_files, **overrides) -> dict:
    corpus, queries = tiny_files
    cfg = {"store": str(tmp_path / "store"), "depth": 10, "datasets": [tiny_dataset(corpus, queries)],
           "retrievers": [{"name": "bm25s"}]}
    for key, value in overrides.items():
        target = cfg
        *path, last = key.split(".")
        for part in path:
            target = target.setdefault(part, {})
        target[last] = value
    return cfg


CONFIG_CASES = {
    "depth-bool": ({"depth": True}, "depth", "got True"),
    "depth-zero": ({"depth": 0}, "depth", "greater than 0"),
    "depth-text": ({"depth": "ten"}, "depth", "'ten'"),
    "depth-float": ({"depth": 10.5}, "depth", "10.5"),
    "depth-below-k": ({"depth": 2}, "depth 2", "largest k"),
    "seed-negative": ({"subsample.seed": -1}, "subsample.seed", "-1"),
    "seed-beyond-32-bits": ({"subsample.seed": 2**40}, "subsample.seed", "less than 4294967296"),
    "mlflow-experiment-empty": ({"mlflow.experiment": ""}, "mlflow.experiment", "at least 1"),
    "mlflow-experiment-blank": ({"mlflow.experiment": "  "}, "mlflow.experiment", "pattern"),
    "jsonl-corpus-is-a-folder": ({"datasets": [{"name": "mine", "adapter": "jsonl", "params": {
        "corpus": "/tmp", "queries": "/tmp"}}]}, "/tmp is a folder", "JSONL file"),
    "beir-split-is-a-path": ({"datasets": [{"name": "b", "adapter": "beir", "params": {
        "path": "/nope", "split": "../../x"}}]}, "'../../x'", "not a path"),
    "size-bool": ({"subsample.size": True}, "subsample.size", "got True"),
    "size-zero": ({"subsample.size": 0}, "subsample.size", "greater than 0"),
    "recall-denominator-unknown": ({"metrics.recall_denominator": "pooled"}, "recall_denominator", "'pooled'"),
    "dataset-name-leaves-the-folder": ({"datasets": [{"name": "../../x", "adapter": "fetaqa"}]}, "'../../x'",
                                       "neither empty, '.' nor '..'"),
    "retriever-label-empty-part": ({"retrievers": [{"name": "bm25s", "label": "a//b"}]}, "'a//b'", "'/'-separated"),
    "experiment-name-control-character": ({"name": "exp\tone"}, "name", "printable"),
    "mlflow-experiment-backslash": ({"mlflow.experiment": "a\\b"}, "mlflow.experiment", "backslashes"),
    "dataset-empty-name": ({"datasets": [{"name": "", "adapter": "fetaqa"}]}, "datasets.0.name", "at least 1"),
    "k-empty": ({"metrics.k": []}, "metrics.k", "at least 1"),
    "k-zero": ({"metrics.k": [0]}, "metrics.k", "greater than 0"),
    "k-bool": ({"metrics.k": [True]}, "metrics.k", "got True"),
    "precision-unknown": ({"metrics.precision_denominator": "all"}, "precision_denominator", "'all'"),
    "tracking-scheme": ({"mlflow.tracking_uri": "foo://bar"}, "foo://bar", "http://"),
    "runner-unknown": ({"execution.runner": "spark"}, "execution.runner", "'spark'"),
    "address-without-cluster": ({"execution.address": "tcp://x:8786"}, "tcp://x:8786", "dask"),
    "gpus-negative": ({"execution.gpus": -1}, "execution.gpus", "-1"),
    "shard-size-zero": ({"execution.shard_size": 0}, "execution.shard_size", "greater than 0"),
    "workers-bool": ({"execution.max_workers": True}, "execution.max_workers", "got True"),
    "unknown-top-key": ({"retreivers": []}, "retreivers", "unknown key"),
    "unknown-retriever": ({"retrievers": [{"name": "bm26"}]}, "bm26", "known retrievers"),
    "retriever-misspelt": ({"retrievers": [{"name": "bm-25"}]}, "'bm-25'", "Did you mean 'bm25'?"),
    "plugin-not-installed": ({"retrievers": [{"name": "tfidf"}]}, "'tfidf'", "installed in the Python running rbench"),
    "dataset-misspelt": ({"datasets": [{"name": "FetaQA"}]}, "'FetaQA'", "Did you mean 'fetaqa'?"),
    "unknown-retriever-param": ({"retrievers": [{"name": "bm25s", "params": {"k3": 1}}]}, "params.k3", "unknown key"),
    "retriever-param-range": ({"retrievers": [{"name": "dense", "params": {"min_score": 2}}]}, "min_score", "2"),
    "unknown-model": ({"retrievers": [{"name": "dense", "params": {"model": "no-such-model"}}]}, "no-such-model", "hub id"),
    "rerank-missing-folder": ({"retrievers": [{"name": "rerank", "params": {"model": "/nope/ce"}}]}, "/nope/ce", "folder"),
    "fusion-unknown-component": ({"retrievers": [{"name": "fusion", "params": {"retrievers": [{"name": "x"}, {"name": "bm25s"}]}}]}, "'x'", "known retrievers"),
    "duplicate-labels": ({"retrievers": [{"name": "bm25s"}, {"name": "bm25s"}]}, "bm25s", "unique"),
    "unknown-adapter": ({"datasets": [{"name": "nosuch"}]}, "nosuch", "adapter"),
    "dataset-unknown-param": ({"datasets": [{"name": "fetaqa", "params": {"splits": "test"}}]}, "params.splits", "unknown key"),
    "dataset-unknown-split": ({"datasets": [{"name": "fetaqa", "params": {"split": "validation"}}]}, "params.split", "'dev', 'test' or 'train'"),
    "dataset-bad-granularity": ({"datasets": [{"name": "fetaqa", "params": {"granularity": "page"}}]}, "'page'", "row"),
    "jsonl-missing-file": ({"datasets": [{"name": "mine", "adapter": "jsonl", "params": {"corpus": "/nope.jsonl", "queries": "/nope.jsonl"}}]}, "/nope.jsonl", "does not exist"),
    "max-missing-gold-range": ({"datasets": [{"name": "fetaqa", "max_missing_gold": 1.5}]}, "max_missing_gold", "1.5"),
    "sweep-not-list": ({"sweep": {"granularity": "row"}}, "sweep.granularity", "list"),
    "sweep-no-target": ({"sweep": {"nothing": [1, 2]}}, "nothing", "no dataset"),
    "empty-datasets": ({"datasets": []}, "datasets", "at least 1"),
    "empty-retrievers": ({"retrievers": []}, "retrievers", "at least 1"),
    "llm-unknown-name": ({"retrievers": [{"name": "decompose", "params": {"llm": "big"}}]}, "'big'", "llms:"),
    "llm-unknown-backend": ({"llms": {"x": {"backend": "ollama", "model": "m"}}}, "llms.x", "'openai'"),
    "llm-key-instead-of-its-name": ({"llms": {"x": {"backend": "openai", "model": "m", "api_key_env": "sk-" + SECRET}}},
                                    "api_key_env", "*name* of an environment variable"),
    "llm-field-of-another-backend": ({"llms": {"x": {"backend": "transformers", "model": "m", "tensor_parallel_size": 2}}},
                                     "tensor_parallel_size", "do not apply"),
    "llm-url-without-scheme": ({"llms": {"x": {"backend": "openai", "model": "m", "base_url": "localhost:8000"}}},
                               "localhost:8000", "http://"),
    "llm-inline-key-instead-of-its-name": (
        {"retrievers": [{"name": "decompose", "params": {"llm": {"backend": "openai", "model": "m",
                                                                 "api_key_env": "sk-" + SECRET}}}]},
        "params.llm.api_key_env", "*name* of an environment variable"),
    "decompose-unknown-merge": ({"llms": {"s": {"backend": "openai", "model": "m"}}, "retrievers": [
        {"name": "decompose", "params": {"llm": "s", "merge": "max"}}]}, "'max'", "rrf"),
    "llm-rerank-step-not-below-window": ({"llms": {"s": {"backend": "openai", "model": "m"}}, "retrievers": [
        {"name": "llm_rerank", "params": {"llm": "s", "window": 10, "step": 10}}]}, "step 10", "smaller than window"),
    "prompt-file-missing": ({"llms": {"s": {"backend": "openai", "model": "m"}}, "retrievers": [
        {"name": "decompose", "params": {"llm": "s", "prompt": "/nope/prompt.yaml"}}]}, "/nope/prompt.yaml", "built-in"),
    "synonyms-file-missing": ({"llms": {"s": {"backend": "openai", "model": "m"}}, "retrievers": [
        {"name": "multi_query", "params": {"llm": "s", "synonyms": "/nope/syn.txt", "cross_encoder": {"model": "a/b"}}}]},
        "/nope/syn.txt", "wordnet"),
    "multi-query-keep-above-candidates": ({"llms": {"s": {"backend": "openai", "model": "m"}}, "retrievers": [
        {"name": "multi_query", "params": {"llm": "s", "ce_keep": 700, "cross_encoder": {"model": "a/b"}}}]},
        "ce_keep 700", "larger than ce_candidates"),
}


@pytest.mark.parametrize("overrides, value, fix", CONFIG_CASES.values(), ids=CONFIG_CASES.keys())
def test_bad_config_values_are_named_before_any_work(tmp_path, tiny_files, overrides, value, fix):
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(_config(tmp_path, tiny_files, **overrides)))
    with pytest.raises(ConfigError) as e:
        load_config(path)
    assert value in str(e.value) and fix in str(e.value)
    assert SECRET not in str(e.value)
    assert not (tmp_path / "store").exists()


@pytest.mark.parametrize("text, what", [
    ("user: [unclosed\n", "not valid YAML"),
    ("system: hi\n", "needs a 'user' template"),
    ("user: 'Q: {question}'\nexamples: [{user: a}]\n", "example 1 must have exactly"),
    ("user: 'Q: {question}'\ntemperature: 0\n", "unknown keys ['temperature']"),
    ("user: 'Q: the question'\n", "must contain ['{question}']"),
])
def test_a_bad_prompt_file_is_named(tmp_path, tiny_files, text, what):
    prompt = tmp_path / "prompt.yaml"
    prompt.write_text(text)
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(_config(tmp_path, tiny_files, llms={"s": {"backend": "openai", "model": "m"}},
                                           retrievers=[{"name": "decompose", "params": {"llm": "s", "prompt": str(prompt)}}])))
    with pytest.raises(ConfigError) as e:
        load_config(path)
    assert str(prompt) in str(e.value) and what in str(e.value)


def test_a_bad_synonyms_line_is_named_with_file_and_line(tmp_path, tiny_files):
    synonyms = tmp_path / "synonyms.txt"
    synonyms.write_text("# term: synonyms\ncar: automobile, motorcar\nbicycle bike\n")
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(_config(tmp_path, tiny_files, llms={"s": {"backend": "openai", "model": "m"}},
                                           retrievers=[{"name": "multi_query", "params": {
                                               "llm": "s", "synonyms": str(synonyms), "cross_encoder": {"model": "a/b"}}}])))
    with pytest.raises(ConfigError, match=rf"{synonyms}:3: expected 'term: synonym, synonym', got 'bicycle bike'"):
        load_config(path)


FILE_CASES = {
    "duplicate-top-key": ("datasets: []\nretrievers: [{name: bm25}]\nretrievers: [{name: bm25s}]\n",
                          "'retrievers' appears twice", ":3"),
    "duplicate-nested-key": ("depth: 5\nsubsample:\n  size: 3\n  size: 4\n", "'size' appears twice", ":4"),
    "not-a-mapping": ("- a\n- b\n", "must be a YAML mapping", "list"),
    "bad-yaml": ("depth: [1, 2\n", "not valid YAML", "line"),
    "empty-file": ("", "must be a YAML mapping", "NoneType"),
}


@pytest.mark.parametrize("text, what, where", FILE_CASES.values(), ids=FILE_CASES.keys())
def test_bad_config_files_are_named_with_their_line(tmp_path, text, what, where):
    path = tmp_path / "exp.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as e:
        load_config(path)
    assert what in str(e.value) and where in str(e.value) and str(path) in str(e.value)


def test_a_config_that_is_not_utf8_is_named(tmp_path):
    path = tmp_path / "exp.yaml"
    path.write_bytes(b"name: caf\xe9\n")
    with pytest.raises(ConfigError, match=r"not UTF-8"):
        load_config(path)


def test_a_config_with_a_byte_order_mark_is_read(tmp_path, tiny_files):
    path = tmp_path / "exp.yaml"
    path.write_bytes(b"\xef\xbb\xbf" + yaml.safe_dump(_config(tmp_path, tiny_files)).encode())
    assert load_config(path).depth == 10


def test_a_missing_config_file_is_named(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "nope.yaml")


def test_a_password_in_a_bad_tracking_uri_is_not_repeated(tmp_path, tiny_files):
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(_config(tmp_path, tiny_files, **{"mlflow.tracking_uri": f"htp://me:{SECRET}@host"})))
    with pytest.raises(ConfigError) as e:
        load_config(path)
    assert SECRET not in str(e.value) and "me:***@host" in str(e.value)


@pytest.mark.parametrize("uri, shown", [
    (f"http://user:{SECRET}@mlflow:5000", "http://user:***@mlflow:5000"),
    (f"postgresql+psycopg2://u:{SECRET}@db/mlflow", "postgresql+psycopg2://u:***@db/mlflow"),
    ("http://mlflow:5000", "http://mlflow:5000"),
    ("sqlite:////data/mlflow.db", "sqlite:////data/mlflow.db"),
])
def test_redact_hides_passwords_only(uri, shown):
    assert redact(uri) == shown and redact(f"at {uri} failed") == f"at {shown} failed"


def _prepare(tmp_path: Path, corpus_lines: list | bytes, queries_lines: list | bytes, max_missing_gold: float = 0.5,
             **params):
    corpus, queries = tmp_path / "c.jsonl", tmp_path / "q.jsonl"
    for path, lines in ((corpus, corpus_lines), (queries, queries_lines)):
        if isinstance(lines, bytes):
            path.write_bytes(lines)
        else:
            path.write_text("".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines))
    dataset = tiny_dataset(corpus, queries)
    dataset["params"].update(params)
    dataset["max_missing_gold"] = max_missing_gold
    from rbench.config import DatasetConfig

    ds = DatasetConfig.model_validate(dataset)
    store = Store(tmp_path / "store")
    raw = DOWNLOAD.run(store, [], DownloadConfig.of(ds))
    return PREPARE.run(store, [raw], ds)


def _no_partial_prepare(tmp_path: Path) -> bool:
    folder = tmp_path / "store" / "prepare"
    return not folder.exists() or [p.name for p in folder.iterdir()] in ([], [".locks"])


Q = QUERIES
DATA_CASES = {
    "text-null": ([{**CORPUS[0], "object": None}, *CORPUS[1:]], Q, "c.jsonl:1", "'object'"),
    "text-list": ([*CORPUS[:2], {**CORPUS[2], "object": ["a"]}, *CORPUS[3:]], Q, "c.jsonl:3", "not text"),
    "doc-field-null": ([{**CORPUS[0], "source": None}, *CORPUS[1:]], Q, "c.jsonl:1", "'source'"),
    "doc-field-missing": ([{k: v for k, v in CORPUS[0].items() if k != "source"}, *CORPUS[1:]], Q, "c.jsonl:1", "no field 'source'"),
    "query-id-null": (CORPUS, [{**Q[0], "query_id": None}, *Q[1:]], "q.jsonl:1", "'query_id'"),
    "query-text-missing": (CORPUS, [*Q[:1], {k: v for k, v in Q[1].items() if k != "query"}, *Q[2:]], "q.jsonl:2", "no field 'query'"),
    "query-text-null": (CORPUS, [{**Q[0], "query": None}, *Q[1:]], "q.jsonl:1", "not text"),
    "gold-number": (CORPUS, [{**Q[0], "document_ids": 3}, *Q[1:]], "q.jsonl:1", "list of document ids"),
    "gold-list-of-numbers": (CORPUS, [{**Q[0], "document_ids": [1, 2]}, *Q[1:]], "q.jsonl:1", "list of document ids"),
    "all-gold-empty": (CORPUS, [{**q, "document_ids": []} for q in Q], "5 queries", "empty gold list"),
    "gold-not-in-corpus": (CORPUS, [{**q, "document_ids": ["Nowhere :: x"]} for q in Q], "5 of 5 queries", "gold ids match"),
    "duplicate-query-ids": (CORPUS, [Q[0], Q[0]], "'q1'", "appears twice"),
    "query-id-empty": (CORPUS, [*Q[:2], {**Q[2], "query_id": " "}, *Q[3:]], "q.jsonl:3", "empty query id"),
    "malformed-json": ([json.dumps(CORPUS[0]), "{not json", *map(json.dumps, CORPUS[1:])], Q, "c.jsonl:2", "not valid JSON"),
    "line-is-array": ([json.dumps(CORPUS[0]), "[1, 2]"], Q, "c.jsonl:2", "JSON object"),
    "not-utf8": (json.dumps(CORPUS[0]).encode() + b"\n" + json.dumps(CORPUS[1]).replace("Andy", "And\\u00ff").encode()
                 .replace(b"\\u00ff", b"\xff") + b"\n", Q, "c.jsonl:2", "not UTF-8"),
    "gzip-without-gz": (gzip.compress(json.dumps(CORPUS[0]).encode() + b"\n"), Q, "c.jsonl",
                        "gzip-compressed, not JSON lines"),
    "empty-corpus": (["", "   "], Q, "empty corpus", "field names"),
    "no-queries": (CORPUS, [""], "no queries in ", "q.jsonl"),
    "all-texts-empty": ([{**c, "object": "  "} for c in CORPUS], Q, "empty corpus", "field names"),
}


@pytest.mark.parametrize("corpus, queries, where, what", DATA_CASES.values(), ids=DATA_CASES.keys())
def test_bad_data_is_named_with_the_users_file_and_line(tmp_path, corpus, queries, where, what):
    with pytest.raises(DataError) as e:
        _prepare(tmp_path, corpus, queries)
    message = str(e.value)
    assert where in message and what in message, message
    assert "/store/" not in message  # the user's file, not the store's copy
    assert _no_partial_prepare(tmp_path)


def test_an_empty_document_id_is_named_with_its_line(tmp_path):
    corpus = [*CORPUS[:3], {**CORPUS[3], "page_title": ""}, *CORPUS[4:]]
    with pytest.raises(DataError, match=r"c\.jsonl:4: empty document id"):
        _prepare(tmp_path, corpus, QUERIES, doc_id_fields=["page_title"])
    assert _no_partial_prepare(tmp_path)


def _beir(tmp_path: Path, corpus: list[dict]) -> Path:
    folder = tmp_path / "beir"
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in corpus))
    (folder / "queries.jsonl").write_text(json.dumps({"_id": "q1", "text": "volcano lava"}) + "\n")
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    return folder


def _prepare_beir(tmp_path: Path, folder: Path):
    from rbench.config import DatasetConfig

    ds = DatasetConfig.model_validate({"name": "b", "adapter": "beir", "params": {"path": str(folder)}})
    store = Store(tmp_path / "store")
    return PREPARE.run(store, [DOWNLOAD.run(store, [], DownloadConfig.of(ds))], ds)


@pytest.mark.parametrize("corpus, where, what", [
    ([{"_id": "d1", "text": "lava"}, {"_id": "d2", "title": "t", "text": None}], "corpus.jsonl:2", "'text' is null"),
    ([{"_id": "d1", "text": "lava"}, {"_id": "d2", "text": "ash"}, {"_id": "d1", "text": "rock"}],
     "corpus.jsonl:1 and ", "share the document id 'd1' and position 0: an object's position is its place"),
    ([{"_id": "", "text": "lava"}], "corpus.jsonl:1", "empty document id"),
], ids=["text-null", "id-shared", "id-empty"])
def test_bad_beir_records_are_named_with_their_line(tmp_path, corpus, where, what):
    with pytest.raises(DataError) as e:
        _prepare_beir(tmp_path, _beir(tmp_path, corpus))
    assert where in str(e.value) and what in str(e.value) and "/store/" not in str(e.value)
    assert _no_partial_prepare(tmp_path)


def test_beir_qrels_of_queries_not_in_the_folder_are_counted_and_named(tmp_path, caplog):
    """Issue 68, notes: on the main of 6e8e733 these judgements were dropped without a word."""
    folder = _beir(tmp_path, [{"_id": "d1", "text": "lava"}, {"_id": "d2", "text": "ash"}])
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\nq9\td2\t1\nq9\td1\t1\n")
    assert _prepare_beir(tmp_path, folder).info["queries"] == 1
    assert any("1 queries of the qrels (such as 'q9') are not in queries.jsonl: their 2 judgements" in r.getMessage()
               for r in caplog.records)


def test_blank_queries_are_counted_and_named(tmp_path, caplog):
    queries = [*Q[:4], {**Q[4], "query": "   "}]
    info = _prepare(tmp_path, CORPUS, queries).info
    assert info["blank_queries"] == 1 and info["queries"] == len(Q)
    assert any("1 queries are blank" in r.getMessage() and Q[4]["query_id"] in r.getMessage() for r in caplog.records)


def test_max_missing_gold_refuses_without_entering_the_key(tmp_path):
    queries = [*Q[:2], *({**q, "document_ids": ["Nowhere :: x"]} for q in Q[2:])]  # 3 of 5 without gold
    with pytest.raises(DataError, match=r"3 of 5 queries \(60%\).*allowed: 50%.*max_missing_gold"):
        _prepare(tmp_path, CORPUS, queries)
    (built,) = [p for p in (tmp_path / "store" / "prepare").iterdir() if not p.name.startswith(".")]
    lax = _prepare(tmp_path, CORPUS, queries, max_missing_gold=0.6)  # the table is complete: reused, not rebuilt
    assert lax.path == built and not lax.built and lax.info["queries_without_gold_in_corpus"] == 3


def test_counted_warnings_tell_the_truth(tmp_path):
    corpus = [*CORPUS, CORPUS[0], {**CORPUS[1], "object": ""}]  # a repeated record and an empty text
    queries = [*QUERIES, {"query_id": "q6", "query": "anything?", "document_ids": []}]
    info = _prepare(tmp_path, corpus, queries).info
    assert info["duplicate_records"] == 1 and info["empty_texts_skipped"] == 1
    assert info["queries_with_empty_gold"] == 1 and info["objects"] == len(CORPUS) + 1


def test_a_byte_order_mark_in_a_data_file_is_accepted(tmp_path):
    text = "".join(json.dumps(c) + "\n" for c in CORPUS).encode()
    info = _prepare(tmp_path, b"\xef\xbb\xbf" + text, QUERIES).info
    assert info["objects"] == len(CORPUS)


def test_preflight_names_an_unknown_llm_and_an_unset_api_key(tmp_path, tiny_files, monkeypatch):
    from rbench.experiment import preflight

    monkeypatch.delenv("RBENCH_NO_SUCH_KEY", raising=False)
    for llm, what in (({"backend": "transformers", "model": "no-such-llm"}, "unknown LLM 'no-such-llm'"),
                      ({"backend": "openai", "model": "m", "api_key_env": "RBENCH_NO_SUCH_KEY"},
                       "RBENCH_NO_SUCH_KEY (api_key_env of LLM 'm') is not set")):
        path = tmp_path / "exp.yaml"
        path.write_text(yaml.safe_dump(_config(tmp_path, tiny_files, llms={"s": llm}, retrievers=[
            {"name": "decompose", "params": {"llm": "s", "first_stage": {"name": "bm25s"}}}])))
        with pytest.raises(ConfigError, match=re.escape(what)):
            preflight(load_config(path))


def test_preflight_names_an_unreachable_model_and_an_unwritable_store(tmp_path, tiny_files, monkeypatch):
    from rbench.experiment import preflight, resolve_experiment

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(_config(tmp_path, tiny_files, retrievers=[
        {"name": "dense", "params": {"model": "someorg/not-downloaded"}}])))
    with pytest.raises(ConfigError, match="someorg/not-downloaded.*local-dir"):
        preflight(resolve_experiment(str(path), None))
    a_file = tmp_path / "a-file"
    a_file.write_text("not a folder")
    path.write_text(yaml.safe_dump(_config(tmp_path, tiny_files, store=str(a_file / "store"))))
    with pytest.raises(ConfigError, match="a-file/store is not writable"):
        preflight(resolve_experiment(str(path), None))
    path.write_text(yaml.safe_dump(_config(tmp_path, tiny_files, **{"mlflow.tracking_uri": f"sqlite:///{a_file}/m.db"})))
    with pytest.raises(ConfigError, match="a-file cannot be created.*tracking_uri"):
        preflight(resolve_experiment(str(path), None))


def test_preflight_names_a_tracking_server_that_does_not_answer(tmp_path, tiny_files, caplog):
    from rbench.experiment import check_tracking

    check_tracking(f"http://user:{SECRET}@127.0.0.1:9")
    assert "127.0.0.1:9 does not answer" in caplog.text and "rbench log" in caplog.text
    assert SECRET not in caplog.text


def test_the_cli_prints_one_line_for_a_user_error(tmp_path, capsys):
    from rbench.cli import main

    path = tmp_path / "exp.yaml"
    path.write_text("depth: 5\ndepth: 6\n")
    assert main(["run", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "appears twice" in err and "Traceback" not in err


def _fetaqa_from(mirror: Path):
    from rbench.config import DatasetConfig

    ds = DatasetConfig(name="fetaqa")
    return DOWNLOAD.run(Store(mirror.parent / "store"), [], DownloadConfig.of(ds), mirror=mirror)


def test_a_folder_where_the_mirror_should_hold_a_file_is_named(tmp_path):
    from rbench.dataset_adapters.fetaqa import DEV

    (tmp_path / "mirror" / DEV.name).mkdir(parents=True)
    with pytest.raises(DataError, match=r"is a folder, but .* is a file"):
        _fetaqa_from(tmp_path / "mirror")
    assert not list((tmp_path / "store" / "download").glob(".tmp-*"))


def test_a_mirror_file_with_other_content_is_named_with_both_digests(tmp_path):
    from rbench.core.errors import ChecksumError
    from rbench.dataset_adapters.fetaqa import DEV

    (tmp_path / "mirror" / DEV.name).parent.mkdir(parents=True)
    (tmp_path / "mirror" / DEV.name).write_text("{}\n")
    with pytest.raises(ChecksumError, match=r"checksum mismatch for .*expected sha256 [0-9a-f]{64}, got [0-9a-f]{64}"):
        _fetaqa_from(tmp_path / "mirror")


def test_a_child_failing_as_on_a_full_disk_while_creating_the_mlflow_database_keeps_its_cause(tmp_path, monkeypatch):
    import sys

    from rbench.core.errors import RbenchError
    from rbench.tracking.backend import prepare_tracking

    full = tmp_path / "python-on-a-full-disk"  # the child that creates the database, failing as it does then
    full.write_text("#!/bin/sh\necho 'Traceback ...' >&2\necho 'sqlite3.OperationalError: database or disk is full' >&2\n"
                    "echo '  (Background on this error at: https://sqlalche.me/e/20/e3q8)' >&2\nexit 1\n")
    full.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(full))
    monkeypatch.setenv("RBENCH_CACHE", str(tmp_path / "cache"))  # no empty database made before to copy
    with pytest.raises(RbenchError, match="could not create the MLflow database .*: sqlite3.OperationalError: "
                                          "database or disk is full$"):
        prepare_tracking(f"sqlite:///{tmp_path / 'mlflow.db'}")
    assert not list(tmp_path.glob(".mlflow.db.*.tmp")) and not list(tmp_path.rglob("*.tmp"))


@pytest.mark.parametrize("status, body, expected", [
    (401, "Unauthorized", "refuses the token given .*wrong"),
    (403, '{"error_code": "PERMISSION_DENIED", "message": "Permission denied"}', "refuses access to experiment 'exp'"),
    (403, "Invalid Host header - possible DNS rebinding attack detected", "--allowed-hosts listing 127.0.0.1:"),
])
def test_preflight_asks_the_tracking_api_and_names_the_fix(status, body, expected, monkeypatch):
    """The probe goes to the experiments API (where MLflow's host check and permissions apply,
    unlike /health), with the credentials the logging will send."""
    import http.server
    import threading

    from rbench.experiment import check_tracking

    seen = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            seen.append((self.path, self.headers.get("Authorization")))
            self.send_response(status)
            self.end_headers()
            self.wfile.write(body.encode())

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("MLFLOW_TRACKING_TOKEN", SECRET)
    try:
        with pytest.raises(ConfigError, match=expected) as error:
            check_tracking(f"http://127.0.0.1:{server.server_port}", "exp")
    finally:
        server.shutdown()
    assert seen == [("/api/2.0/mlflow/experiments/get-by-name?experiment_name=exp", f"Bearer {SECRET}")]
    assert SECRET not in str(error.value)


@pytest.mark.parametrize("user, expected", [(None, "wants credentials.*MLFLOW_TRACKING_USERNAME"),
                                            ("me", "refuses the user 'me' .*the user name or password .* is wrong")])
def test_a_401_says_whether_credentials_were_missing_or_wrong(user, expected, monkeypatch):
    """Issue 68, notes: on the main of 6e8e733 a wrong password was reported as "wants credentials"."""
    import http.server
    import threading

    from rbench.experiment import check_tracking

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(401)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    for name in ("MLFLOW_TRACKING_TOKEN", "MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD"):
        monkeypatch.delenv(name, raising=False)
    credentials = f"{user}:{SECRET}@" if user else ""
    try:
        with pytest.raises(ConfigError, match=expected) as error:
            check_tracking(f"http://{credentials}127.0.0.1:{server.server_port}", "exp")
    finally:
        server.shutdown()
    assert SECRET not in str(error.value)


def test_a_symlink_loop_in_a_corpus_path_is_one_message(tmp_path, tiny_files, capsys):
    from rbench.cli import main

    (tmp_path / "loop-a").symlink_to(tmp_path / "loop-b")
    (tmp_path / "loop-b").symlink_to(tmp_path / "loop-a")
    cfg = _config(tmp_path, tiny_files)
    cfg["datasets"][0]["params"]["corpus"] = "loop-a"
    path = tmp_path / "loop.yaml"
    path.write_text(yaml.safe_dump(cfg))
    assert main(["run", str(path)]) == 2
    err = capsys.readouterr().err
    assert "'loop-a' cannot be resolved" in err and "Symlink loop" in err and "Traceback" not in err


def test_a_refused_corpus_leaves_no_copy_in_the_store(tmp_path, tiny_files, capsys):
    """Issue 81, item 5: a corpus path that is a link to a system file was refused, but the download stage's
    copy of it stayed in ``store/download/``. Now preparation's refusal removes what the download copied."""
    from rbench.cli import main

    secret = tmp_path / "passwd"
    secret.write_text("root:x:0:0:root:/root:/bin/bash\n")
    (tmp_path / "corpus-link").symlink_to(secret)
    cfg = _config(tmp_path, tiny_files)
    cfg["datasets"][0]["params"]["corpus"] = "corpus-link"
    path = tmp_path / "linked.yaml"
    path.write_text(yaml.safe_dump(cfg))
    assert main(["run", str(path)]) == 2
    err = capsys.readouterr().err
    assert "passwd:1 is not valid JSON" in err and "Traceback" not in err
    copies = [p for p in (Path(cfg["store"]) / "download").rglob("*")
              if p.is_file() and "root:x" in p.read_text(errors="replace")]
    assert copies == []


def test_an_object_over_the_size_limit_is_refused_by_line_built_or_cached(tmp_path, tiny_files, capsys):
    """Issue 81, item 5: a corpus of one 200 MB line was accepted and indexed for over 15 minutes. An object over
    the dataset's max_object_bytes is refused with its file and line; a prepared table cached under a higher limit
    is refused on reuse under a lower one."""
    from rbench.cli import main
    from rbench.config import parse_config
    from rbench.orchestration.graph import check_data

    corpus, queries = tiny_files
    lines = corpus.read_text().splitlines()
    big = json.loads(lines[1])
    big["object"] = "lava " * 400  # 2,000 bytes
    corpus.write_text("\n".join([lines[0], json.dumps(big), *lines[2:]]) + "\n")
    path = tmp_path / "big.yaml"

    def run(limit: int) -> str:
        cfg = _config(tmp_path, tiny_files)
        cfg["datasets"][0]["max_object_bytes"] = limit
        path.write_text(yaml.safe_dump(cfg))
        assert main(["run", str(path)]) == 2
        err = capsys.readouterr().err
        assert "Traceback" not in err
        return err

    assert f"{corpus}:2: an object of 2,000 bytes (document " in run(1000)
    assert "over the dataset's max_object_bytes of 1,000: cut such texts" in run(1000)
    roomy = _config(tmp_path, tiny_files)
    roomy["datasets"][0]["max_object_bytes"] = 100_000
    check_data(parse_config(roomy))  # the data phase alone: the table is prepared and kept
    assert "its prepared corpus holds an object of 2,000 bytes, over its max_object_bytes of 1,000" in run(1000)


def test_a_disk_that_fills_during_the_preflight_prepare_is_one_message(tmp_path, tiny_files, monkeypatch, capsys):
    import errno

    from rbench.cli import main
    from rbench.orchestration import graph

    class FullDisk:
        name = "prepare"

        def run(self, store, inputs, config, call=None, key=None):
            raise OSError(errno.ENOSPC, "No space left on device", str(store.root / "prepare" / ".tmp-x"))

    monkeypatch.setattr(graph, "PREPARE", FullDisk())
    path = tmp_path / "full.yaml"
    path.write_text(yaml.safe_dump(_config(tmp_path, tiny_files)))
    assert main(["run", str(path)]) == 2
    err = capsys.readouterr().err
    assert "dataset 'tiny': the disk holding the store" in err and "is full" in err and "--store DIR" in err
    assert "Traceback" not in err


def test_environment_settings_are_read_when_used_and_a_bad_number_is_named(tmp_path, monkeypatch):
    """The lease TTL and the free-space minimum were read once, at import: a worker's value set later
    was ignored. They are read when used, and a value that is not a number is one message."""
    from rbench.core import settings
    from rbench.core.lease import Lease

    monkeypatch.setenv("RBENCH_LEASE_TTL", "7.5")
    monkeypatch.setenv("RBENCH_MIN_FREE_MB", "3")
    assert Lease(tmp_path / "x.lease").ttl == 7.5 and settings.min_free_bytes() == 3_000_000
    monkeypatch.setenv("RBENCH_LEASE_TTL", "ten")
    with pytest.raises(ConfigError, match=r"RBENCH_LEASE_TTL='ten' is not a number: unset it or give one, such as 60"):
        Lease(tmp_path / "y.lease")
    with pytest.raises(KeyError, match="RBENCH_NOT_LISTED is not one of rbench's environment variables"):
        settings.read("RBENCH_NOT_LISTED")


BOMB = """
a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]
b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]
c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]
d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]
e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]
f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e]
g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f]
h: &h [*g, *g, *g, *g, *g, *g, *g, *g, *g]
i: &i [*h, *h, *h, *h, *h, *h, *h, *h, *h]
"""


def test_hostile_config_files_are_refused_before_any_resolution(tmp_path, tiny_files):
    """Issue 68, C: on the main of 6e8e733 an anchor bomb under ``retrievers[].params`` ran 576 s at
    full CPU into an 8 GB limit and a MemoryError (``ExperimentConfig._resolve_llms`` copied every
    aliased list)."""
    import time

    from rbench.config import parse_config

    base = yaml.safe_dump(_config(tmp_path, tiny_files))
    bomb = tmp_path / "bomb.yaml"
    assert "retrievers:\n- name: bm25s\n" in base
    bomb.write_text(base.replace("retrievers:\n- name: bm25s\n", "") + BOMB +
                    "retrievers: [{name: bm25s, params: {k1: *i}}]\n")
    started = time.perf_counter()
    with pytest.raises(ConfigError, match=r"bomb\.yaml:\d+: this value expands to more than 100,000 values"):
        load_config(bomb)
    assert time.perf_counter() - started < 5
    looped = tmp_path / "loop.yaml"
    looped.write_text(base + "extra: &x [1, *x]\n")
    with pytest.raises(ConfigError, match="loop.yaml:.*refers to a value that holds it"):
        load_config(looped)
    huge = tmp_path / "huge.yaml"
    huge.write_text(base + "# " + "x" * (5 << 20) + "\n")
    with pytest.raises(ConfigError, match="huge.yaml is 5.2 MB: a settings file holds at most 4 MiB"):
        load_config(huge)
    started = time.perf_counter()  # a device reports no size (issue 81, item 5: 94 s to a MemoryError)
    with pytest.raises(ConfigError, match="/dev/zero gives more than 4 MiB"):
        load_config(Path("/dev/zero"))
    assert time.perf_counter() - started < 5
    (tmp_path / "latin.yaml").write_bytes(b"name: caf\xe9\n")
    with pytest.raises(ConfigError, match=r"latin.yaml is not UTF-8 text \(byte 9\)"):
        load_config(tmp_path / "latin.yaml")
    shared = [list(range(10))]
    for _ in range(6):
        shared = [shared] * 10  # one list of lists, shared by reference: 10 million values when repeated
    with pytest.raises(ConfigError, match="more than 100,000 values"):
        parse_config({**_config(tmp_path, tiny_files), "sweep": {"depth": shared}}, source="<notebook>")


def test_a_mirror_folder_that_is_not_there_is_said_as_such(tmp_path, monkeypatch):
    """Issue 70, item 8: on the main of 6e8e733 a mistyped --mirror read as an unreachable download."""
    from rbench.config import parse_config
    from rbench.orchestration import graph

    monkeypatch.setattr(graph, "unreachable", lambda files, mirror: [(files.all_files(mirror)[0], "no network")])
    cfg = parse_config({"store": str(tmp_path / "store"), "mirror": str(tmp_path / "no-such-mirror"),
                        "datasets": [{"name": "fetaqa"}], "retrievers": [{"name": "bm25s"}]})
    with pytest.raises(DataError, match=r"the mirror folder .*no-such-mirror does not exist .* not at hand without it"):
        graph.check_data(cfg)
