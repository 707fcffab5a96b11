"""The columnar corpus path of the prepare stage: the same table as the row-by-row reader,
its fallback to that reader, and the vectorised helpers checked against Python's own rules."""

from __future__ import annotations

import hashlib
import itertools
import json
import random
import re
import threading

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from rbench.config import DatasetConfig
from rbench.core.errors import DataError
from rbench.core.store import Artifact
from rbench.dataset_adapters.base import RowByRow, batches_of, get_adapter, object_id, object_ids
from rbench.dataset_adapters.columnar import (
    PY_WHITESPACE,
    Positions,
    ahead,
    is_blank,
    json_blocks,
    single_window,
)
from rbench.dataset_adapters.jsonl import Jsonl
from rbench.dataset_adapters.msmarco_v21 import MsmarcoParams
from rbench.dataset_adapters.validate import duplicate_ids
from rbench.tasks.prepare import TableDigest, build_prepare, write_corpus

WORDS = ["a", "bb", "дом", "日本", "x\u2003y", "—", "é", "[H]", ":"]
SPACES = ["", " ", "  ", *PY_WHITESPACE, "\u2014", "\u00e9 "]


def _tricky_corpus(path, lines: int = 1500, seed: int = 1) -> None:
    rng = random.Random(seed)
    rows = []
    for _ in range(lines):
        text = "".join(rng.choice(SPACES) + rng.choice(WORDS) for _ in range(rng.choice([0, 1, 2, 5, 9])))
        rows.append({"doc": f"d{rng.randint(0, 200)}", "src": rng.choice(["s1", "s2"]),
                     "body": text + rng.choice(SPACES), "t": rng.choice(["T", "Title é"]), "n": 3})
    path.write_text("".join(json.dumps(r, ensure_ascii=rng.random() < 0.5) + "\n" for r in rows), encoding="utf-8")


def _params(folder, **settings):
    return Jsonl.Params.model_validate({"corpus": folder / "corpus.jsonl", "queries": folder / "corpus.jsonl",
                                        "text_field": "body", "doc_id_fields": ["doc"], **settings})


SETTINGS = [dict(zip(("doc_id_fields", "title_field", "prefix_title", "modality", "chunker"), combo)) for combo in
            itertools.product([["doc"], ["doc", "src"]], [None, "t"], [False, True], ["text", "row"],
                              [{"size": 3, "overlap": 1}, {"kind": "none"}, {}])]


@pytest.mark.parametrize("settings", SETTINGS, ids=lambda s: "-".join(str(v) for v in s.values()))
def test_columns_give_the_row_readers_table(tmp_path, settings):
    _tricky_corpus(tmp_path / "corpus.jsonl")
    adapter, params = Jsonl(), _params(tmp_path, **settings)
    columns = write_corpus(tmp_path / "a.parquet", adapter.object_batches(tmp_path, params), None, "x")
    rows = write_corpus(tmp_path / "b.parquet", batches_of(adapter.objects(tmp_path, params)), None, "x")
    assert pq.read_table(tmp_path / "a.parquet").equals(pq.read_table(tmp_path / "b.parquet"))
    assert columns[:2] == rows[:2] and all(np.array_equal(a, b) for a, b in zip(columns[2:], rows[2:]))


def test_texts_within_one_window_skip_python_chunking(tmp_path, monkeypatch):
    from rbench.dataset_adapters import columnar

    (tmp_path / "corpus.jsonl").write_text("".join(json.dumps({"doc": f"d{i}", "body": t}) + "\n" for i, t in
                                                   enumerate(["one two", "a  b", "x y z w", " lead", ""])))
    chunked = []
    monkeypatch.setattr(columnar, "chunk_text", lambda text, config: chunked.append(text) or [text.strip()])
    (batch,) = Jsonl().object_batches(tmp_path, _params(tmp_path, chunker={"size": 3, "overlap": 1}))
    assert chunked == ["a  b", "x y z w", " lead"]
    assert batch.column("text").to_pylist() == ["one two", "a  b", "x y z w", "lead", ""]


