"""BRIGHT in its published layout: documents, long documents, examples with excluded ids."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from rbench.config import DatasetConfig, MetricsConfig
from rbench.core.errors import DataError
from rbench.core.store import Artifact, Store
from rbench.dataset_adapters.base import get_adapter
from rbench.tasks.download import DOWNLOAD, DownloadConfig
from rbench.tasks.evaluate import EVALUATE
from rbench.tasks.prepare import PREPARE

ANSERINI_TOOLS_COMMIT = "5d4ba9bcad1b9cb2cd14ba91eefe0a3425b8ca5d"
ROOT = Path(__file__).resolve().parents[3]

DOCUMENTS = {"biology/page_a/0.txt": "Mitochondria make ATP.", "biology/page_a/1.txt": "They have their own DNA.",
             "biology/page_b/0.txt": "Chloroplasts capture light.", "biology/page_c/0.txt": "Ribosomes build proteins.",
             "biology/q2_post/0.txt": "The question's own post, excluded."}
LONG = {"biology/page_a.txt": "Mitochondria make ATP. They have their own DNA.",
        "biology/page_b.txt": "Chloroplasts capture light."}
EXAMPLES = [
    {"query": "Where is ATP made?", "reasoning": "r", "id": "0", "excluded_ids": ["N/A"],
     "gold_ids_long": ["biology/page_a.txt"], "gold_ids": ["biology/page_a/0.txt", "biology/page_a/1.txt"],
     "gold_answer": "a"},
    {"query": "What captures light?", "reasoning": "r", "id": "1", "excluded_ids": ["biology/q2_post/0.txt"],
     "gold_ids_long": ["biology/page_b.txt"], "gold_ids": ["biology/page_b/0.txt"], "gold_answer": "b"},
]


def write_bright(folder: Path, examples: list[dict] = EXAMPLES) -> Path:
    """The three Parquet files of task biology, with the published columns."""
    for kind, docs in (("documents", DOCUMENTS), ("long_documents", LONG)):
        (folder / kind).mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.table({"id": list(docs), "content": list(docs.values())}),
                       folder / kind / "biology-00000-of-00001.parquet")
    (folder / "examples").mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(examples), folder / "examples" / "biology-00000-of-00001.parquet")
    return folder


def _prepare(tmp_path: Path, params: dict, mirror: Path | None = None) -> Artifact:
    cfg = DatasetConfig.model_validate({"name": "bright", "adapter": "bright", "params": params})
    store = Store(tmp_path / "store")
    return PREPARE.run(store, [DOWNLOAD.run(store, [], DownloadConfig.of(cfg, mirror), mirror=mirror)], cfg)


def _evaluate(tmp_path: Path, prepared: Artifact, ranked: dict[str, list[str]]) -> tuple[Artifact, dict]:
    """Score a run that ranks these document ids per query: the evaluate artifact and its
    per-query values by (query, metric)."""
    rows = [{"query_id": q, "object_id": f"{q}-{i}", "doc_id": d, "rank": i + 1, "score": 10.0 - i}
            for q, docs in ranked.items() for i, d in enumerate(docs)]
    (tmp_path / "run").mkdir()
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "run" / "run.parquet")
    evaluated = EVALUATE.run(Store(tmp_path / "store"), [prepared, Artifact("retrieve", "run", tmp_path / "run")],
                             MetricsConfig(k=[10]))
    return evaluated, {(r["query_id"], r["metric"]): r["value"]
                       for r in pq.read_table(evaluated.file("per_query.parquet")).to_pylist()}


def test_documents_and_examples_are_read_with_their_excluded_ids(tmp_path):
    prepared = _prepare(tmp_path, {"task": "biology", "path": str(write_bright(tmp_path / "BRIGHT"))})
    corpus = pq.read_table(prepared.file("corpus.parquet")).to_pylist()
    assert [(o["doc_id"], o["text"], o["modality"]) for o in corpus] == [
        (d, t, "text") for d, t in DOCUMENTS.items()]
    assert pq.read_table(prepared.file("queries.parquet")).to_pylist() == [
        {"query_id": "0", "text": "Where is ATP made?",
         "gold_doc_ids": ["biology/page_a/0.txt", "biology/page_a/1.txt"], "excluded_doc_ids": [], "gold_found": 2},
        {"query_id": "1", "text": "What captures light?", "gold_doc_ids": ["biology/page_b/0.txt"],
         "excluded_doc_ids": ["biology/q2_post/0.txt"], "gold_found": 1}]


def test_long_documents_come_from_the_mirror_with_their_own_gold(tmp_path):
    mirror = tmp_path / "mirror"
    write_bright(mirror / "bright")
    prepared = _prepare(tmp_path, {"task": "biology", "long_documents": True}, mirror)
    assert {o["doc_id"] for o in pq.read_table(prepared.file("corpus.parquet")).to_pylist()} == set(LONG)
    gold = pq.read_table(prepared.file("queries.parquet")).column("gold_doc_ids").to_pylist()
    assert gold == [["biology/page_a.txt"], ["biology/page_b.txt"]]
    specs = get_adapter("bright").files(get_adapter("bright").Params(task="economics"))
    assert [(s.name, s.hf_repo, s.hf_path) for s in specs] == [
        ("bright/documents/economics-00000-of-00001.parquet", "xlangai/BRIGHT",
         "documents/economics-00000-of-00001.parquet"),
        ("bright/examples/economics-00000-of-00001.parquet", "xlangai/BRIGHT",
         "examples/economics-00000-of-00001.parquet")]


def test_ndcg_at_10_drops_excluded_ids_before_scoring(tmp_path):
    prepared = _prepare(tmp_path, {"task": "biology", "path": str(write_bright(tmp_path / "BRIGHT"))})
    ranked = {"0": ["biology/page_c/0.txt", "biology/page_a/1.txt", "biology/page_b/0.txt", "biology/page_a/0.txt"],
              "1": ["biology/q2_post/0.txt", "biology/page_c/0.txt", "biology/page_b/0.txt"]}
    evaluated, per_query = _evaluate(tmp_path, prepared, ranked)
    # query 0: gold at ranks 2 and 4 (nothing excluded); query 1: the excluded post leaves, gold moves to rank 2
    ideal_two = 1 + 1 / math.log2(3)
    assert per_query[("0", "ndcg")] == pytest.approx((1 / math.log2(3) + 1 / math.log2(5)) / ideal_two)
    assert per_query[("1", "ndcg")] == pytest.approx(1 / math.log2(3))  # not 1 / log2(4), as with the post kept
    assert evaluated.info["excluded_documents_dropped"] == 1
    assert "q2_post" not in evaluated.file("run.trec").read_text()


@pytest.mark.parametrize("change, message", [
    ({"excluded_ids": ["biology/page_b/0.txt"]}, r"examples/biology-00000-of-00001.parquet row 2: "
                                                 r"\['biology/page_b/0.txt'\] are both gold"),
    ({"gold_ids": None}, "row 2 field 'gold_ids' must be a list of document ids, got None"),
])
def test_bad_examples_name_the_file_and_row(tmp_path, change, message):
    examples = [EXAMPLES[0], {**EXAMPLES[1], **change}]
    with pytest.raises(DataError, match=message):
        _prepare(tmp_path, {"task": "biology", "path": str(write_bright(tmp_path / "BRIGHT", examples))})


def test_a_folder_in_another_layout_is_named(tmp_path):
    (tmp_path / "flat").mkdir()
    with pytest.raises(DataError, match="has no documents/biology-00000-of-00001.parquet.*documents/, long_documents/"):
        _prepare(tmp_path, {"task": "biology", "path": str(tmp_path / "flat")})
    folder = write_bright(tmp_path / "BRIGHT")
    pq.write_table(pa.table({"doc": ["x"], "text": ["y"]}), folder / "documents" / "biology-00000-of-00001.parquet")
    with pytest.raises(DataError, match=r"lacks BRIGHT column\(s\) \['id', 'content'\]"):
        _prepare(tmp_path, {"task": "biology", "path": str(folder)})


ANSERINI_DOCS = [{"id": d.removeprefix("biology/"), "contents": t} for d, t in DOCUMENTS.items()] + [
    {"id": "1", "contents": "A document whose id is query 1's own id."}]


def write_anserini(folder: Path, docs: list[dict] = ANSERINI_DOCS) -> dict[str, Path]:
    """Anserini's files of task biology: the corpus folder and the same folder packed as
    bright-corpus.tar, topics (gzipped TSV) and qrels (TREC, tab-separated), beside BRIGHT's
    examples file (read for excluded ids)."""
    import gzip
    import json
    import tarfile

    corpus = folder / "collections" / "bright" / "biology"
    corpus.mkdir(parents=True)
    half = len(docs) // 2
    (corpus / "part-0.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs[:half]))
    with gzip.open(corpus / "part-1.jsonl.gz", "wt") as f:
        f.writelines(json.dumps(d) + "\n" for d in docs[half:])
    with tarfile.open(folder / "bright-corpus.tar", "w") as tar:
        tar.add(folder / "collections" / "bright", arcname="bright")
    with gzip.open(folder / "topics.bright-biology.tsv.gz", "wt") as f:
        f.write("0\tWhere is ATP made?\n1\tWhat captures light?\n2\tA topic nobody judged\n")
    (folder / "qrels.bright-biology.txt").write_text(
        "0\t0\tpage_a/0.txt\t1\n0\t0\tpage_a/1.txt\t1\n1\t0\tpage_b/0.txt\t1\n")
    examples = [{**EXAMPLES[0], "excluded_ids": ["N/A"]}, {**EXAMPLES[1], "excluded_ids": ["q2_post/0.txt"]}]
    write_bright(folder / "BRIGHT", examples)
    return {"path": corpus, "topics": folder / "topics.bright-biology.tsv.gz",
            "qrels": folder / "qrels.bright-biology.txt",
            "examples": folder / "BRIGHT" / "examples" / "biology-00000-of-00001.parquet"}


def test_the_anserini_layout_reads_topics_qrels_and_drops_the_querys_own_id_and_excluded_ids(tmp_path):
    files = write_anserini(tmp_path / "anserini")
    params = {"task": "biology", "layout": "anserini", **{k: str(v) for k, v in files.items()}}
    prepared = _prepare(tmp_path, params)
    corpus = pq.read_table(prepared.file("corpus.parquet")).to_pylist()
    assert [(o["doc_id"], o["text"]) for o in corpus] == [(d["id"], d["contents"]) for d in ANSERINI_DOCS]
    assert pq.read_table(prepared.file("queries.parquet")).to_pylist() == [
        {"query_id": "0", "text": "Where is ATP made?", "gold_doc_ids": ["page_a/0.txt", "page_a/1.txt"],
         "excluded_doc_ids": ["0"], "gold_found": 2},
        {"query_id": "1", "text": "What captures light?", "gold_doc_ids": ["page_b/0.txt"],
         "excluded_doc_ids": ["1", "q2_post/0.txt"], "gold_found": 1}]
    ranked = {"1": ["1", "q2_post/0.txt", "page_c/0.txt", "page_b/0.txt"], "0": ["page_a/1.txt", "page_c/0.txt"]}
    evaluated, per_query = _evaluate(tmp_path, prepared, ranked)
    # query 1: its own id and its excluded post leave the ranking, the gold moves from rank 4 to rank 2
    assert per_query[("1", "ndcg")] == pytest.approx(1 / math.log2(3))
    assert per_query[("0", "ndcg")] == pytest.approx(1 / (1 + 1 / math.log2(3)))
    assert evaluated.info["excluded_documents_dropped"] == 2


def test_the_anserini_corpus_tar_from_the_mirror_gives_the_same_tables(tmp_path):
    files = write_anserini(tmp_path / "anserini")
    mirror = tmp_path / "mirror"
    (mirror / "bright-anserini").mkdir(parents=True)
    for name in ("bright-corpus.tar", "topics.bright-biology.tsv.gz", "qrels.bright-biology.txt"):
        (mirror / "bright-anserini" / name).write_bytes((tmp_path / "anserini" / name).read_bytes())
    (mirror / "bright" / "examples").mkdir(parents=True)
    (mirror / "bright" / "examples" / files["examples"].name).write_bytes(files["examples"].read_bytes())
    from_folder = _prepare(tmp_path / "a", {"task": "biology", "layout": "anserini",
                                            **{k: str(v) for k, v in files.items()}})
    from_mirror = _prepare(tmp_path / "b", {"task": "biology", "layout": "anserini"}, mirror)
    for table in ("corpus.parquet", "queries.parquet"):
        assert pq.read_table(from_mirror.file(table)).equals(pq.read_table(from_folder.file(table)))
    specs = get_adapter("bright").files(get_adapter("bright").Params(task="earth_science", layout="anserini"))
    assert [(s.name, s.hf_repo or s.url) for s in specs] == [
        ("bright-anserini/bright-corpus.tar", "castorini/collections-bright"),
        ("bright-anserini/topics.bright-earth-science.tsv.gz", "https://raw.githubusercontent.com/castorini/"
         f"anserini-tools/{ANSERINI_TOOLS_COMMIT}/topics/topics.bright-earth-science.tsv.gz"),
        ("bright-anserini/qrels.bright-earth-science.txt", "https://raw.githubusercontent.com/castorini/"
         f"anserini-tools/{ANSERINI_TOOLS_COMMIT}/qrels/qrels.bright-earth-science.txt"),
        ("bright/examples/earth_science-00000-of-00001.parquet", "xlangai/BRIGHT")]


def test_the_bright_study_fetches_anserinis_files_from_the_pinned_commit():
    """configs/studies/bright-bm25.yaml: each of the 24 topics and qrels files resolves to the
    pinned commit of anserini-tools and to a path its pinned file list holds."""
    from rbench.config import load_config
    from rbench.dataset_adapters.bright import ANSERINI_CORPUS_REPO, REPO
    from rbench.dataset_adapters.pinned import pin

    pinned = pin("anserini-tools")
    assert pinned.base() == f"https://raw.githubusercontent.com/castorini/anserini-tools/{ANSERINI_TOOLS_COMMIT}/"
    cfg = load_config(ROOT / "configs" / "studies" / "bright-bm25.yaml")
    urls, hub = [], set()
    for ds in cfg.datasets:
        adapter = get_adapter(ds.adapter)
        for spec in adapter.files(adapter.Params.model_validate(ds.params)):
            if spec.url:
                urls.append(spec.url)
                assert spec.sha256 == pinned.files[spec.url.removeprefix(pinned.base())]
            else:
                hub.add(spec.hf_repo)
    assert len(urls) == 24 == len(set(urls))
    assert all(u.startswith(pinned.base()) and u.removeprefix(pinned.base()) in pinned.files for u in urls)
    assert {u.removeprefix(pinned.base()).split("/")[0] for u in urls} == {"topics", "qrels"}
    assert hub == {ANSERINI_CORPUS_REPO, REPO}


def _serve(folder: Path):
    """A local HTTP server of ``folder`` (404 for what it lacks), as raw.githubusercontent.com."""
    import functools
    import http.server
    import threading

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(folder)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def test_a_file_the_run_must_fetch_is_asked_for_before_the_flow_and_every_missing_one_named(tmp_path, monkeypatch):
    """check_data asks anserini-tools (a local server here) for the topics and qrels it must
    fetch: a file the server lacks and a server that does not answer stop the run before any
    flow, naming each file, its address and the mirror; with the files there it fetches them."""
    import yaml

    from rbench.config import load_config
    from rbench.dataset_adapters import pinned
    from rbench.orchestration.graph import check_data

    files = write_anserini(tmp_path / "anserini")
    upstream = tmp_path / "upstream" / "castorini" / "anserini-tools" / ANSERINI_TOOLS_COMMIT
    (upstream / "topics").mkdir(parents=True)
    (upstream / "topics" / "topics.bright-biology.tsv.gz").write_bytes(files["topics"].read_bytes())
    server = _serve(tmp_path / "upstream")
    monkeypatch.setattr(pinned, "RAW", f"http://127.0.0.1:{server.server_port}/{{repository}}/{{commit}}/")
    config = tmp_path / "exp.yaml"
    params = {"task": "biology", "layout": "anserini", "path": str(files["path"]), "examples": str(files["examples"])}
    config.write_text(yaml.safe_dump({"name": "probe", "store": str(tmp_path / "store"),
                                      "retrievers": [{"name": "bm25s"}],
                                      "datasets": [{"name": "biology", "adapter": "bright", "params": params}]}))
    cfg = load_config(config)
    try:
        with pytest.raises(DataError) as missing:
            check_data(cfg)
        text = str(missing.value)
        assert "1 file(s)" in text and "dataset 'biology': bright-anserini/qrels.bright-biology.txt from http" in text
        assert "HTTP 404" in text and "--mirror" in text and "topics.bright-biology" not in text
        (upstream / "qrels").mkdir()
        (upstream / "qrels" / "qrels.bright-biology.txt").write_bytes(files["qrels"].read_bytes())
        built = check_data(cfg).built  # fetched before the flow, so that the plan keys the stages below
        assert {stage for stage, _ in built} == {"download", "prepare"}
    finally:
        server.shutdown()
        server.server_close()
    shutil.rmtree(tmp_path / "store")
    with pytest.raises(DataError, match=r"(?s)2 file\(s\).*unreachable.*\n.*unreachable"):
        check_data(cfg)
    mirror = tmp_path / "mirror" / "bright-anserini"
    mirror.mkdir(parents=True)
    for kind in ("topics", "qrels"):
        (mirror / files[kind].name).write_bytes(files[kind].read_bytes())
    built = check_data(load_config(config, mirror=tmp_path / "mirror")).built
    assert {stage for stage, _ in built} == {"download", "prepare"}


def test_anserinis_exclusion_file_stands_for_brights_examples(tmp_path):
    """``exclude:`` (Anserini's ``exclude.bright-<task>.txt``) gives the same queries as BRIGHT's
    examples file, which is then not needed; a malformed line is named."""
    files = write_anserini(tmp_path / "anserini")
    examples = files.pop("examples")
    exclude = tmp_path / "anserini" / "exclude.bright-biology.txt"
    exclude.write_text("1 q2_post/0.txt\n\n")
    with_examples = _prepare(tmp_path / "a", {"task": "biology", "layout": "anserini", "examples": str(examples),
                                              **{k: str(v) for k, v in files.items()}})
    params = {"task": "biology", "layout": "anserini", "exclude": str(exclude), **{k: str(v) for k, v in files.items()}}
    with_exclude = _prepare(tmp_path / "b", params)
    assert pq.read_table(with_exclude.file("queries.parquet")).equals(
        pq.read_table(with_examples.file("queries.parquet")))
    specs = get_adapter("bright").files(get_adapter("bright").Params(**params))
    assert "bright-anserini/exclude.bright-biology.txt" in [s.name for s in specs]
    assert not any(s.name.startswith("bright/") for s in specs)
    exclude.write_text("1 q2_post/0.txt\n1\tq2_post/1.txt extra\n")
    with pytest.raises(DataError, match=r"exclude.bright-biology.txt:2 must be 'query-id doc-id'"):
        _prepare(tmp_path / "c", params)
    with pytest.raises(ValueError, match="give one of them"):
        get_adapter("bright").Params(**params, examples=str(examples))


def test_bad_anserini_files_name_the_file_and_line(tmp_path):
    import gzip

    files = write_anserini(tmp_path / "anserini", ANSERINI_DOCS[:2] + [{"id": "x", "text": "no contents"}])
    params = {"task": "biology", "layout": "anserini", **{k: str(v) for k, v in files.items()}}
    with pytest.raises(DataError, match=r"part-1.jsonl.gz:2 lacks field\(s\) \['contents'\] of Anserini's"):
        _prepare(tmp_path / "a", params)
    files = write_anserini(tmp_path / "other")
    with gzip.open(files["topics"], "wt") as f:
        f.write("0 Where is ATP made?\n")
    with pytest.raises(DataError, match=r"topics.bright-biology.tsv.gz:1 must be 'query-id<TAB>query'"):
        _prepare(tmp_path / "b", {"task": "biology", "layout": "anserini", **{k: str(v) for k, v in files.items()}})
    files["topics"].write_bytes(gzip.compress(b"0\tWhere is ATP made?\n")[:-12])  # a truncated download
    with pytest.raises(DataError, match=r"topics.bright-biology.tsv.gz cannot be read .*fetch it again"):
        _prepare(tmp_path / "c", {"task": "biology", "layout": "anserini", **{k: str(v) for k, v in files.items()}})
    with pytest.raises(ValueError, match="layout 'anserini'"):
        get_adapter("bright").Params(task="biology", topics=str(files["topics"]))
