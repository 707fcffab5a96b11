"""Rerankers by family: how a (query, passage) pair becomes a score.

- ``cross-encoder``: a sentence-transformers ``CrossEncoder`` (a sequence-classification head, or
  the configuration its authors ship with the model).
- ``mxbai-v2``: mixedbread's mxbai-rerank-v2, a causal LM scored as its authors score it
  (``mxbai_rerank.MxbaiRerankV2``, mxbai-rerank 0.1.6): the pair in the authors' chat template
  and task prompt, read from their package, and the score logit("1") - logit("0") at the last
  position. The authors' class cannot run on transformers 5 (``tokenizer.prepare_for_model`` is
  gone), so its tokenisation, truncation, length-bucketed batches and left padding are done
  here, and checked against that class in ARM's pins (``tests/integration/retrievers/test_mxbai_v2.py``).

Which family a model is follows from its files (:func:`model_family`): a causal-LM checkpoint is
never wrapped in another family's head or template; one whose family is not known is refused
with the settings to choose from.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any, Literal, Mapping, Sequence

from pydantic import BaseModel, ConfigDict, Field, PositiveInt, field_validator, model_validator

from rbench.core.configfile import PathOrName
from rbench.core.errors import ConfigError, MissingExtraError
from rbench.core.imports import one_load_at_a_time
from rbench.retrievers.base import Run

FAMILIES = ("cross-encoder", "mxbai-v2")
DEFAULTS = {"cross-encoder": {"max_length": 512, "batch_size": 32},
            "mxbai-v2": {"max_length": 8192, "batch_size": 8}}
"""Each family's defaults: 512 tokens and 32 pairs as rbench's cross-encoder always ran; 8,192 tokens
(``MxbaiRerankV2.__init__``) and 8 pairs (ARM's ``rank(..., batch_size=8)``, ``src/retrieval/dense_rerank.py``
line 53 of apostolhskouk/ARM@5a6cb92) for mxbai-rerank-v2."""
MXBAI_V2 = re.compile(r"mxbai-rerank-[a-z]+-v2", re.IGNORECASE)


def check_model_location(model: str) -> str:
    """Accept an existing local folder or a hub id ``org/name``; reject a missing path."""
    if Path(model).expanduser().exists():
        return str(Path(model).expanduser().resolve())
    if model.startswith(("/", ".", "~")) or model.count("/") != 1:
        raise ValueError(
            f"reranker model {model!r} is neither an existing folder nor a hub id 'org/name': "
            "check the path, or give a hub id such as 'mixedbread-ai/mxbai-rerank-large-v2'"
        )
    return model


class RerankerParams(BaseModel):
    """A reranking step: the model, its family and how it runs."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    model: PathOrName
    """The reranker: a hub id (``org/name``) or a local folder."""
    family: Literal["auto", "cross-encoder", "mxbai-v2"] = "auto"
    """How it scores a pair: ``cross-encoder`` (sentence-transformers), ``mxbai-v2`` (mixedbread's
    template and "1"/"0" logits), or ``auto``: from the model's files (an mxbai-rerank-*-v2 is
    ``mxbai-v2``; another causal LM is refused until a family is named)."""
    batch_size: PositiveInt | None = None
    """Pairs scored per batch; default 32 (cross-encoder) or 8 (mxbai-v2, ARM's)."""
    max_length: PositiveInt | None = None
    """Pairs are cut to this many of the model's tokens; default 512 (cross-encoder) or 8,192 (mxbai-v2)."""
    device: str | None = Field(None, description="torch device; default: CUDA when available")

    @field_validator("model")
    @classmethod
    def _exists(cls, model: str) -> str:
        return check_model_location(model)

    @model_validator(mode="after")
    def _family_fits(self) -> "RerankerParams":
        if Path(self.model).is_dir():
            resolve_family(self.model, self.family)
        return self

    def setting(self, name: str, family: str) -> int:
        """``batch_size`` or ``max_length`` as set, else the family's default."""
        value = getattr(self, name)
        return DEFAULTS[family][name] if value is None else value


