"""Source fingerprints of every component that shapes a stored output, with its version.

A cache key holds each component's version, not its source, so a change to the code that
writes an output must come with a version bump, or stale artifacts are reused. The test
``test_fingerprints.py`` compares the sources with ``fingerprints.json``; after a change,
bump the component's version (or, when the change cannot alter any output, keep it) and
record the new state with:

    python -m tests.fingerprints --update
"""

from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RECORD = Path(__file__).with_name("fingerprints.json")
LLM_SHARED = ["rbench/llm/parse.py", "rbench/llm/listwise.py", "rbench/llm/backends.py", "rbench/llm/constrain.py",
              "retrievers/llm_common.py"]
ADAPTER_SHARED = ["tasks/datasets/base.py", "tasks/datasets/serialize.py", "tasks/datasets/chunking.py"]


def components() -> dict[str, tuple[str, list[str]]]:
    """``{component: (version, source files)}`` for every stage, adapter and retriever."""
    from retrievers.llm_common import LLMComposite
    from retrievers.registry import RETRIEVERS
    from tasks.chunking_eval import CHUNK_EMBED, CHUNK_EVAL
    from tasks.datasets import ADAPTERS
    from tasks.download import DOWNLOAD
    from tasks.evaluate import EVALUATE
    from tasks.index import ENCODE, INDEX
    from tasks.prepare import PREPARE
    from tasks.retrieve import RETRIEVE
    from tasks.rewrite import REWRITE
    from tasks.subsample import SUBSAMPLE

    metrics = sorted(str(p.relative_to(REPO)) for p in (REPO / "evaluation" / "metrics").glob("*.py"))
    found = {
        "stage:download": (DOWNLOAD.version, ["tasks/download.py"]),
        "stage:prepare": (PREPARE.version, ["tasks/prepare.py", "tasks/validate.py"]),
        "stage:subsample": (SUBSAMPLE.version, ["tasks/subsample.py"]),
        "stage:encode+index": (f"{ENCODE.version}.{INDEX.version}", ["tasks/index.py"]),
        "stage:retrieve": (RETRIEVE.version, ["tasks/retrieve.py"]),
        "stage:rewrite": (REWRITE.version, ["tasks/rewrite.py", "rbench/llm/rewrite.py", *LLM_SHARED]),
        "stage:evaluate": (EVALUATE.version, ["tasks/evaluate.py", "evaluation/evaluate.py", "evaluation/runs.py", *metrics]),
        "stage:chunking": (f"{CHUNK_EMBED.version}.{CHUNK_EVAL.version}",
                           ["tasks/chunking_eval.py", "tasks/chunkers.py", "evaluation/span_metrics.py"]),
    }
    for name, adapter in ADAPTERS.items():
        found[f"adapter:{name}"] = (adapter.version, [_source(adapter), *ADAPTER_SHARED])
    for name, retriever in RETRIEVERS.items():
        shared = LLM_SHARED if issubclass(retriever, LLMComposite) else []
        found[f"retriever:{name}"] = (f"{retriever.version}.{retriever.index_version}", [_source(retriever), *shared])
    return {k: (str(v), files) for k, (v, files) in found.items()}


def _source(cls) -> str:
    import inspect

    return str(Path(inspect.getfile(cls)).resolve().relative_to(REPO))


def fingerprint(files: list[str]) -> str:
    """sha256 over the named source files' bytes."""
    h = hashlib.sha256()
    for name in files:
        h.update(name.encode() + b"\0" + (REPO / name).read_bytes() + b"\0")
    return h.hexdigest()


def current() -> dict[str, dict[str, str]]:
    """The fingerprint and version of every component as the code stands."""
    return {name: {"version": version, "sha256": fingerprint(files)}
            for name, (version, files) in sorted(components().items())}


def main() -> None:
    """``--update`` records the current state in fingerprints.json."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--update", action="store_true", help="record the current fingerprints")
    args = parser.parse_args()
    state = current()
    if args.update:
        RECORD.write_text(json.dumps(state, indent=2) + "\n")
        print(f"recorded {len(state)} components in {RECORD}")
    else:
        print(json.dumps(state, indent=2))


if __name__ == "__main__":
    main()
