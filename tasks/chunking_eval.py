"""Chunking evaluation at span level, in Chroma's general evaluation format.

A folder holds ``corpora/<corpus_id>.md`` and ``questions_df.csv`` (``question``,
``references``: a JSON list of ``{"content", "start_index", "end_index"}`` character
offsets, ``corpus_id``). Two cached stages: chunk + embed (per chunker and model), then
retrieve + score (per number of retrieved chunks N and scope), so the N axis of a grid
costs only retrieval.
"""

from __future__ import annotations

import bisect
import csv
import json
import statistics
import time
from pathlib import Path
from typing import Literal, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import BaseModel, ConfigDict, PositiveInt

from rbench.config.chunking import ChunkingGridConfig
from rbench.core.errors import ConfigError, DataError
from rbench.core.store import Artifact, Stage, write_atomic
from rbench.dataset_adapters.base import FileSpec, local_file
from rbench.dataset_adapters.chunking import ChunkerConfig, chunk_spans, cl100k, token_starts
from rbench.evaluation.metrics_spans import precision_omega, span_scores
from rbench.evaluation.report_chunking import write_grid_report
from rbench.retrievers.dense import Dense, DenseParams
from rbench.retrievers.models import Encoding, canonical_id

CHROMA_COMMIT = "d451fc4cf56e417b755994b4ca5212fd5057c0d2"
CHROMA_DIGESTS = {
    "corpora/chatlogs.md": "543a98f82b2a6a492349fd7f8c9d6c3e78d1a4af81d13c79a7fd513c3f65bda6",
    "corpora/finance.md": "1c48d0156820abc88e46e5c992fa0cd2708b07ae59a3771b2b18234b7208561f",
    "corpora/pubmed.md": "0fd9242ffb253695e5d0f0215cb79a66a2a8f1236591e764c60d370747684ced",
    "corpora/state_of_the_union.md": "6fc21d560d31eb2421e337596feea0f83f1fa9ca02c6c4e47bc26959d7531b37",
    "corpora/wikitexts.md": "74cafcdb771185ecb9f22cc41b73e2e44477e0636ecf9cf1f96fd6ee0f4b86c0",
    "questions_df.csv": "3ab3901889b8900f43775537bf12d36bd6614255fc59124faca31bede1dda7a3",
}


def chroma_files(corpora: Sequence[str] | None = None) -> list[FileSpec]:
    """Chroma's general evaluation set, pinned (only ``corpora`` and the questions when given);
    mirror layout ``chroma/corpora/*.md``, ``chroma/questions_df.csv``, or the development
    mirror's flat ``chunking_evaluation/*.md``, ``chunking_evaluation/questions_df.csv``."""
    base = (f"https://raw.githubusercontent.com/brandonstarxel/chunking_evaluation/{CHROMA_COMMIT}/"
            "chunking_evaluation/evaluation_framework/general_evaluation_data/")
    wanted = None if corpora is None else {f"corpora/{c}.md" for c in corpora} | {"questions_df.csv"}
    return [FileSpec(name=f"chroma/{n}", sha256=d, url=base + n, mirror_names=(f"chunking_evaluation/{Path(n).name}",))
            for n, d in CHROMA_DIGESTS.items() if wanted is None or n in wanted]


class Question(BaseModel):
    """A question with its reference spans in one corpus."""

    question_id: str
    text: str
    corpus_id: str
    references: list[tuple[int, int]]