class Files(BaseModel):
    """What a reranker's files say of it: the family they name (None: they name none), whether
    it is a causal LM, and why."""

    family: str | None
    causal: bool
    why: str


def model_family(model: str) -> Files:
    """What the files of ``model`` (a local folder, or a hub id in the local cache) say it is."""
    if MXBAI_V2.search(model):
        return Files(family="mxbai-v2", causal=True, why="an mxbai-rerank-v2 model (by its name)")
    path = _model_file(model, "config.json")
    if path is None:
        return Files(family=None, causal=False, why="its config.json is not readable here")
    try:
        config = json.loads(path.read_text())
        architectures = list(config.get("architectures") or [])
    except (OSError, ValueError, AttributeError, TypeError):
        return Files(family=None, causal=False, why=f"its {path} is not a JSON object")
    if MXBAI_V2.search(str(config.get("_name_or_path") or "")):
        return Files(family="mxbai-v2", causal=True, why="an mxbai-rerank-v2 model (by its config's name)")
    causal = [str(a) for a in architectures if str(a).endswith("ForCausalLM")]
    if not causal:
        return Files(family="cross-encoder", causal=False, why=f"a {', '.join(architectures) or 'model'} checkpoint")
    if _model_file(model, "config_sentence_transformers.json") is not None:
        return Files(family="cross-encoder", causal=True,
                     why=f"a {causal[0]} with its authors' sentence-transformers configuration")
    return Files(family=None, causal=True,
                 why=f"a causal LM ({causal[0]}) with no reranking head or sentence-transformers configuration")


def resolve_family(model: str, family: str) -> str:
    """``family`` checked against the model's files (``auto``: taken from them; a cross-encoder where
    they cannot be read, checked again when the model is loaded); a causal LM given to the
    cross-encoder without its own configuration, or a non-causal model given to mxbai-v2, is a
    ConfigError naming the setting to choose."""
    files = model_family(model)
    if family == "auto" and files.family is None and files.causal:
        raise ConfigError(f"reranker {model!r} is {files.why}: scoring it as a cross-encoder would put a yes/no "
                          "head without a template on it. Say how it scores: family: mxbai-v2 (mixedbread's "
                          "template, logit '1' - '0'), or give a cross-encoder")
    if family == "auto":
        return files.family or "cross-encoder"
    if family == "cross-encoder" and files.causal and files.family != "cross-encoder":
        raise ConfigError(f"reranker {model!r} is {files.why}; family: cross-encoder would score it with "
                          "another family's head: choose family: auto, or give a cross-encoder")
    if family == "mxbai-v2" and files.family == "cross-encoder" and not files.causal:
        raise ConfigError(f"reranker {model!r} is {files.why}, not a causal LM: family: mxbai-v2 needs one "
                          "(mixedbread-ai/mxbai-rerank-base-v2 or -large-v2); choose family: cross-encoder or auto")
    return family


def _model_file(model: str, name: str) -> Path | None:
    folder = Path(model).expanduser()
    if folder.is_dir():
        return folder / name if (folder / name).is_file() else None
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return None
    try:
        cached = try_to_load_from_cache(model, name)
    except Exception:  # a malformed id: check_model_location has refused it already
        return None
    return Path(cached) if isinstance(cached, str) else None


class _Scorer:
    """What every family's scorer keeps: its params and the pairs scored in how many seconds."""

    family: str

    def __init__(self, params: RerankerParams):
        self.params = params
        self.pairs, self.seconds = 0, 0.0

    def stats(self) -> dict[str, Any]:
        """Pairs scored and throughput."""
        return {"pairs_scored": self.pairs,
                "pairs_per_second": round(self.pairs / self.seconds, 1) if self.seconds else None}


