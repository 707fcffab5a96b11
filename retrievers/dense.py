"""Dense retrieval: sentence-transformers embeddings in a FAISS inner-product index."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Literal, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PositiveInt,
    field_validator,
    model_validator,
)

from rbench.core.configfile import PathOrName
from rbench.core.errors import ConfigError, DataError, MissingExtraError
from rbench.retrievers.base import RETRIEVERS, Hits, Retriever, Run
from rbench.retrievers.corpus import IdIndex, column_rows
from rbench.retrievers.models import (
    Encoding,
    canonical_id,
    embed,
    load_encoder,
    model_identity,
    resolve_model,
)
from rbench.retrievers.prebuilt import (
    IDS_PATTERN,
    check_ids,
    fingerprint,
    index_folder,
    match_ids,
    native_ids,
    read_pointer,
    sample_positions,
    write_pointer,
)

log = logging.getLogger("rbench")
CHUNK = 1024
IVF_FIELDS = ("nlist", "pq_m", "train_size", "on_disk")
IVFDATA = "index.ivfdata"
POINTS_PER_CENTROID = 39
"""FAISS's minimum of training points per k-means centroid (``Clustering.min_points_per_centroid``);
fewer, and it prints a warning per k-means (one per PQ sub-quantizer: 96 for MiniLM at the defaults)."""
PROBE_QUERIES = 100
"""Queries of a run searched a second time exhaustively, to measure an approximate index's recall."""


def _with_encoding(params: dict, encoding: Encoding) -> dict:
    """Index params plus what passage embeddings depend on, when it differs from the default."""
    side = encoding.document_side()
    return {**params, "encoding": side} if side else params


def import_faiss():
    """Import faiss (faiss-cpu or faiss-gpu, whichever is installed) with a clear error."""
    try:
        import faiss
    except ImportError:
        raise MissingExtraError("faiss-cpu", "dense", "dense retrieval") from None
    return faiss


def gpu_clustering_index(dim: int):
    """An exact inner-product index over every GPU faiss-gpu sees, for k-means; None without GPUs."""
    faiss = import_faiss()
    if hasattr(faiss, "StandardGpuResources") and faiss.get_num_gpus() > 0:
        return faiss.index_cpu_to_all_gpus(faiss.IndexFlatIP(dim))
    return None


def train_ivf(index, sample: np.ndarray) -> bool:
    """Train an inverted-file index on ``sample``; its k-means assigns points on the GPUs when
    there are any (``gpu_clustering_index``). Returns whether it did."""
    faiss = import_faiss()
    clustering = gpu_clustering_index(index.d)
    ivf = faiss.extract_index_ivf(index)
    if clustering is not None:
        ivf.clustering_index = clustering
    try:
        index.train(sample)
    finally:
        if clustering is not None:
            ivf.clustering_index = None
    return clustering is not None


