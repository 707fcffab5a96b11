"""Run configs/llm.yaml offline: cross-encoder steps get a local model folder (no cross-encoder
ships on PyPI), and the LLM section can be switched to the vLLM server.

    python -m tests.benchmarks.llm_fetaqa [--llm smollm2|vllm-server] [--base-url URL] [--questions N]
        [--cross-encoder DIR] [--store DIR]

Without ``--cross-encoder`` one is made from the packaged all-MiniLM-L6-v2 encoder with an
untrained (seeded) scoring head: it costs what a MiniLM cross-encoder costs, but its
scores are not relevance, and the report says so. Prints the metrics
table and each LLM retriever's accounting (from the stage summaries).
"""

from __future__ import annotations

import argparse
import json
import platform
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]


def untrained_minilm_cross_encoder(folder: Path) -> str:
    """all-MiniLM-L6-v2's encoder with a seeded, untrained one-logit head, as a local folder."""
    if not (folder / "config.json").exists():
        import torch
        from transformers import AutoTokenizer, BertForSequenceClassification

        from rbench.retrievers.models import MODELS, packaged_path

        source = packaged_path(MODELS["sentence-transformers/all-MiniLM-L6-v2"])
        torch.manual_seed(0)
        BertForSequenceClassification.from_pretrained(source, num_labels=1).save_pretrained(folder)
        AutoTokenizer.from_pretrained(source).save_pretrained(folder)
    return str(folder)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--llm", default="smollm2")
    parser.add_argument("--cross-encoder", default=None)
    parser.add_argument("--store", default=str(REPO / ".rbench"))
    parser.add_argument("--mirror", default=str(REPO.parent / "shared" / "data"))
    parser.add_argument("--base-url", help="the vllm-server's URL (default: the config's)")
    parser.add_argument("--questions", type=int, help="subsample size (default: the config's)")
    parser.add_argument("--only", nargs="*", help="run only these retriever labels")
    parser.add_argument("--runner", default="sequential",
                        help="sequential by default: on two cores, torch tasks side by side slow each other down")
    args = parser.parse_args()
    raw = yaml.safe_load((REPO / "configs" / "llm.yaml").read_text())
    ce = args.cross_encoder or untrained_minilm_cross_encoder(Path(args.store) / "models" / "minilm-untrained-ce")
    if args.base_url:
        raw["llms"]["vllm-server"]["base_url"] = args.base_url
    if args.questions:
        raw["subsample"]["size"] = args.questions
    if args.only:
        raw["retrievers"] = [r for r in raw["retrievers"] if r.get("label", r["name"]) in args.only]
    for r in raw["retrievers"]:
        params = r.get("params", {})
        if params.get("llm"):
            params["llm"] = args.llm
        for block in ("rerank", "cross_encoder"):
            if block in params:
                params[block]["model"] = ce
    if args.llm != "smollm2":
        raw["name"] = f"{raw['name']}-{args.llm}"
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        yaml.safe_dump(raw, f)
    from rbench.flows.benchmark import benchmark, summary_of
    from rbench.results import FlowSummary

    started = time.perf_counter()
    state = benchmark(config_path=f.name, mirror=args.mirror, store=args.store, runner=args.runner,
                      return_state=True)
    summary = summary_of(state)
    seconds = time.perf_counter() - started
    if not isinstance(summary, FlowSummary):
        raise SystemExit(f"the flow failed: {state.message}")
    print(f"machine: {platform.node()} {platform.processor() or platform.machine()}, LLM: {args.llm}, "
          f"cross-encoder: {ce}, wall {seconds:.0f} s")
    print(json.dumps({"metrics": summary.metrics, "failures": summary.failures}, indent=1))
    for row in summary.stages:
        if row["stage"] in ("rewrite", "retrieve"):
            print(row["stage"], row["label"], row["status"], row.get("seconds"))


if __name__ == "__main__":
    main()
