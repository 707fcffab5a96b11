"""Span chunkers, the Chroma-format loader's named errors, and the cached chunking grid."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
import yaml

from rbench.core.errors import ConfigError, DataError
from rbench.dataset_adapters.chunking import ChunkerConfig, recursive_spans, token_spans
from rbench.tasks.chunking_eval import embed_config, eval_config, load_eval_set

SOTU = ("Madam Speaker, Madam Vice President, our First Lady and Second Gentleman. Members of Congress and the Cabinet. "
        "Last year COVID-19 kept us apart. This year we are finally together again. Tonight, we meet as Democrats, "
        "Republicans and Independents. But most importantly as Americans. With a duty to one another to the American "
        "people to the Constitution. And with an unwavering resolve that freedom will always triumph over tyranny.")
FINANCE = ("Revenue for the quarter rose eleven percent to 4.2 billion dollars, driven by cloud services. Operating "
           "margin narrowed to 21 percent because of higher data-center depreciation. The board approved a dividend "
           "of 35 cents per share and a new buyback program of two billion dollars over three years.")


def make_eval_set(folder: Path, questions: list[tuple[str, str, list[str]]] | None = None) -> Path:
    """A small evaluation set in Chroma's format: two corpora and questions with exact references."""
    (folder / "corpora").mkdir(parents=True)
    corpora = {"sotu": SOTU, "finance": FINANCE}
    for cid, text in corpora.items():
        (folder / "corpora" / f"{cid}.md").write_text(text, encoding="utf-8")
    questions = questions or [
        ("Who kept us apart last year?", "sotu", ["Last year COVID-19 kept us apart."]),
        ("What will triumph over tyranny?", "sotu", ["freedom will always triumph over tyranny"]),
        ("How much did revenue rise?", "finance", ["Revenue for the quarter rose eleven percent"]),
        ("What dividend and buyback were approved?", "finance", ["dividend of 35 cents per share", "buyback program of two billion dollars"]),
    ]
    with open(folder / "questions_df.csv", "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["question", "references", "corpus_id"])
        for question, cid, contents in questions:
            refs = [{"content": c, "start_index": corpora[cid].index(c), "end_index": corpora[cid].index(c) + len(c)}
                    for c in contents]
            writer.writerow([question, json.dumps(refs), cid])
    return folder


def test_token_spans_cover_the_text_with_overlap():
    spans = token_spans(SOTU, 20, 5)
    assert spans[0][0] == 0 and spans[-1][1] == len(SOTU)
    assert all(b[0] < a[1] for a, b in zip(spans, spans[1:]))  # consecutive windows overlap
    assert "".join(SOTU[s:e] for s, e in token_spans(SOTU, 20, 0)) == SOTU


def test_one_chunker_config_gives_the_passages_a_dataset_prepares_and_their_spans():
    """The prepared passages of a word-window chunker are its spans' words; ``none`` is the text whole;
    ``recursive`` prepares the text's own slices."""
    from rbench.dataset_adapters.chunking import chunk_spans, chunk_text

    text = "  w0 w1\n\nw2   w3 w4 w5 w6 w7 w8 w9 "
    words = ChunkerConfig(kind="tokens", size=4, overlap=1)
    spans = chunk_spans(text, words)
    assert [" ".join(text[s:e].split()) for s, e in spans] == chunk_text(text, words) == [
        "w0 w1 w2 w3", "w3 w4 w5 w6", "w6 w7 w8 w9"]
    assert text[spans[0][0]:spans[0][1]] == "w0 w1\n\nw2   w3"
    assert chunk_spans(text, ChunkerConfig(kind="none")) == [(0, len(text))]
    assert chunk_spans("   ", ChunkerConfig(kind="none")) == [] == chunk_spans("   ", words)
    recursive = ChunkerConfig(kind="recursive", size=12, overlap=0)
    assert chunk_spans(text, recursive) == [(0, 12), (12, 23), (23, 35)]  # cut at the blank line, then words
    assert chunk_text(text, recursive) == ["w0 w1\n\nw2", "w3 w4 w5", "w6 w7 w8 w9"]
    assert ChunkerConfig(kind="recursive", size=3, overlap=0, unit="words").size_unit == "words"
    assert chunk_text(text, ChunkerConfig(kind="recursive", size=3, overlap=0, unit="words")) == [
        "w0 w1\n\nw2", "w3 w4 w5", "w6 w7 w8", "w9"]


def test_recursive_spans_respect_size_and_boundaries():
    spans = recursive_spans(SOTU, 120, 30)
    assert all(e - s <= 120 for s, e in spans)
    assert spans[0][0] == 0 and spans[-1][1] == len(SOTU)
    assert all(SOTU[e - 1] in ". " for s, e in spans[:-1])  # cut after a sentence or a word


def test_overlap_not_smaller_than_size_is_an_error():
    with pytest.raises(ValueError, match="overlap 50 must be >= 0 and smaller than the chunk size 50"):
        ChunkerConfig(size=50, overlap=50)


def test_loader_names_bad_references(tmp_path):
    corpora, questions = load_eval_set(make_eval_set(tmp_path / "ok"))
    assert set(corpora) == {"sotu", "finance"} and len(questions) == 4 and len(questions[3].references) == 2
    bad = make_eval_set(tmp_path / "bad")
    rows = list(csv.reader(open(bad / "questions_df.csv", encoding="utf-8")))
    refs = json.loads(rows[1][1])
    refs[0]["end_index"] = 10_000
    rows[1][1] = json.dumps(refs)
    csv.writer(open(bad / "questions_df.csv", "w", newline="", encoding="utf-8")).writerows(rows)
    with pytest.raises(DataError, match=r"questions_df.csv:2 reference \(\d+, 10000\) falls outside corpus 'sotu'"):
        load_eval_set(bad)
    refs[0]["end_index"] = refs[0]["start_index"] + 5
    rows[1][1] = json.dumps(refs)
    csv.writer(open(bad / "questions_df.csv", "w", newline="", encoding="utf-8")).writerows(rows)
    with pytest.raises(DataError, match="not its content 'Last year COVID-19 kept us apart.'"):
        load_eval_set(bad)


def test_grid_config_rejects_overlap_fraction_of_one(tmp_path):
    from rbench.config.chunking import load_grid_config

    path = tmp_path / "grid.yaml"
    path.write_text(yaml.safe_dump({"data": "chroma", "overlaps": [0.5, 1.0]}))
    with pytest.raises(ConfigError, match=r"overlaps are fractions of the chunk size in \[0, 1\); got \[1.0\]"):
        load_grid_config(path)


def test_a_run_can_be_limited_to_named_corpora(tmp_path):
    folder = make_eval_set(tmp_path / "set")
    corpora, questions = load_eval_set(folder, ["finance"])
    assert list(corpora) == ["finance"] and [q.question_id for q in questions] == ["3", "4"]
    with pytest.raises(DataError, match=r"corpora \['pubmed'\] are not in .*corpora; it holds \['finance', 'sotu'\]"):
        load_eval_set(folder, ["finance", "pubmed"])


def test_grid_corpus_option_reaches_both_stage_keys(tmp_path):
    from rbench.config.chunking import load_grid_config

    path = tmp_path / "grid.yaml"
    path.write_text(yaml.safe_dump({"data": "chroma", "corpora": ["sotu"]}))
    cfg = load_grid_config(path)
    assert embed_config(cfg, cfg.chunkers()[0]).corpora == ["sotu"] and eval_config(cfg, 3).corpora == ["sotu"]
    assert load_grid_config(path, corpora=["finance"]).corpora == ["finance"]
    path.write_text(yaml.safe_dump({"data": "chroma", "units": "tokens"}))
    with pytest.raises(ConfigError, match="units"):
        load_grid_config(path)


def test_recursive_chunker_can_count_cl100k_tokens_as_chromas_report_does():
    from rbench.dataset_adapters.chunking import cl100k

    encoding = cl100k()
    by_tokens = recursive_spans(SOTU, 20, 5, "cl100k_tokens")
    assert by_tokens[0][0] == 0 and by_tokens[-1][1] == len(SOTU)
    assert all(len(encoding.encode(SOTU[s:e])) <= 21 for s, e in by_tokens)
    assert max(e - s for s, e in by_tokens) > 20  # a 20-token chunk holds more than 20 characters
    assert ChunkerConfig(kind="recursive", size=20, overlap=5, unit="cl100k_tokens").size_unit == "cl100k_tokens"
    assert ChunkerConfig(kind="recursive", size=20, overlap=5).size_unit == "characters"
    with pytest.raises(ValueError, match="only 'recursive' can count characters"):
        ChunkerConfig(kind="tokens", size=20, overlap=0, unit="characters")


def test_grid_table_marks_every_tied_best_row_and_states_its_units(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from rbench.evaluation.report_chunking import METRICS, write_grid_report

    per_question = tmp_path / "pq.parquet"
    pq.write_table(pa.table({m: [0.5, 1.0] for m in METRICS}), per_question)

    def row(size, recall):
        summary = {m: {"mean": 0.5, "std_population": 0.1, "std_sample": 0.2} for m in METRICS}
        summary["recall"] = {"mean": recall, "std_population": 0.0, "std_sample": 0.0}
        return {"chunk_size": size, "overlap": 0, "n": 1, "summary": summary, "per_question": str(per_question)}

    results = [row(100, 1.0), row(200, 0.99999), row(300, 0.9)]
    settings = {"size_unit": "cl100k_tokens", "metric_unit": "characters", "std": "sample", "scope": "pooled",
                "corpora": ["sotu"], "questions": 2}
    write_grid_report(results, [3, 4], [1, 2], tmp_path / "out", settings)
    table = (tmp_path / "out" / "grid.md").read_text()
    lines = [line for line in table.splitlines() if line.startswith("| 1") or line.startswith("| 2")
             or line.startswith("| 3")]
    recall = [line.split(" | ")[3] for line in lines]
    assert recall == ["1.0000 +- 0.0000 **best**", "1.0000 +- 0.0000 **best**", "0.9000 +- 0.0000"]
    assert "0.5000 +- 0.2000" in lines[0]  # the sample standard deviation, as asked
    assert "counted in characters; mean +- sample standard deviation over 2 questions of sotu" in table
    assert "chunk_size (cl100k_tokens)" in table


def test_prepares_text_chunker_counts_words_or_cl100k_tokens():
    from rbench.dataset_adapters.chunking import ChunkerConfig, chunk_text, cl100k

    text = "internationalization considerations notwithstanding, antidisestablishmentarianism persists"
    assert chunk_text(text, ChunkerConfig(size=3, overlap=0)) == [
        "internationalization considerations notwithstanding,", "antidisestablishmentarianism persists"]
    pieces = chunk_text(text, ChunkerConfig(size=3, overlap=0, unit="cl100k_tokens"))
    assert len(pieces) > 2 and all(len(cl100k().encode(p)) <= 4 for p in pieces)  # 3 in context; re-encoded alone, +1 at most
    assert " ".join(pieces).replace(" ", "") == text.replace(" ", "")


def test_a_grid_of_some_corpora_needs_only_their_files(tmp_path):
    from rbench.tasks.chunking_eval import chroma_files
    from rbench.tasks.download import DownloadConfig

    files = chroma_files(["state_of_the_union"])
    assert [f.name for f in files] == ["chroma/corpora/state_of_the_union.md", "chroma/questions_df.csv"]
    mirror = tmp_path / "mirror" / "chunking_evaluation"  # the development mirror's flat layout
    mirror.mkdir(parents=True)
    (mirror / "state_of_the_union.md").write_text("x")
    assert files[0].in_mirror(tmp_path / "mirror") == mirror / "state_of_the_union.md"
    assert files[1].in_mirror(tmp_path / "mirror") is None
    assert DownloadConfig.resolved(files, tmp_path / "mirror") == DownloadConfig.resolved(files)  # keys as before


def test_questions_of_corpora_left_out_are_skipped(tmp_path):
    folder = make_eval_set(tmp_path / "set")
    (folder / "corpora" / "finance.md").unlink()
    corpora, questions = load_eval_set(folder, ["sotu"])
    assert list(corpora) == ["sotu"] and {q.corpus_id for q in questions} == {"sotu"} and len(questions) == 2