class DenseParams(BaseModel):
    """``model``: registry id, alias, hub id or folder; ``encoding``: prompts and loading
    options (:class:`rbench.retrievers.models.Encoding`; a known model gets its authors' defaults);
    ``index``: exact ``flat``, ``hnsw``, or the inverted-file indexes for large corpora,
    ``ivf_flat`` and ``ivf_pq`` (``nlist`` lists, default about 4 sqrt(N); ``pq_m`` bytes per
    vector, default dim / 4; both trained on a sample of ``train_size`` vectors spread over the
    shards), searched over ``nprobe`` lists (a search setting: not part of the index key);
    ``on_disk`` (IVF only): each shard's lists are built alone and merged on disk into
    ``index.ivfdata`` (``faiss.contrib.ondisk``), read memory-mapped, for indexes larger than memory;
    ``min_score``: a cosine-similarity threshold in [0, 1] (RAGO's vector retriever), so a
    query may return fewer than k hits. ``prebuilt``: search an existing FAISS index instead of
    encoding the corpus: a folder with ``index.faiss`` and ``ids.parquet`` (an ``object_id``
    column; rbench's own layout) or Pyserini's ``index`` and ``docid`` (one id a line); its
    vectors must come from ``model`` (with unit length, for inner product), in id-map order; its
    ids are rbench's object ids or the corpus's own (``ids``, as for ``bm25``)."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    model: PathOrName = "sentence-transformers/all-MiniLM-L6-v2"
    index: Literal["flat", "hnsw", "ivf_flat", "ivf_pq"] = "flat"
    hnsw_m: PositiveInt = 32
    """``hnsw``: neighbours per node."""
    ef_construction: PositiveInt = 200
    """``hnsw``: the candidate list's size while building."""
    ef_search: PositiveInt = 128
    """``hnsw``: the candidate list's size while searching (a search setting, not part of the index key)."""
    nlist: PositiveInt | None = None
    """IVF: the number of inverted lists; default about 4 sqrt(N)."""
    pq_m: PositiveInt | None = None
    """``ivf_pq``: bytes per vector (sub-quantizers); default dim / 4."""
    train_size: PositiveInt = 100_000
    """IVF: vectors sampled across the shards to train the quantizers."""
    on_disk: bool = False
    nprobe: PositiveInt = 32
    """IVF: lists searched per query (a search setting, not part of the index key)."""
    batch_size: PositiveInt = 64
    """Texts encoded per batch."""
    device: str | None = Field(None, description="torch device; default: CUDA when available")
    min_score: float | None = Field(None, ge=0, le=1, description="keep hits with cosine similarity >= this")
    encoding: Encoding = Encoding()
    prebuilt: PathOrName | None = None
    ids: str = Field("auto", pattern=IDS_PATTERN, description="what a prebuilt index's ids are: auto, object_id, "
                     "doc_id or metadata.<field>")

    @field_validator("prebuilt")
    @classmethod
    def _index(cls, value: str | None) -> str | None:
        if value is None:
            return None
        folder = index_folder(value, "FAISS index", ("index.faiss", "index"))
        if not ((folder / "index.faiss").is_file() and (folder / "ids.parquet").is_file()) and not (
                (folder / "index").is_file() and (folder / "docid").is_file()):
            raise ValueError(f"prebuilt FAISS index {value!r} needs index.faiss with ids.parquet, or Pyserini's "
                             "index with docid")
        return str(folder)

    @model_validator(mode="after")
    def _ids_of_prebuilt(self):
        check_ids(self.ids, self.prebuilt)
        return self

    @model_validator(mode="after")
    def _on_disk_ivf(self) -> "DenseParams":
        if self.on_disk and self.index not in ("ivf_flat", "ivf_pq"):
            raise ValueError(f"on_disk keeps inverted lists on disk: it needs index ivf_flat or ivf_pq, "
                             f"not {self.index!r}")
        return self

    @model_validator(mode="before")
    @classmethod
    def _authors_defaults(cls, data):
        if isinstance(data, dict):
            given = data.get("encoding")
            if isinstance(given, Encoding):
                given = given.model_dump(exclude_unset=True)
            model = canonical_id(str(data.get("model", cls.model_fields["model"].default)))
            data = {**data, "encoding": Encoding.for_model(model, given)}
        return data

    @field_validator("model")
    @classmethod
    def _known(cls, name: str) -> str:
        return resolve_model(canonical_id(name)).id