def load_eval_set(folder: Path, only: Sequence[str] | None = None) -> tuple[dict[str, str], list[Question]]:
    """Read and check an evaluation folder, limited to the corpora ``only`` names (all when
    None); a reference outside its corpus, or whose offsets do not hold its ``content``, is a
    DataError naming the row and the values."""
    corpora = {p.stem: p.read_text(encoding="utf-8") for p in sorted((folder / "corpora").glob("*.md"))}
    path = folder / "questions_df.csv"
    if not corpora or not path.is_file():
        raise DataError(f"{folder} must hold corpora/<corpus_id>.md files and questions_df.csv")
    unknown = sorted(set(only or ()) - set(corpora))
    if unknown:
        raise DataError(f"corpora {unknown} are not in {folder / 'corpora'}; it holds {sorted(corpora)}")
    questions = []
    with open(path, encoding="utf-8", newline="") as f:
        reader = csv.DictReader(f)
        missing = {"question", "references", "corpus_id"} - set(reader.fieldnames or [])
        if missing:
            raise DataError(f"{path} lacks column(s) {sorted(missing)}; has {reader.fieldnames}")
        for row_no, row in enumerate(reader, 2):
            if only and row["corpus_id"] not in only:
                continue  # a corpus the run leaves out need not be in the folder
            corpus = corpora.get(row["corpus_id"])
            if corpus is None:
                raise DataError(f"{path}:{row_no} names corpus {row['corpus_id']!r}, not in {sorted(corpora)}")
            try:
                refs = json.loads(row["references"])
            except json.JSONDecodeError as e:
                raise DataError(f"{path}:{row_no} references are not valid JSON ({e})") from None
            spans = []
            for ref in refs:
                start, end, content = int(ref["start_index"]), int(ref["end_index"]), ref["content"]
                if not 0 <= start < end <= len(corpus):
                    raise DataError(f"{path}:{row_no} reference ({start}, {end}) falls outside corpus "
                                    f"{row['corpus_id']!r} of {len(corpus)} characters")
                if corpus[start:end] != content:
                    raise DataError(f"{path}:{row_no} reference ({start}, {end}) holds {corpus[start:end][:40]!r}, "
                                    f"not its content {content[:40]!r}: fix the offsets")
                spans.append((start, end))
            questions.append(Question(question_id=str(row_no - 1), text=row["question"],
                                      corpus_id=row["corpus_id"], references=spans))
    if only:
        corpora = {c: t for c, t in corpora.items() if c in only}
        questions = [q for q in questions if q.corpus_id in corpora]
    return corpora, questions


def _eval_folder(raw: Artifact) -> Path:
    return raw.path / "chroma" if (raw.path / "chroma").is_dir() else raw.path


class ChunkEmbedConfig(BaseModel):
    """What the chunks and their embeddings depend on; ``corpora`` limits the run (None: all)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    chunker: ChunkerConfig
    model: str
    encoding: Encoding = Encoding()
    corpora: list[str] | None = None


def build_chunk_embed(folder: Path, inputs: list[Artifact], config: ChunkEmbedConfig) -> dict:
    """Chunk every corpus (``chunks.parquet`` with spans) and embed chunks and questions with the
    dense retriever's encoder."""
    corpora, questions = load_eval_set(_eval_folder(inputs[0]), config.corpora)
    rows = [(cid, s, e) for cid, text in corpora.items() for s, e in chunk_spans(text, config.chunker)]
    dense = Dense(DenseParams(model=config.model, encoding=config.encoding))
    np.save(folder / "chunks.npy", dense.encode([corpora[c][s:e] for c, s, e in rows], "document"))
    np.save(folder / "questions.npy", dense.encode([q.text for q in questions], "query"))
    pq.write_table(pa.table({"corpus_id": [r[0] for r in rows], "start": [r[1] for r in rows],
                             "end": [r[2] for r in rows]}), folder / "chunks.parquet")
    return {"chunks": len(rows), "questions": len(questions), "corpora": len(corpora)}