def _prepare(folder, lines: bytes, row_by_row: bool = False, monkeypatch=None):
    (folder / "corpus.jsonl").write_bytes(lines)
    (folder / "queries.jsonl").write_text(json.dumps({"query_id": "q", "text": "?", "gold_doc_ids": ["a"]}) + "\n")
    if row_by_row:
        monkeypatch.setattr(Jsonl, "object_batches",
                            lambda self, raw, params: batches_of(self.objects(raw, params)))
    cfg = DatasetConfig.model_validate({"name": "t", "adapter": "jsonl", "params": {
        "corpus": str(folder / "corpus.jsonl"), "queries": str(folder / "queries.jsonl")}})
    out = folder / ("rows" if row_by_row else "columns")
    out.mkdir()
    try:
        build_prepare(out, [Artifact("download", "k", folder)], cfg)
    except DataError as e:
        return str(e).replace(str(folder), "")
    return pq.read_table(out / "corpus.parquet")


LINES = {
    "plain": (b'{"doc_id":"a","text":"x"}\n{"doc_id":"b","text":"y"}\n', False),
    "no final newline": (b'{"doc_id":"a","text":"x"}', False),
    "byte-order mark": (b'\xef\xbb\xbf{"doc_id":"a","text":"x"}\n', False),
    "crlf": (b'{"doc_id":"a","text":"x"}\r\n{"doc_id":"b","text":"y"}\r\n', False),
    "blank line": (b'{"doc_id":"a","text":"x"}\n\n{"doc_id":"b","text":"y"}\n', True),
    "two objects on a line": (b'{"doc_id":"a","text":"x"} {"doc_id":"b","text":"y"}\n', True),
    "number": (b'{"doc_id":"a","text":5}\n', True),
    "null": (b'{"doc_id":"a","text":null}\n', True),
    "missing field": (b'{"doc_id":"a"}\n', True),
    "object": (b'{"doc_id":"a","text":{"b":1}}\n', True),
    "not utf-8": (b'{"doc_id":"a","text":"\xff"}\n', True),
    "key twice": (b'{"doc_id":"a","text":"x","text":"z"}\n', True),
    "empty id": (b'{"doc_id":" ","text":"x"}\n', True),
    "array": (b'[1, 2]\n', True),
}


@pytest.mark.parametrize("name", LINES)
def test_files_the_block_reader_cannot_match_are_read_row_by_row(tmp_path, monkeypatch, name):
    lines, falls_back = LINES[name]
    (tmp_path / "corpus.jsonl").write_bytes(lines)
    params = _params(tmp_path, text_field="text", doc_id_fields=["doc_id"])
    if falls_back:  # the block reader gives up, or names the line the row reader names
        with pytest.raises((RowByRow, DataError)):
            for _ in Jsonl().object_batches(tmp_path, params):
                pass
    else:
        assert sum(b.num_rows for b in Jsonl().object_batches(tmp_path, params)) > 0
    columns = _prepare(tmp_path, lines)
    rows = _prepare(tmp_path, lines, row_by_row=True, monkeypatch=monkeypatch)
    assert type(columns) is type(rows)
    assert columns == rows if isinstance(rows, str) else columns.equals(rows)


def test_a_list_where_text_belongs_is_named_by_line(tmp_path):
    message = _prepare(tmp_path, b'{"doc_id":"a","text":"x"}\n{"doc_id":"b","text":[5]}\n')
    assert "corpus.jsonl:2 field 'text'" in message and "is [5], not text" in message


