"""The order in which ARM's own ReAct (``ReActRetriever``, ``src/retrieval/react.py`` of apostolhskouk/ARM at
5a6cb92) hands back what its searches collected, for one search step, run under a given ``PYTHONHASHSEED``.

    PYTHONHASHSEED=N .venv-arm/bin/python tests/reference/arm_react_order.py ARM_GIT_DIR SPEC.json OUT.json

SPEC.json: ``{"commit", "corpus" (ARM's JSONL), "queries", "embedder"}``. For each query, ARM's
``FaissDenseRetriever`` searches the question as ReAct's first ``Search[...]`` would (``k_react_search`` = 5 x 20
= 100 hits, ``react.py`` lines 174, 188, 382), the hits are collected in a ``set`` as
``perform_search_step_for_guidance`` collects them (lines 417, 429), and ARM's own ``_group_and_sort_by_source`` and the final
selection of ``retrieve`` (lines 453-460: the first ``k_sources_to_show`` groups, each group's results in the set's order) give
the answer. OUT.json: per query the answer's ``page_title_source`` ids in order. No LLM runs: the order does not
depend on what the LLM wrote, only on the collected set. ``guidance`` is a stub (imported at the top of
``react.py``; its program is not run); everything else is ARM's code, in ARM's pins (``make arm-env``).
"""

import json
import sys
import types
from pathlib import Path

from arm_dense_rerank import arm_checkout, stub_vllm


def stub_guidance() -> None:
    class Guidance(types.ModuleType):  # react.py decorates with the module itself: @guidance(...)
        def __call__(self, *args, **kwargs):
            return lambda program: program

    guidance = Guidance("guidance")
    for name in ("models", "gen", "select", "assistant"):
        setattr(guidance, name, None)
    sys.modules["guidance"] = guidance


def main(git_dir: str, spec_path: str, out_path: str) -> None:
    spec = json.loads(Path(spec_path).read_text())
    work = arm_checkout(git_dir, spec["commit"])
    stub_vllm()
    stub_guidance()
    import src.retrieval.react as react
    from src.retrieval.dense import FaissDenseRetriever

    dense = FaissDenseRetriever(model_name_or_path=spec["embedder"])
    dense.enable_tqdm = False
    index = work / "index"
    dense.index(spec["corpus"], str(index), "object", ["page_title", "source"])
    shown = 5  # ReActRetriever's k_sources_to_show default (react.py line 174)
    hits = dense.retrieve(spec["queries"], str(index), shown * 20)
    answers = []
    for batch in hits:
        collected = set(batch)
        groups = react.ReActRetriever._group_and_sort_by_source(None, collected)[:shown]
        answers.append([f"{r.metadata['page_title']}_{r.metadata['source']}" for _, results in groups for r in results])
    Path(out_path).write_text(json.dumps({"answers": answers}))


if __name__ == "__main__":
    main(*sys.argv[1:])
