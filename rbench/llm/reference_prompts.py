"""Prompts read from a reference implementation's own source file at a pinned commit, never copied
into rbench.

``arm:decompose`` is ARM's query-decomposition prompt: the system message and the few-shot examples of
``QueryDecomposer.__init__`` in ``src/utils/query_decomposition_vllm.py`` of apostolhskouk/ARM at the
commit of :data:`ARM_DECOMPOSER` (the decomposer ``dense_decomp.py`` builds for ``dr-d``).
The file is read as a pinned file (:mod:`rbench.core.pinned_files`: a mirror's ``github/apostolhskouk/ARM/``
checkout, rbench's cache or its raw address; always checked against its sha256) and parsed with :mod:`ast`: its literals are read,
nothing in it is executed. The prompt as extracted, in the shape of a prompt file, is what a rewrite
carries and what its cache key hashes. Its messages are ARM's: the system message, each example's input
as a user turn and its sub-queries joined by newlines as the assistant's turn, then the question as it is
(``query_decomposition_vllm.py`` lines 97-104 and 185-193).
"""

from __future__ import annotations

import ast
from functools import lru_cache
from typing import Any, Callable

from rbench.core.errors import ConfigError, DataError
from rbench.core.pinned_files import PinnedFile, read_pinned

Extractor = Callable[[str, str], dict[str, Any]]


def _init_literals(source: str, where: str, cls: str) -> dict[str, Any]:
    """The literal values assigned in ``cls.__init__`` of ``source``, by target (``name`` or
    ``self.name``); values that are not literals are left out."""
    try:
        tree = ast.parse(source)
    except SyntaxError as e:
        raise DataError(f"{where} is not Python source ({e})") from None
    found: dict[str, Any] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == cls:
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == "__init__":
                    for statement in ast.walk(item):
                        if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
                            target = statement.targets[0]
                            name = (target.id if isinstance(target, ast.Name) else
                                    f"self.{target.attr}" if isinstance(target, ast.Attribute) else None)
                            try:
                                value = ast.literal_eval(statement.value)
                            except ValueError:
                                continue
                            if name is not None:
                                found[name] = value
    if not found:
        raise DataError(f"{where} has no class {cls} with literal settings in its __init__")
    return found


def _arm_decompose(source: str, where: str) -> dict[str, Any]:
    values = _init_literals(source, where, "QueryDecomposer")
    system, examples = values.get("self.system_prompt_content"), values.get("examples_data")
    if not isinstance(system, str) or not isinstance(examples, list):
        raise DataError(f"{where}: QueryDecomposer.__init__ no longer assigns a string system_prompt_content and "
                        "a list examples_data: the pinned file is not ARM's decomposer")
    shots = []
    for n, example in enumerate(examples, 1):
        calls = example.get("tool_calls") if isinstance(example, dict) else None
        if not isinstance(example.get("input") if isinstance(example, dict) else None, str) or not isinstance(
                calls, list) or not all(isinstance(c, dict) and isinstance(c.get("sub_query"), str) for c in calls):
            raise DataError(f"{where}: examples_data item {n} is not {{input: str, tool_calls: [{{sub_query: str}}]}}")
        shots.append({"user": example["input"], "assistant": "\n".join(c["sub_query"] for c in calls)})
    return {"description": f"ARM's decomposition prompt, read from {where}", "system": system, "examples": shots,
            "user": "{question}"}


ARM_DECOMPOSER = PinnedFile("apostolhskouk/ARM", "5a6cb923eb7707030121f5008fd2ecc402a94f22",
                            "src/utils/query_decomposition_vllm.py",
                            "b999fe72a78caf720df5267f8d706a4c93945b47408c51a5a2003db16bba4d4c")
"""ARM's vLLM decomposer at the commit the ARM report's code is pinned to (digest recorded 2026-12-02 from a
stored snapshot of the repository)."""

REFERENCE_PROMPTS: dict[str, tuple[PinnedFile, Extractor]] = {"arm:decompose": (ARM_DECOMPOSER, _arm_decompose)}
"""Each reference prompt's name -> (its pinned source file, its extractor)."""


@lru_cache(maxsize=None)
def _extracted(ref: str, mirror: str | None) -> dict[str, Any]:
    from pathlib import Path

    file, extract = REFERENCE_PROMPTS[ref]
    return extract(read_pinned(file, Path(mirror) if mirror else None).decode("utf-8"), str(file))


def reference_prompt(ref: str) -> tuple[dict[str, Any], str]:
    """The parts of reference prompt ``ref`` (``system``, ``examples``, ``user``, ``description``) and the
    file they were read from, read from the mirror this run was given (``--mirror`` or ``RBENCH_MIRROR``),
    rbench's cache or the network."""
    from rbench.core.locations import given_mirror

    if ref not in REFERENCE_PROMPTS:
        raise ConfigError(f"unknown reference prompt {ref!r}; known: {sorted(REFERENCE_PROMPTS)}")
    return _extracted(ref, given_mirror()), str(REFERENCE_PROMPTS[ref][0])