def test_single_window_and_is_blank_follow_str_split_and_strip():
    rng = random.Random(0)
    texts = ["", " ", "a", "a b", "a  b", " a", "a ", "a\tb", "a\xa0b", "a\u2003b", "a\u2014b", "é è", "\x1f",
             "a b c d", "a b c"]
    texts += ["".join(rng.choice(SPACES + WORDS) for _ in range(rng.randint(0, 6))) for _ in range(3000)]
    array = pa.array(texts)
    fits, blank = single_window(array, 3), is_blank(array)
    for text, fit, empty in zip(texts, fits, blank):
        assert empty == (not text.strip()), repr(text)
        if fit:
            assert " ".join(text.split()) == text and len(text.split()) <= 3, repr(text)
    cleared = {t for t, f in zip(texts, fits) if f}
    assert {"", "a", "a b", "a b c", "é è", "a\u2014b"} <= cleared
    assert not cleared & {" ", "a  b", " a", "a ", "a\tb", "a\xa0b", "a\u2003b", "\x1f", "a b c d"}
    sliced = array.slice(3, 5)
    assert single_window(sliced, 3).tolist() == single_window(pa.array(texts[3:8]), 3).tolist()


def test_positions_count_each_document_across_batches():
    positions = Positions()
    assert positions.take(pa.array(["a", "b", "a", "c", "a"])).tolist() == [0, 0, 1, 0, 2]
    assert positions.take(pa.array(["b", "a", "d", "b"])).tolist() == [1, 3, 0, 2]


def test_object_ids_are_object_id_with_their_numbers():
    docs, positions, texts = pa.array(["a", "Doc é"]), pa.array([0, 12]), pa.array(["x y", "t\x1fz"])
    ids, keys = object_ids(docs, positions, texts)
    assert ids.to_pylist() == [object_id("a", 0, "x y"), object_id("Doc é", 12, "t\x1fz")]
    assert keys.tolist() == [int(i[:16], 16) for i in ids.to_pylist()]
    assert object_id("a", 0, "x y") == hashlib.sha1("a\x1f0\x1fx y".encode()).hexdigest()[:20]


def test_table_digest_is_its_definition_and_ignores_batching():
    table = pa.table({"a": ["x", None, "yz"], "b": ["", "q", "r"]})
    expected = hashlib.sha256(b"a\x1fb")
    for lengths, data in (([1, -1, 2], b"xyz"), ([0, 1, 1], b"qr")):
        expected.update(hashlib.sha256(np.array(lengths, "<i8").tobytes()).digest() + hashlib.sha256(data).digest())
    for size in (1, 2, 3):
        digest = TableDigest(["a", "b"])
        for batch in table.to_batches(max_chunksize=size):
            digest.update(batch)
        assert digest.hexdigest() == expected.hexdigest()
    changed = TableDigest(["a", "b"])
    changed.update(pa.record_batch({"a": ["x", None, "y"], "b": ["z", "q", "r"]}))
    assert changed.hexdigest() != expected.hexdigest()


def test_duplicate_ids_are_confirmed_and_counted(tmp_path):
    ids = ["aa" * 10, "bb" * 10, "aa" * 10, "aa" * 10, "bb" * 10, "cc" * 10]
    pq.write_table(pa.table({"object_id": ids}), tmp_path / "c.parquet")
    found = duplicate_ids(tmp_path / "c.parquet", np.array([int(i[:16], 16) for i in ids], dtype=np.uint64))
    assert found.rows() == [("aa" * 10, 3), ("bb" * 10, 2)]


def test_ahead_hands_over_items_and_errors_and_stops_early():
    def items():
        yield from range(5)
        raise RowByRow("late")

    seen = []
    with pytest.raises(RowByRow, match="late"):
        for i in ahead(items()):
            seen.append(i)
    assert seen == [0, 1, 2, 3, 4]
    produced = []

    def endless():
        for i in itertools.count():
            produced.append(i)
            yield i

    for i in ahead(endless(), depth=2):
        if i == 3:
            break
    assert not [t for t in threading.enumerate() if t.name == "rbench-read-ahead"]
    assert len(produced) <= 3 + 2 + 2


def test_json_blocks_refuse_a_file_with_a_blank_line_at_the_end(tmp_path):
    path = tmp_path / "c.jsonl"
    path.write_text('{"d": "a"}\n\n')
    with pytest.raises(RowByRow, match="blank lines"):
        list(json_blocks(path, ["d"]))


