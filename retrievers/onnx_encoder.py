"""A sentence-transformers model run by ONNX Runtime: exported with ``torch.onnx`` from the
loaded model (so it works offline from a packaged or local folder), optionally quantised to
int8 weights (``onnxruntime.quantization.quantize_dynamic``). Exports are kept under
``$RBENCH_CACHE`` (default ``~/.cache/rbench``)/onnx, keyed by the model's identity.

Only the Transformer -> Pooling (mean or cls) -> optional Normalize pipeline is supported;
other models are a ConfigError that says to keep ``backend: torch``.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

import numpy as np

from rbench.core import settings
from rbench.core.errors import ConfigError, MissingExtraError

INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def cache_root() -> Path:
    """Where exported models are kept."""
    return settings.cache_dir() / "onnx"


def _modules(st_model) -> tuple[str, bool]:
    names = [type(m).__name__ for m in st_model]
    if names[:2] != ["Transformer", "Pooling"] or names[2:] not in ([], ["Normalize"]):
        raise ConfigError(f"the onnx backends run Transformer -> Pooling (-> Normalize) models; this one is {names}: "
                          "use encoding.backend: torch")
    mode = st_model[1].get_config_dict().get("pooling_mode", "mean")
    if mode not in ("mean", "cls"):
        raise ConfigError(f"the onnx backends pool by mean or cls, this model by {mode!r}: use encoding.backend: torch")
    return mode, len(names) == 3


def _export(st_model, target: Path, quantize: bool) -> None:
    import torch

    try:
        import onnx  # noqa: F401  (the exporter and the quantiser need it)
    except ImportError:
        raise MissingExtraError("onnx", "onnx", "the onnx encoder backends") from None
    transformer = st_model[0].auto_model.eval()
    inputs = [n for n in INPUTS if n in st_model.tokenizer.model_input_names]

    class Hidden(torch.nn.Module):
        def __init__(self, model):
            super().__init__()
            self.model = model

        def forward(self, *tensors):
            return self.model(**dict(zip(inputs, tensors))).last_hidden_state

    sample = st_model.tokenizer(["an example", "another longer example"], padding=True, return_tensors="pt")
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        plain = Path(tmp) / "model.onnx"
        torch.onnx.export(Hidden(transformer), tuple(sample[n] for n in inputs), str(plain), input_names=inputs,
                          output_names=["hidden"], opset_version=17, dynamo=False,
                          dynamic_axes={n: {0: "batch", 1: "tokens"} for n in (*inputs, "hidden")})
        if quantize:
            from onnxruntime.quantization import QuantType, quantize_dynamic

            quantised = Path(tmp) / "model-int8.onnx"
            quantize_dynamic(str(plain), str(quantised), weight_type=QuantType.QInt8)
            plain = quantised
        os.replace(plain, target)


class OnnxEncoder:
    """The subset of ``SentenceTransformer`` that rbench uses (``encode``, ``prompts``,
    ``max_seq_length``, ``get_sentence_embedding_dimension``), run by ONNX Runtime."""

    def __init__(self, st_model, identity: str, quantize: bool, threads: int | None = None):
        try:
            import onnxruntime as ort
        except ImportError:
            raise MissingExtraError("onnxruntime", "onnx", "the onnx encoder backends") from None
        self.pooling, self.normalize = _modules(st_model)
        self.tokenizer = st_model.tokenizer
        self.prompts = dict(getattr(st_model, "prompts", None) or {})
        self.max_seq_length = st_model.max_seq_length
        self.dimension = st_model.get_sentence_embedding_dimension()
        self.inputs = [n for n in INPUTS if n in self.tokenizer.model_input_names]
        name = hashlib.sha256(f"{identity}|int8={quantize}|v1".encode()).hexdigest()[:24]
        self.path = cache_root() / f"{name}.onnx"
        if not self.path.is_file():
            _export(st_model, self.path, quantize)
        options = ort.SessionOptions()
        if threads:
            options.intra_op_num_threads = threads
        self.session = ort.InferenceSession(str(self.path), options, providers=["CPUExecutionProvider"])

    def get_sentence_embedding_dimension(self) -> int:
        return self.dimension

    def _batch(self, texts: list[str]) -> np.ndarray:
        batch = self.tokenizer(texts, padding=True, truncation=True, max_length=self.max_seq_length, return_tensors="np")
        hidden = self.session.run(None, {n: batch[n].astype(np.int64) for n in self.inputs})[0]
        if self.pooling == "cls":
            return hidden[:, 0]
        mask = batch["attention_mask"][..., None].astype(np.float32)
        return (hidden * mask).sum(1) / np.maximum(mask.sum(1), 1e-9)

    def encode(self, texts, batch_size: int = 32, normalize_embeddings: bool = False, prompt: str | None = None,
               prompt_name: str | None = None, **_ignored) -> np.ndarray:
        """Embeddings of ``texts`` (longest first in batches, as sentence-transformers does)."""
        if prompt is None and prompt_name is not None:
            prompt = self.prompts[prompt_name]
        texts = [f"{prompt or ''}{t}" for t in texts]
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        order = np.argsort([-len(t) for t in texts], kind="stable")
        parts = [self._batch([texts[i] for i in order[s:s + batch_size]]) for s in range(0, len(texts), batch_size)]
        vectors = np.empty((len(texts), self.dimension), dtype=np.float32)
        vectors[order] = np.concatenate(parts)
        if normalize_embeddings or self.normalize:
            vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
        return vectors