class CrossEncoderScorer(_Scorer):
    """A sentence-transformers ``CrossEncoder`` that rescores candidates against a query text."""

    family = "cross-encoder"
    _encoder = None

    @one_load_at_a_time
    def load(self) -> None:
        """Load the model (once)."""
        if self._encoder is not None:
            return
        try:
            from sentence_transformers import CrossEncoder
        except ImportError:
            raise MissingExtraError("sentence-transformers", "dense", "cross-encoder reranking") from None
        p = self.params
        self._encoder = CrossEncoder(p.model, device=p.device, max_length=p.setting("max_length", self.family))
        if resolve_family(p.model, p.family) != self.family:  # its files, now that they are here
            raise ConfigError(f"reranker {p.model!r}, now downloaded, is {model_family(p.model).why}, not a "
                              "cross-encoder: run again (family: auto now reads its files) or set its family")

    def rescore(self, candidates: Mapping[str, tuple[str, Sequence[str]]], texts: Mapping[str, str]) -> Run:
        """Per query id, its candidates ``(object_id, score)`` best first (ties in candidate order),
        scored against its text."""
        self.load()
        pairs = [(text, texts[oid]) for text, oids in candidates.values() for oid in oids]
        started = time.perf_counter()
        batch = self.params.setting("batch_size", self.family)
        scores = self._encoder.predict(pairs, batch_size=batch, show_progress_bar=False) if pairs else []
        self.seconds += time.perf_counter() - started
        self.pairs += len(pairs)
        run, i = {}, 0
        for q, (_, oids) in candidates.items():
            run[q] = _ranked(oids, [float(s) for s in scores[i:i + len(oids)]])
            i += len(oids)
        return run


class MxbaiV2Scorer(_Scorer):
    """mxbai-rerank-v2 as ``mxbai_rerank.MxbaiRerankV2`` scores it (module docstring)."""

    family = "mxbai-v2"
    _model = None

    @one_load_at_a_time
    def load(self) -> None:
        """Load the model and the authors' template (once)."""
        if self._model is not None:
            return
        try:
            import torch
            from transformers import AutoModelForCausalLM, AutoTokenizer
        except ImportError:
            raise MissingExtraError("transformers", "llm", "mxbai-rerank-v2 reranking") from None
        try:
            from mxbai_rerank import MxbaiRerankV2
        except ImportError:
            raise MissingExtraError("mxbai-rerank", "dense", "mxbai-rerank-v2's template") from None
        p = self.params
        device = p.device or ("cuda" if torch.cuda.is_available() else "cpu")
        tokenizer = AutoTokenizer.from_pretrained(p.model, padding_side="left")
        if tokenizer.pad_token_id is None:
            raise ConfigError(f"reranker {p.model!r} has no padding token, which mxbai-rerank-v2 pads its "
                              "batches with: give a tokenizer with pad_token set")
        model = AutoModelForCausalLM.from_pretrained(p.model, dtype="auto").to(device).eval()
        self._template = _Template(MxbaiRerankV2, tokenizer, model.config.max_position_embeddings,
                                   p.setting("max_length", self.family))
        self._tokenizer, self._device, self._torch, self._model = tokenizer, device, torch, model

    def scores(self, query: str, documents: Sequence[str]) -> list[float]:
        """One query's documents scored: length-sorted batches (``batched.utils.bucket_batch_iter``
        as ``BaseReranker._compute_scores`` uses it), each padded on the left to a multiple of 8."""
        self.load()
        size = self.params.setting("batch_size", self.family)
        order = list(range(len(documents)))
        if len(documents) >= size:
            order.sort(key=lambda i: len(documents[i]), reverse=True)
        out = [0.0] * len(documents)
        for start in range(0, len(order), size):
            batch = order[start:start + size]
            for i, score in zip(batch, self._forward([self._template.ids(query, documents[i]) for i in batch])):
                out[i] = score
        return out

    def _forward(self, rows: list[list[int]]) -> list[float]:
        torch = self._torch
        width = -(-max(map(len, rows)) // 8) * 8
        pad = self._tokenizer.pad_token_id
        ids = torch.tensor([[pad] * (width - len(r)) + r for r in rows], device=self._device)
        mask = torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in rows], device=self._device)
        with torch.inference_mode():
            last = self._model(input_ids=ids, attention_mask=mask).logits[:, -1, :]
            logits = (last[:, self._template.yes] - last[:, self._template.no]).cpu().float()
        return [float(x) for x in logits.numpy().astype("float32")]

    def rescore(self, candidates: Mapping[str, tuple[str, Sequence[str]]], texts: Mapping[str, str]) -> Run:
        """Per query id, its candidates ``(object_id, score)`` best first, ties in candidate order
        (``top_k_numpy``'s lexsort on score, then index)."""
        started = time.perf_counter()
        run = {}
        for q, (text, oids) in candidates.items():
            run[q] = _ranked(oids, self.scores(text, [texts[oid] for oid in oids]) if oids else [])
            self.pairs += len(oids)
        self.seconds += time.perf_counter() - started
        return run