@RETRIEVERS.register
class Dense(Retriever):
    """Cosine similarity (normalised embeddings, inner product) over FAISS."""

    name = "dense"
    description = "sentence-transformers embeddings + FAISS (flat, HNSW, IVF-Flat, IVF-PQ; GPU with faiss-gpu)"
    conformance = {"": {"model": "static-64d"}, "hnsw": {"model": "static-64d", "index": "hnsw"}}
    Params = DenseParams
    index_fields = ("model", "index", "hnsw_m", "ef_construction", "nlist", "pq_m", "train_size", "on_disk",
                    "encoding", "prebuilt", "ids")
    search_fields = ("ef_search", "nprobe", "min_score")
    shard_fields = ("model",)
    uses_model = True
    native = True
    version = 2
    _native = None

    def model(self) -> str:
        return self.params.model

    def model_identities(self) -> list[str]:
        prebuilt = [fingerprint(Path(self.params.prebuilt))] if self.params.prebuilt else []
        return [model_identity(self.params.model), *prebuilt]

    def sharded(self) -> bool:
        return self.params.prebuilt is None

    def index_params(self) -> dict:
        """The index-shaping params; the IVF ones only for the index kinds they shape, so that
        flat and HNSW keys stay as they were. Over an existing index: the model and the index."""
        if self.params.prebuilt:
            return _with_encoding({"model": self.params.model, "prebuilt": self.params.prebuilt,
                                   "ids": self.params.ids}, self.params.encoding)
        unused = {"flat": IVF_FIELDS, "hnsw": IVF_FIELDS, "ivf_flat": ("pq_m",), "ivf_pq": ()}[self.params.index]
        params = {k: v for k, v in super().index_params().items()  # encoding below; prebuilt and ids: None here
                  if k not in unused and k not in ("encoding", "prebuilt", "ids") and not (k == "on_disk" and not v)}
        return _with_encoding(params, self.params.encoding)

    def shard_params(self) -> dict:
        return _with_encoding(super().shard_params(), self.params.encoding)

    def _encoder(self):
        if getattr(self, "_model", None) is None:
            self._model = load_encoder(resolve_model(self.params.model), self.params.device, self.params.encoding)
        return self._model

    def encode(self, texts: list[str], side: Literal["query", "document"] = "query") -> np.ndarray:
        """Unit-normalised float32 embeddings of queries (with the query prompt) or passages."""
        return embed(self._encoder(), texts, self.params.encoding, side, self.params.batch_size)

    def _new_index(self, dim: int, total: int):
        faiss = import_faiss()
        p = self.params
        if p.index == "hnsw":
            index = faiss.IndexHNSWFlat(dim, p.hnsw_m, faiss.METRIC_INNER_PRODUCT)
            index.hnsw.efConstruction = p.ef_construction
            return index
        if p.index == "flat":
            return faiss.IndexFlatIP(dim)
        trained_on = min(total, p.train_size)
        nlist = p.nlist or max(1, min(int(4 * total ** 0.5), trained_on // POINTS_PER_CENTROID))
        least = max(POINTS_PER_CENTROID * nlist, 2 * POINTS_PER_CENTROID if p.index == "ivf_pq" else 0)
        if trained_on < least:
            fix = (f"use index flat (exact, and as fast at this size) or a corpus of {least:,} objects or more"
                   if not p.nlist else f"lower nlist to at most {trained_on // POINTS_PER_CENTROID:,}" + (
                       f" or raise train_size to {least:,} or more" if total >= least else ""))
            raise ConfigError(f"dense: index {p.index} with {nlist:,} list(s) trains on {trained_on:,} vectors (the "
                              f"corpus's {total:,} objects, train_size {p.train_size:,}), and FAISS asks at least "
                              f"{least:,} ({POINTS_PER_CENTROID} per k-means centroid): {fix}")
        quantizer = faiss.IndexFlatIP(dim)
        if p.index == "ivf_flat":
            return faiss.IndexIVFFlat(quantizer, dim, nlist, faiss.METRIC_INNER_PRODUCT)
        m = p.pq_m or max(d for d in range(1, dim // 4 + 1) if dim % d == 0)
        if dim % m:
            raise ValueError(f"dense: pq_m {m} must divide the embedding dimension {dim}")
        bits = min(8, (trained_on // POINTS_PER_CENTROID).bit_length() - 1)  # 2**bits centroids a sub-quantizer
        return faiss.IndexIVFPQ(quantizer, dim, nlist, m, bits, faiss.METRIC_INNER_PRODUCT)

    def _training_sample(self, shards: Sequence[Path], total: int) -> np.ndarray:
        """About ``train_size`` vectors spread evenly over every shard (memory-mapped, not loaded)."""
        step = max(1, total // self.params.train_size)
        parts = [np.load(Path(s) / "embeddings.npy", mmap_mode="r") for s in shards]
        starts = np.cumsum([0] + [len(v) for v in parts])
        return np.ascontiguousarray(np.concatenate(
            [v[(-start) % step::step] for v, start in zip(parts, starts)]), dtype=np.float32)

    def index(self, corpus: Path, folder: Path) -> dict:
        total = pq.ParquetFile(corpus).metadata.num_rows
        if self.params.prebuilt:
            return self._point_at(Path(self.params.prebuilt), folder, corpus, total)
        shard = folder / ".encoded"
        shard.mkdir()
        encoded = self.encode_shard(corpus, 0, total, shard)
        info = self.index_from_shards(corpus, [shard], folder)
        for f in shard.iterdir():
            f.unlink()
        shard.rmdir()
        return {**info, **{k: encoded[k] for k in ("encode_seconds", "passages_per_second")}}

    def encode_shard(self, corpus: Path, start: int, stop: int, folder: Path, checkpoint=None) -> dict:
        """Encode rows ``start:stop`` into ``embeddings.npy``; with a checkpoint, each chunk of
        ``CHUNK`` rows is kept as it finishes, so a killed build resumes with the rest."""
        texts = column_rows(corpus, "text", start, stop)
        self._encoder()  # loaded before the clock starts: passages/s measures encoding only
        parts, seconds, resumed = [], 0.0, 0
        for offset in range(0, len(texts), CHUNK):
            name = f"chunk-{offset:09d}.npy"
            if checkpoint is not None and checkpoint.done(name):
                parts.append(checkpoint.read_array(name))
                resumed += 1
                continue
            t0 = time.perf_counter()
            vectors = self.encode(texts[offset : offset + CHUNK], "document")
            seconds += time.perf_counter() - t0
            if checkpoint is not None:
                checkpoint.write_array(name, vectors)
            parts.append(vectors)
            log.info("dense: encoded rows %d-%d of shard %d:%d (%.0f/s)", start + offset,
                     start + offset + len(vectors), start, stop, len(vectors) / max(time.perf_counter() - t0, 1e-9))
        dim = self._encoder().get_sentence_embedding_dimension() if not parts else parts[0].shape[1]
        matrix = np.concatenate(parts) if parts else np.zeros((0, dim), dtype=np.float32)
        np.save(folder / "embeddings.npy", matrix)
        encoded = len(texts) - sum(len(p) for p in parts[:resumed])
        return {"rows": len(texts), "encoded": encoded, "chunks_resumed": resumed,
                "chunks_redone": checkpoint.redone if checkpoint is not None else 0,
                "encode_seconds": round(seconds, 6),
                "passages_per_second": round(encoded / seconds, 1) if seconds else None}

    def index_from_shards(self, corpus: Path, shards: Sequence[Path], folder: Path) -> dict:
        """Add the shards' vectors to a new index one shard at a time (never all of them in memory
        beside the index) and write the corpus's object ids beside it, streamed. With ``on_disk``,
        each shard fills its own copy of the trained index, written to disk, and the copies'
        lists are merged into ``index.ivfdata``: memory holds one shard's lists at a time."""
        faiss = import_faiss()
        started = time.perf_counter()
        total = pq.ParquetFile(corpus).metadata.num_rows
        first = first_of_same_text(corpus)
        maps = [np.load(Path(shard) / "embeddings.npy", mmap_mode="r") for shard in shards]
        starts = np.cumsum([0] + [len(v) for v in maps])
        index, added, trained, parts, kmeans_on_gpus = None, 0, 0.0, [], False
        for shard, vectors in zip(shards, maps):
            if index is None:
                index = self._new_index(vectors.shape[1], total)
                if not index.is_trained:
                    t0 = time.perf_counter()
                    kmeans_on_gpus = train_ivf(index, self._training_sample(shards, total))
                    trained = time.perf_counter() - t0
            target = faiss.clone_index(index) if self.params.on_disk else index
            for offset in range(0, len(vectors), CHUNK):
                chunk = np.array(vectors[offset : offset + CHUNK], dtype=np.float32)
                _same_vectors(chunk, np.arange(added + offset, added + offset + len(chunk)), first, maps, starts)
                target.add(chunk)
            if self.params.on_disk:
                parts.append(str(folder / f".lists-{len(parts):05d}.faiss"))
                faiss.write_index(target, parts[-1])
                del target
            added += len(vectors)
        if index is None or added != total:
            raise ValueError(f"dense: shards hold {added} vectors for a corpus of {total} objects")
        if self.params.on_disk:
            from faiss.contrib.ondisk import merge_ondisk

            merge_ondisk(index, parts, str(folder / IVFDATA), shift_ids=True)
            for part in parts:
                Path(part).unlink()
        faiss.write_index(index, str(folder / "index.faiss"))
        with pq.ParquetWriter(folder / "ids.parquet", pa.schema([("object_id", pa.string())])) as ids:
            for batch in pq.ParquetFile(corpus).iter_batches(batch_size=1 << 16, columns=["object_id"]):
                ids.write_batch(batch)
        ivf = {"nlist": index.nlist, "train_seconds": round(trained, 2), "kmeans_on_gpus": kmeans_on_gpus,
               **({"pq_bits": index.pq.nbits} if hasattr(index, "pq") else {})} if hasattr(index, "nlist") else {}
        return {"indexed": total, "dim": index.d, "shards": len(shards), **ivf,
                "repeated_texts": int((first != np.arange(len(first))).sum()),
                "index_bytes": sum(f.stat().st_size for f in (folder / "index.faiss", folder / IVFDATA) if f.exists()),
                "index_seconds": round(time.perf_counter() - started, 2)}

    def _point_at(self, source: Path, folder: Path, corpus: Path, total: int) -> dict:
        """Check an existing index against its id map, the corpus and ``model``, and point at it."""
        faiss = import_faiss()
        index_file, ids = _layout(source)
        index = faiss.read_index(str(index_file),
                                 faiss.IO_FLAG_MMAP | faiss.IO_FLAG_READ_ONLY | faiss.IO_FLAG_ONDISK_SAME_DIR)
        id_map = _read_ids(ids)
        count = len(id_map)
        if count != index.ntotal:
            raise DataError(f"dense: the prebuilt index {index_file} holds {index.ntotal} vectors but its id map {ids} "
                            f"has {count} ids: give the id map written with this index")
        dim = self.encode(["dimension"], "query").shape[1]
        if dim != index.d:
            raise DataError(f"dense: the prebuilt index {index_file} holds {index.d}-d vectors but model "
                            f"{self.params.model} encodes {dim}-d queries: set model to the one the index was "
                            "built with")
        sample = id_map.take(pa.array(sample_positions(count), pa.int64())).to_pylist()
        kind = match_ids(corpus, sample, count, self.params.ids, str(index_file))
        return write_pointer(folder, str(source), fingerprint(source), indexed=int(index.ntotal), dim=index.d,
                             corpus_objects=total, index_bytes=index_file.stat().st_size, ids=kind)

    def load(self, folder: Path) -> None:
        faiss = import_faiss()
        pointer = read_pointer(folder)
        index_file, ids = _layout(Path(pointer["location"])) if pointer else (folder / "index.faiss",
                                                                               folder / "ids.parquet")
        index = faiss.read_index(str(index_file), faiss.IO_FLAG_ONDISK_SAME_DIR)  # lists beside it, wherever it is
        ivf = faiss.try_extract_index_ivf(index)
        if ivf is not None:
            ivf.nprobe = self.params.nprobe  # copied to the GPU index below
        self._approximate = _approximation(index)
        if isinstance(index, faiss.IndexHNSW):
            index.hnsw.efSearch = self.params.ef_search
        elif hasattr(faiss, "StandardGpuResources") and faiss.get_num_gpus() > 0:
            index = faiss.index_cpu_to_all_gpus(index)
        self._index = index
        self._ids = _read_ids(ids)
        self._rows = None
        self._native = None
        self._probe: list[np.ndarray] = []
        self._encoder()

    def open(self, folders: Sequence[Path], corpus: Path) -> None:
        super().open(folders, corpus)
        self._native = native_ids(folders[0], corpus)

    def vectors(self, object_ids: Sequence[str]) -> np.ndarray:
        """The stored unit vectors of indexed objects (read back from the index, not re-encoded; IVF-PQ
        gives their quantized approximations)."""
        if self._native is not None:
            raise ConfigError(f"dense: the prebuilt index {self.params.prebuilt} is keyed by the corpus's "
                              f"{self._native.kind}, and a method that reads stored vectors by object id (ARM's "
                              "expansion) needs object ids: export the prepared corpus and index that")
        if getattr(self, "_rows", None) is None:
            self._rows = IdIndex(self._ids)
            ivf = import_faiss().try_extract_index_ivf(self._index)
            if ivf is not None:  # IVF lists find a vector by id only through a direct map
                ivf.make_direct_map()
        if not object_ids:
            return np.zeros((0, self._index.d), dtype=np.float32)
        rows = self._rows.rows(object_ids)
        if (rows < 0).any():
            raise KeyError(f"object id(s) {[o for o, r in zip(object_ids, rows) if r < 0][:3]} are not in the index")
        return np.vstack([self._index.reconstruct(int(r)) for r in rows]).astype(np.float32)

    def neighbours(self, object_ids: Sequence[str], k: int) -> dict[str, Hits]:
        """Per indexed object, its ``k`` nearest other objects (searched with its stored vector)."""
        if not object_ids:
            return {}
        scores, rows = self._index.search(self.vectors(object_ids), min(k + 1, len(self._ids)))
        return {oid: [(name, s) for name, s in hits if name != oid][:k]
                for oid, hits in zip(object_ids, self._named(rows, scores))}

    def search(self, queries: Mapping[str, str], k: int) -> Run:
        qids = list(queries)
        if not qids:
            return {}
        floor = -np.inf if self.params.min_score is None else self.params.min_score
        vectors = self.encode([queries[q] for q in qids])
        found = self.search_vectors(vectors, k)
        if getattr(self, "_approximate", None) and sum(len(v) for v in self._probe) < PROBE_QUERIES:
            self._probe.append(vectors[: PROBE_QUERIES - sum(len(v) for v in self._probe)])
            self._probe_k = getattr(self, "_probe_k", k)
        run = {q: [(name, s) for name, s in hits if s >= floor] for q, hits in zip(qids, found)}
        return self._native.translate(run) if self._native is not None else run

    def stats(self) -> dict:
        """With an approximate index: ``approximate``, how much of an exhaustive search's top k its top k
        holds on the run's first ``PROBE_QUERIES`` queries (each searched again over every stored vector)."""
        probe = getattr(self, "_probe", None)
        if not probe:
            return {}
        kind, against = self._approximate
        sample = np.ascontiguousarray(np.vstack(probe), dtype=np.float32)
        k = min(self._probe_k, len(self._ids))
        setting = {"hnsw": f"ef_search {self.params.ef_search}"}.get(kind, f"nprobe {self.params.nprobe}")
        out = {"index": kind, "setting": setting, "queries": len(sample), "k": k, "against": against}
        exact = _exhaustive(self._index, sample, k)
        if exact is None:
            return {"approximate": {**out, "recall_of_exhaustive": None, "against": "not measured on the GPUs"}}
        found = self._index.search(sample, k)[1]
        recall = np.mean([len(set(f[f >= 0]) & set(e[e >= 0])) / max(1, int((e >= 0).sum()))
                          for f, e in zip(found, exact)])
        return {"approximate": {**out, "recall_of_exhaustive": round(float(recall), 4)}}

    def hold(self, object_ids: Sequence[str], vectors: np.ndarray) -> None:
        """Search these unit vectors, in an exact in-memory index, instead of a built index: for a caller
        that encodes its own passages with :meth:`encode`, as the chunking grid does."""
        index = import_faiss().IndexFlatIP(vectors.shape[1])
        index.add(np.ascontiguousarray(vectors, dtype=np.float32))
        self._index, self._ids, self._rows, self._native = index, pa.array(list(object_ids), pa.string()), None, None

    def search_vectors(self, vectors: np.ndarray, k: int) -> list[Hits]:
        """The ``k`` nearest indexed objects of each query vector, best first."""
        if not len(self._ids):
            return [[] for _ in range(len(vectors))]
        scores, rows = self._index.search(np.ascontiguousarray(vectors, dtype=np.float32), min(k, len(self._ids)))
        return self._named(rows, scores)

    def _named(self, rows: np.ndarray, scores: np.ndarray) -> list[list[tuple[str, float]]]:
        """FAISS result rows as ``(object_id, score)`` lists (empty slots, row -1, left out); ids are
        looked up in the Arrow id column, not a Python list of the whole corpus."""
        names = self._ids.take(pa.array(np.maximum(rows, 0).ravel())).to_pylist()
        width = rows.shape[1]
        return [[(names[i * width + j], float(s)) for j, (r, s) in enumerate(zip(row, score)) if r >= 0]
                for i, (row, score) in enumerate(zip(rows, scores))]


def first_of_same_text(corpus: Path) -> np.ndarray:
    """Per corpus row, the first row whose text is the same (its own row for a text met first),
    from a 16-byte BLAKE2b digest of each text, read in batches."""
    import hashlib

    digests = bytearray()
    for batch in pq.ParquetFile(corpus).iter_batches(batch_size=1 << 16, columns=["text"]):
        for text in batch.column(0).to_pylist():
            digests += hashlib.blake2b(str(text).encode("utf-8"), digest_size=16).digest()
    keys = np.frombuffer(bytes(digests), dtype="V16")
    _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    return first[inverse.ravel()].astype(np.int64)


def _same_vectors(chunk: np.ndarray, rows: np.ndarray, first: np.ndarray, maps: Sequence[np.ndarray],
                  starts: np.ndarray) -> None:
    """Give each row of ``chunk`` whose text came earlier the vector of that first row (read from the
    memory-mapped shards): one text, one vector, whichever batch encoded it (as BEIR's and MTEB's
    length-sorted batches give identical texts)."""
    repeated = np.nonzero(first[rows] != rows)[0]
    sources = first[rows[repeated]]
    shard_of = np.searchsorted(starts, sources, side="right") - 1
    for shard in np.unique(shard_of):
        here = shard_of == shard
        chunk[repeated[here]] = maps[shard][sources[here] - starts[shard]]


def _approximation(index) -> tuple[str, str] | None:
    """``(kind, what an exhaustive search compares)`` of an index that may miss a nearest neighbour;
    None for an exact one (flat, or IVF-Flat searching every list)."""
    faiss = import_faiss()
    if isinstance(index, faiss.IndexHNSW):
        return "hnsw", "every stored vector"
    ivf = faiss.try_extract_index_ivf(index)
    if ivf is None or (ivf.nprobe >= ivf.nlist and not isinstance(ivf, faiss.IndexIVFPQ)):
        return None
    if isinstance(ivf, faiss.IndexIVFPQ):
        return "ivf_pq", "every list's PQ codes (the loss of the codes themselves is not in it)"
    return "ivf_flat", "every stored vector"


def _exhaustive(index, vectors: np.ndarray, k: int) -> np.ndarray | None:
    """The rows of ``vectors``' top ``k`` over every vector ``index`` stores: an HNSW graph's flat
    storage, or an inverted-file index searched over all its lists; None for an index on the GPUs
    (not measured)."""
    faiss = import_faiss()
    if isinstance(index, faiss.IndexHNSW):
        return faiss.downcast_index(index.storage).search(vectors, k)[1]
    ivf = faiss.try_extract_index_ivf(index)
    if ivf is None:
        return None
    nprobe = ivf.nprobe
    ivf.nprobe = ivf.nlist
    try:
        return index.search(vectors, k)[1]
    finally:
        ivf.nprobe = nprobe


def _layout(folder: Path) -> tuple[Path, Path]:
    """The index file and id map of an index folder: rbench's layout, else Pyserini's."""
    if (folder / "index.faiss").is_file():
        return folder / "index.faiss", folder / "ids.parquet"
    return folder / "index", folder / "docid"


def _read_ids(path: Path) -> pa.Array:
    """An id map as one Arrow string column: ``ids.parquet`` or Pyserini's ``docid`` lines."""
    if path.suffix == ".parquet":
        return pq.read_table(path, columns=["object_id"]).column("object_id").combine_chunks()
    import pyarrow.csv as pcsv

    table = pcsv.read_csv(path, read_options=pcsv.ReadOptions(column_names=["object_id"]),
                          parse_options=pcsv.ParseOptions(delimiter="\t", quote_char=False),
                          convert_options=pcsv.ConvertOptions(column_types={"object_id": pa.string()}))
    return table.column("object_id").combine_chunks()