def test_the_columnar_path_is_the_jsonl_default(tmp_path):
    assert get_adapter("jsonl").unique_positions
    _tricky_corpus(tmp_path / "corpus.jsonl", lines=20)
    batches = list(Jsonl().object_batches(tmp_path, _params(tmp_path)))
    assert batches and all(b.column("origin").null_count == b.num_rows for b in batches)
    with_metadata = list(Jsonl().object_batches(tmp_path, _params(tmp_path, metadata_fields=["n"])))
    assert with_metadata[0].column("origin")[0].as_py().endswith("corpus.jsonl:1")


def _shard(folder, lines: list[bytes]):
    import gzip

    shard = folder / "msmarco_v2.1_doc_segmented" / "msmarco_v2.1_doc_segmented_00.json.gz"
    shard.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(shard, "wb") as f:
        f.write(b"".join(lines))
    return MsmarcoParams(shards=[0])


def _segments(count: int, seed: int = 2) -> list[bytes]:
    rng = random.Random(seed)
    return [json.dumps({"docid": f"msmarco_v2.1_doc_{i // 3:02d}_{i}#{i % 3}_{rng.randint(0, 99999)}",
                        "url": f"https://example.org/{i}", "title": rng.choice(["", "Tïtle", "T"]),
                        "headings": "h", "segment": rng.choice(WORDS) * rng.randint(1, 4), "start_char": 0,
                        "end_char": 1}, ensure_ascii=rng.random() < 0.5).encode() + b"\n" for i in range(count)]


def test_msmarco_columns_give_the_row_readers_table(tmp_path, monkeypatch):
    monkeypatch.setattr("rbench.dataset_adapters.columnar.BLOCK", 4096)  # several blocks, lines cut across them
    params = _shard(tmp_path, _segments(300))
    adapter = get_adapter("msmarco_v21")
    columns = write_corpus(tmp_path / "a.parquet", adapter.object_batches(tmp_path, params), tmp_path / "pa", "x")
    rows = write_corpus(tmp_path / "b.parquet", batches_of(adapter.objects(tmp_path, params)), tmp_path / "pb",
                        "x")
    assert len(list(adapter.object_batches(tmp_path, params))) > 1
    assert pq.read_table(tmp_path / "a.parquet").equals(pq.read_table(tmp_path / "b.parquet"))
    assert pq.read_table(tmp_path / "pa").drop(["origin"]).equals(pq.read_table(tmp_path / "pb").drop(["origin"]))
    assert columns[:2] == rows[:2] and all(np.array_equal(a, b) for a, b in zip(columns[2:], rows[2:]))


SEGMENT_LINES = {
    "not a segment id": b'{"docid":"doc_without_hash","url":"u","title":"t","segment":"s"}\n',
    "a quote in the id": b'{"docid":"a\\"b#1_2","url":"u","title":"t","segment":"s"}\n',
    "a null title": b'{"docid":"a#1_2","url":"u","title":null,"segment":"s"}\n',
    "a blank line": b'{"docid":"a#1_2","url":"u","title":"t","segment":"s"}\n\n',
    "a blank document": b'{"docid":" #1_2","url":"u","title":"t","segment":"s"}\n',
}


@pytest.mark.parametrize("name", SEGMENT_LINES)
def test_msmarco_lines_the_block_reader_cannot_match_go_row_by_row(tmp_path, name):
    params = _shard(tmp_path, [SEGMENT_LINES[name]])
    with pytest.raises(RowByRow):
        list(get_adapter("msmarco_v21").object_batches(tmp_path, params))


def _beir(folder, seed: int = 3) -> None:
    rng = random.Random(seed)
    lines = []
    for i in range(800):
        row = {"_id": f"p{rng.randint(0, 500)}", "text": "".join(rng.choice(SPACES) + rng.choice(WORDS)
                                                                 for _ in range(rng.choice([0, 1, 3, 7])))}
        title = rng.choice([None, "", "T", "Tïtle", "missing"])
        if title != "missing":
            row["title"] = title
        lines.append(json.dumps(row, ensure_ascii=rng.random() < 0.5))
    (folder / "corpus.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")