class _Template:
    """mxbai-rerank-v2's input for a pair, as ``MxbaiRerankV2.prepare_inputs`` builds it: the query
    (``query: ...``, at most 3/4 of the length), the separator and document (``document: ...``) cut
    from the right so that the pair fits ``max_length``, inside the chat prefix, then the separator,
    task prompt and chat suffix; ``max_length`` lowered where the template would overrun the model."""

    def __init__(self, authors, tokenizer, model_max: int, max_length: int):
        def ids(text: str) -> list[int]:
            return tokenizer(text, add_special_tokens=False)["input_ids"]

        self.authors, self.tokenizer, self.model_max = authors, tokenizer, model_max
        self.yes, self.no = ids("1")[0], ids("0")[0]
        self.sep, self.task = ids(authors.sep), ids(authors.task_prompt)
        self.prefix, self.suffix = ids(authors.chat_template["prefix"]), ids(authors.chat_template["suffix"])
        self.fixed = len(self.prefix) + len(self.task) + len(self.suffix) + len(self.sep)
        self.max_length = min(max_length, model_max - self.fixed)

    def _cut(self, text: str, limit: int) -> list[int]:
        return self.tokenizer(text, add_special_tokens=False, truncation=True, max_length=limit)["input_ids"]

    def ids(self, query: str, document: str) -> list[int]:
        """The token ids of one pair."""
        a = self.authors
        q = self._cut(a.query_prompt.format(query=query), self.max_length * 3 // 4)
        d = self._cut(a.doc_prompt.format(document=document), min(self.model_max - len(q) - self.fixed,
                                                                   self.max_length))
        pair = (q + self.sep + d)[:self.max_length]
        return self.prefix + pair + self.sep + self.task + self.suffix


def _ranked(oids: Sequence[str], scores: Sequence[float]) -> list[tuple[str, float]]:
    return sorted(zip(oids, scores), key=lambda h: -h[1])


def reranker_identity(params: RerankerParams) -> str:
    """What a reranker's scores follow, for cache keys: the model's identity, and for mxbai-v2 the
    version of the package whose template it reads."""
    from importlib.metadata import PackageNotFoundError, version

    from rbench.retrievers.models import model_identity

    identity = model_identity(params.model)
    if resolve_family(params.model, params.family) != "mxbai-v2":
        return identity
    try:
        return f"{identity}+template:mxbai-rerank=={version('mxbai-rerank')}"
    except PackageNotFoundError:
        raise MissingExtraError("mxbai-rerank", "dense", "mxbai-rerank-v2's template") from None


def make_scorer(params: RerankerParams) -> CrossEncoderScorer | MxbaiV2Scorer:
    """The scorer of the family ``params`` resolves to (:func:`resolve_family`)."""
    family = resolve_family(params.model, params.family)
    return MxbaiV2Scorer(params) if family == "mxbai-v2" else CrossEncoderScorer(params)
