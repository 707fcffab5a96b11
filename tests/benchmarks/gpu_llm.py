"""Does an LLM answer depend on where it ran? The transformers backend on the CPU and on CUDA, measured in one run.

The LLM call cache keys an answer by the model's identity, the prompt and the sampling, and
leaves out the device and the batch size (``LLMConfig.key_view``): an answer cached on one
machine is served to a run on another. That is right only if greedy answers do not depend on
them. This script asks the ``decompose`` prompt of every given FeTaQA question through
``rbench.llm.client.LLM`` (no call cache) on each engine below, in turns of --block questions,
and prints, per engine: answers identical to the reference's (CPU, float32, one prompt at a
time), parsed sub-queries identical, completion tokens/s, and CUDA's allocator peak.

    python tests/benchmarks/gpu_llm.py --mirror ../shared/data --questions 48
    python tests/benchmarks/gpu_llm.py --questions-file FILE --model FILE.gguf   # one question per line
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import time
from pathlib import Path

ENGINES = {"cpu float32 x1": ("cpu", "float32", 1), "cpu float32 x8": ("cpu", "float32", 8),
           "cuda float32 x1": ("cuda", "float32", 1), "cuda float32 x8": ("cuda", "float32", 8),
           "cuda bfloat16 x8": ("cuda", "bfloat16", 8)}


def questions(args: argparse.Namespace) -> list[str]:
    """The questions: the file's lines, or the first of FeTaQA dev in the mirror."""
    if args.questions_file:
        lines = args.questions_file.read_text(encoding="utf-8").splitlines()
    else:
        path = args.mirror / "fetaqa" / "fetaQA-v1_dev.jsonl"
        with path.open(encoding="utf-8") as f:
            lines = [json.loads(line)["question"] for _, line in zip(range(args.questions), f)]
    return [q for q in lines if q.strip()][:args.questions]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mirror", type=Path, default=Path(os.environ.get("RBENCH_MIRROR", "../shared/data")))
    parser.add_argument("--questions-file", type=Path)
    parser.add_argument("--questions", type=int, default=48)
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--block", type=int, default=16)
    parser.add_argument("--max-tokens", type=int, default=96)
    parser.add_argument("--engines", default=",".join(ENGINES))
    args = parser.parse_args()

    import torch

    from rbench.llm.client import LLM
    from rbench.llm.config import Sampling
    from rbench.llm.rewrite import RewriteSpec, parse

    names = args.engines.split(",")
    if any(ENGINES[n][0] == "cuda" for n in names) and not torch.cuda.is_available():
        raise SystemExit("gpu_llm: torch sees no CUDA device; give --engines with cpu ones only")
    asked = questions(args)
    spec = RewriteSpec.of("decompose", {"backend": "transformers", "model": args.model}, "decompose",
                          sampling=Sampling(temperature=0, max_tokens=args.max_tokens))
    prompt = spec.prompt()
    messages = [prompt.render(question=q, max_queries=str(spec.max_queries)) for q in asked]
    llms = {n: LLM({"backend": "transformers", "model": args.model, "device": ENGINES[n][0],
                    "dtype": ENGINES[n][1], "batch_size": ENGINES[n][2]}) for n in names}
    answers = {n: [] for n in names}
    seconds = dict.fromkeys(names, 0.0)
    tokens = dict.fromkeys(names, 0)
    peaks = dict.fromkeys(names, 0)
    for start in range(0, len(messages), args.block):
        for name in names:
            if ENGINES[name][0] == "cuda":
                torch.cuda.synchronize()
                torch.cuda.reset_peak_memory_stats()
            began = time.perf_counter()
            answers[name] += llms[name].chat_one(messages[start:start + args.block], spec.sampling)
            if ENGINES[name][0] == "cuda":
                torch.cuda.synchronize()
                peaks[name] = max(peaks[name], torch.cuda.max_memory_allocated() // 2**20)
            seconds[name] += time.perf_counter() - began
    for name in names:
        tokens[name] = llms[name].accounting.summary().get("llm_completion_tokens", 0)

    print(f"machine: {platform.node()} {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"Python {platform.python_version()}, torch {torch.__version__}"
          + (f", {torch.cuda.get_device_name()}" if torch.cuda.is_available() else ""))
    print(f"settings: {len(asked)} FeTaQA questions, prompt decompose, greedy, max_tokens {args.max_tokens}, "
          f"model {args.model}, turns of {args.block}, torch threads {torch.get_num_threads()}")
    reference = names[0]
    parsed = {n: [parse("decompose", a, q, spec.max_queries).items for a, q in zip(answers[n], asked)]
              for n in names}
    print(f"{'engine':18} {'same answer':>12} {'same queries':>13} {'tokens':>7} {'tokens/s':>9} {'CUDA peak MiB':>14}")
    for name in names:
        same = sum(a == b for a, b in zip(answers[name], answers[reference]))
        same_q = sum(a == b for a, b in zip(parsed[name], parsed[reference]))
        print(f"{name:18} {same:>5} of {len(asked):<5} {same_q:>5} of {len(asked):<6} {tokens[name]:>7} "
              f"{tokens[name] / seconds[name]:>9.1f} {peaks[name] or '-':>14}")
    for name in names[1:]:
        for q, a, b in zip(asked, answers[reference], answers[name]):
            if a != b:
                print(f"first difference, {name}: {q!r}\n  {reference}: {a!r}\n  {name}: {b!r}")
                break
    print(f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024} MiB")


if __name__ == "__main__":
    main()