@pytest.mark.parametrize("chunker,title", [({"size": 3, "overlap": 1}, "sep"), ({"kind": "none"}, "space"),
                                           ({"kind": "tokens"}, "none"), ({"kind": "tokens"}, "space")], ids=str)
def test_beir_columns_give_the_row_readers_table(tmp_path, chunker, title):
    _beir(tmp_path)
    (tmp_path / "queries.jsonl").write_text("")
    adapter = get_adapter("beir")
    params = adapter.Params.model_construct(path=tmp_path, split="test", qrels=None, title=title,
                                            chunker=adapter.Params.model_fields["chunker"].annotation(**chunker))
    columns = write_corpus(tmp_path / "a.parquet", adapter.object_batches(tmp_path, params), tmp_path / "pa", "x")
    rows = write_corpus(tmp_path / "b.parquet", batches_of(adapter.objects(tmp_path, params)), tmp_path / "pb", "x")
    assert pq.read_table(tmp_path / "a.parquet").equals(pq.read_table(tmp_path / "b.parquet"))
    assert columns[:2] == rows[:2] and all(np.array_equal(a, b) for a, b in zip(columns[2:], rows[2:]))


@pytest.mark.parametrize("line", [b'{"_id": 5, "text": "t"}\n', b'{"_id": "a", "text": "t", "title": 7}\n',
                                  b'{"_id": "a", "text": "t", "title": false}\n', b'{"text": "t"}\n',
                                  b'{"_id": " ", "text": "t"}\n'], ids=["number id", "number title",
                                                                       "false title", "no id", "blank id"])
def test_beir_lines_the_block_reader_cannot_match_go_row_by_row(tmp_path, line):
    (tmp_path / "corpus.jsonl").write_bytes(line)
    adapter = get_adapter("beir")
    params = adapter.Params.model_construct(path=tmp_path, split="test", qrels=None, title="space",
                                            chunker=adapter.Params.model_fields["chunker"].default)
    with pytest.raises(RowByRow):
        list(adapter.object_batches(tmp_path, params))


def test_corpus_writing_logs_its_progress(tmp_path, monkeypatch, caplog):
    monkeypatch.setattr("rbench.tasks.prepare.PROGRESS_SECONDS", 0.0)
    monkeypatch.setattr("rbench.dataset_adapters.columnar.BLOCK", 2048)
    _tricky_corpus(tmp_path / "corpus.jsonl", lines=200)
    with caplog.at_level("INFO", logger="rbench"):
        write_corpus(tmp_path / "c.parquet", Jsonl().object_batches(tmp_path, _params(tmp_path)), None, "tiny")
    counts = [int(m.split(": ")[1].split()[0]) for m in caplog.messages if m.startswith("prepare tiny: ")]
    written = pq.read_metadata(tmp_path / "c.parquet").num_rows
    assert len(counts) > 1 and counts == sorted(counts) and counts[-1] == written


@pytest.mark.parametrize("where", ["last", "middle"])
def test_a_malformed_line_of_a_million_is_named_from_its_block(tmp_path, monkeypatch, where):
    """The prepare stage names the bad line of a 10^6-line corpus from the block Arrow could not
    parse: the row reader never reads the file from line 1 (it did, after a whole columnar pass;
    tests/benchmarks/malformed_line.py times both)."""
    from rbench.dataset_adapters import jsonl

    bad = 1_000_000 if where == "last" else 654_321
    lines = (json.dumps({"doc_id": f"d{i}", "text": f"words of line {i}"}) for i in range(1, 1_000_001))
    data = "\n".join(line[:-1] if i == bad else line for i, line in enumerate(lines, 1)) + "\n"
    monkeypatch.setattr(jsonl, "read_jsonl", lambda *a, **k: pytest.fail("the row reader read the corpus"))
    message = _prepare(tmp_path, data.encode())
    assert re.fullmatch(rf"/corpus.jsonl:{bad} is not valid JSON \(.*\); fix or remove the line", message), message
