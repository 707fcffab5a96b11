"""ARM's own `dr` and `drr` (``FaissDenseRetriever`` and ``DenseRetrieverWithReranker``, apostolhskouk/ARM at
5a6cb92) run from a snapshot of ARM's repository with substitute models, in ARM's pins (``make arm-env``).

    .venv-arm/bin/python tests/reference/arm_dense_rerank.py ARM_GIT_DIR SPEC.json OUT.json

ARM_GIT_DIR: a clone or bare mirror of apostolhskouk/ARM (its code is read from the pinned commit with
``git archive``, never copied into rbench). SPEC.json: ``{"commit", "corpus" (ARM's JSONL: object,
page_title, source), "queries" [texts], "embedder", "reranker" (model folders), "k"}``. OUT.json: per
method and query the hits as ARM returns them (object text, page_title, source, score), with the versions.

What is changed to run here, and why (nothing else is):
- ``vllm`` is a stub module: ``src/retrieval/dense.py`` imports ``LLM, SamplingParams`` at its top (line 10) for
  its vLLM indexing backend, which ``dr``/``drr`` with the sentence-transformers backend never use.
- ``MxbaiRerankV2(..., device_map="cuda:1")`` (``dense_rerank.py`` line 20) is given ``device_map="cpu"``: no GPU.
- torch 2.13.0's CPU build for ARM's 2.7.0 (CUDA), faiss-cpu for faiss-gpu-cu12 (``make arm-env``).
- torch uses one thread (the comparison runs beside rbench on two cores).
"""

import io
import json
import sys
import tarfile
import tempfile
import types
from importlib.metadata import version
from pathlib import Path
from subprocess import run


def arm_source(git_dir: str, commit: str, into: Path) -> None:
    """ARM's ``src/`` at ``commit``, unpacked from ``git archive``."""
    archive = run(["git", f"--git-dir={git_dir}", "archive", commit, "src"], check=True, capture_output=True).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")


def stub_vllm() -> None:
    vllm = types.ModuleType("vllm")
    vllm.LLM = vllm.SamplingParams = None
    sys.modules["vllm"] = vllm


def arm_checkout(git_dir: str, commit: str) -> Path:
    """A work folder holding ARM's ``src/`` at ``commit``, importable as ``src``; torch on one thread."""
    import torch

    torch.set_num_threads(1)
    work = Path(tempfile.mkdtemp(prefix="arm-reference-"))
    arm_source(git_dir, commit, work)
    sys.path.insert(0, str(work))
    return work


def mxbai_on_cpu():
    """``MxbaiRerankV2`` as ARM builds it, with ``device_map="cpu"`` for ARM's ``cuda:1``."""
    import mxbai_rerank

    class OnThisMachine(mxbai_rerank.MxbaiRerankV2):
        def __init__(self, model, **kwargs):
            super().__init__(model, **{**kwargs, "device_map": "cpu"})

    return OnThisMachine


def versions() -> dict[str, str]:
    """The versions of the packages ARM's side ran with."""
    return {p: version(p) for p in ("mxbai-rerank", "transformers", "sentence-transformers", "torch", "faiss-cpu",
                                    "tokenizers", "numpy")}


def main(git_dir: str, spec_path: str, out_path: str) -> None:
    spec = json.loads(Path(spec_path).read_text())
    work = arm_checkout(git_dir, spec["commit"])
    stub_vllm()
    import src.retrieval.dense_rerank as dense_rerank

    dense_rerank.MxbaiRerankV2 = mxbai_on_cpu()
    arm = dense_rerank.DenseRetrieverWithReranker(embedding_model_name=spec["embedder"],
                                                  reranker_model_name=spec["reranker"])
    arm.enable_tqdm = False
    index = work / "index"
    arm.index(spec["corpus"], str(index), "object", ["page_title", "source"])
    k = spec["k"]
    dense = dense_rerank.FaissDenseRetriever.retrieve(arm, spec["queries"], str(index), k)
    reranked = arm.retrieve(spec["queries"], str(index), k)

    def hits(batches):
        return [[{"object": r.object, **r.metadata, "score": r.score} for r in batch] for batch in batches]

    Path(out_path).write_text(json.dumps({"dr": hits(dense), "drr": hits(reranked), "versions": versions()}))


if __name__ == "__main__":
    main(*sys.argv[1:])