class ChunkEvalConfig(BaseModel):
    """Retrieval depth and scope (``pooled``: one collection of every corpus's chunks, as
    Chroma's code retrieves), the unit the metrics count, and the corpora (None: all)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    n: PositiveInt
    scope: Literal["corpus", "pooled"] = "corpus"
    units: Literal["characters", "cl100k_tokens"] = "characters"
    corpora: list[str] | None = None


def _to_tokens(spans: list[tuple[int, int]], starts: list[int]) -> list[tuple[int, int]]:
    return [(bisect.bisect_right(starts, s) - 1, bisect.bisect_left(starts, e)) for s, e in spans]


def build_chunk_eval(folder: Path, inputs: list[Artifact], config: ChunkEvalConfig) -> dict:
    """Retrieve the top-N chunks per question by cosine similarity (the dense retriever's exact search
    over the stored vectors: one index per corpus, or one pooled) and score their spans."""
    raw, chunked = inputs
    corpora, questions = load_eval_set(_eval_folder(raw), config.corpora)
    chunks = pq.read_table(chunked.file("chunks.parquet")).to_pylist()
    vectors, qvectors = np.load(chunked.file("chunks.npy")), np.load(chunked.file("questions.npy"))
    units = [(c["start"], c["end"]) for c in chunks]
    starts: dict[str, list[int]] = {}
    if config.units == "cl100k_tokens":
        starts = {c: token_starts(t) for c, t in corpora.items()}
        units = [_to_tokens([u], starts[c["corpus_id"]])[0] for u, c in zip(units, chunks)]
    groups = {"": list(range(len(chunks)))} if config.scope == "pooled" else {}
    for i, c in enumerate(chunks):
        if config.scope == "corpus":
            groups.setdefault(c["corpus_id"], []).append(i)
    top: dict[str, list[int]] = {}
    for group, members in groups.items():
        asked = [i for i, q in enumerate(questions) if config.scope == "pooled" or q.corpus_id == group]
        if not asked:
            continue
        searcher = Dense()
        searcher.hold([str(i) for i in members], vectors[members])
        found = searcher.search_vectors(qvectors[asked], config.n)
        top.update({questions[i].question_id: [int(oid) for oid, _ in hits] for i, hits in zip(asked, found)})
    rows = []
    for q in questions:
        hits = top.get(q.question_id, [])
        own = [units[i] for i in hits if chunks[i]["corpus_id"] == q.corpus_id]
        unrelated = sum(units[i][1] - units[i][0] for i in hits if chunks[i]["corpus_id"] != q.corpus_id)
        refs = _to_tokens(q.references, starts[q.corpus_id]) if config.units == "cl100k_tokens" else q.references
        all_own = [units[i] for i, c in enumerate(chunks) if c["corpus_id"] == q.corpus_id]
        rows.append({"question_id": q.question_id, "corpus_id": q.corpus_id, **span_scores(own, refs, unrelated),
                     "precision_omega": precision_omega(all_own, refs), "references": len(refs)})
    pq.write_table(pa.Table.from_pylist(rows), folder / "per_question.parquet")
    summary = {m: {"mean": statistics.fmean(values), "std_population": statistics.pstdev(values),
                   "std_sample": statistics.stdev(values) if len(values) > 1 else 0.0}
               for m in ("recall", "precision", "f1", "iou", "precision_omega")
               for values in [[r[m] for r in rows]]}
    write_atomic(folder / "summary.json", json.dumps(summary, indent=2))
    return {f"{m}_mean": round(v["mean"], 4) for m, v in summary.items()}


def encodes(config: ChunkEmbedConfig) -> bool:
    """Chunk embedding always runs a model (and chonky's chunker runs one too)."""
    return True


CHUNK_EMBED = Stage("chunk_embed", 2, build_chunk_embed, native=encodes)
CHUNK_EVAL = Stage("chunk_eval", 2, build_chunk_eval)


def embed_config(grid: ChunkingGridConfig, chunker: ChunkerConfig) -> ChunkEmbedConfig:
    """The chunk-and-embed stage's settings for one chunker of the grid."""
    return ChunkEmbedConfig(chunker=chunker, model=grid.model, corpora=grid.corpora,
                            encoding=Encoding.for_model(canonical_id(grid.model), grid.encoding))


def eval_config(grid: ChunkingGridConfig, n: int) -> ChunkEvalConfig:
    """The retrieve-and-score stage's settings for one N of the grid."""
    return ChunkEvalConfig(n=n, scope=grid.scope, units=grid.units, corpora=grid.corpora)


def grid_files(grid: ChunkingGridConfig) -> list[FileSpec]:
    """The grid's evaluation set: Chroma's pinned set, or a local folder's files by digest."""
    if grid.data == "chroma":
        return chroma_files(grid.corpora)
    folder = Path(grid.data)
    paths = sorted((folder / "corpora").glob("*.md")) + [folder / "questions_df.csv"]
    if not (folder / "questions_df.csv").is_file():
        raise ConfigError(f"data folder {folder} has no questions_df.csv; use 'chroma' or a folder in Chroma's format")
    return [local_file(f"chroma/{p.relative_to(folder).as_posix()}", p) for p in paths]


def summary_of(scored: Artifact) -> dict:
    """The span measures' means and deviations of a finished ``chunk_eval`` stage."""
    return json.loads(scored.file("summary.json").read_text())


def report_grid(grid: ChunkingGridConfig, raw: Artifact, results: list[dict]) -> tuple[Path, dict]:
    """The grid's table and figures in a new folder under the store's ``reports``; returns the folder and
    the best cell per measure."""
    texts, questions = load_eval_set(_eval_folder(raw), grid.corpora)
    encoding = cl100k()
    lengths = [len(encoding.encode(texts[q.corpus_id][s:e], disallowed_special=()))
               for q in questions for s, e in q.references]
    out = grid.store.resolve() / "reports" / f"chunking-{time.strftime('%Y%m%d-%H%M%S')}"
    settings = {"size_unit": grid.size_unit, "metric_unit": grid.units, "std": grid.std, "scope": grid.scope,
                "corpora": grid.corpora or sorted(texts), "questions": len(questions)}
    return out, write_grid_report(results, lengths, [len(q.references) for q in questions], out, settings)
