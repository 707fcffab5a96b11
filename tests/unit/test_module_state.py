"""No module-level mutable run state (issue 67, item 3): what a run owns (its leases, child processes,
stop callbacks and signal handling, warm-up threads) is its :class:`~rbench.core.session.RunSession`,
and what the door built is handed to its flow (the plan, the opened config), both through context
variables. Every private mutable container (an ``Event`` included) at module level and every ``global``
statement left in rbench's packages is listed here with why it belongs to the process, outliving a
run. A new one fails this test until it is listed or moved into the run session. ~1 s: the sources are
parsed, nothing is imported."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("rbench", "dataset_adapters", "tasks", "retrievers", "evaluation", "flows", "deployments")
MUTABLE_CALLS = {"dict", "list", "set", "defaultdict", "OrderedDict", "deque", "Counter", "WeakValueDictionary",
                 "WeakKeyDictionary", "WeakSet", "Event"}
LISTED = {
    "rbench/orchestration/prefect_server.py:_STARTED": "the one temporary Prefect server a process starts "
                                                       "(a notebook's runs share it: ~3 s each otherwise)",
    "rbench/core/imports.py:_TORCH_KEPT_OUT": "whether this process may import torch (stage processes apart)",
    "rbench/door.py:_INTERRUPTED": "console filter: Prefect records of flow runs an interrupt stopped",
    "rbench/core/errors.py:_SHOWN": "console filter: user errors the engine logged lately, shown once",
    "rbench/llm/backends.py:_LOADED": "models loaded in this process, reused across runs",
    "rbench/llm/budget.py:_BUDGETS": "per-endpoint concurrency limits shared by every LLM client of the process",
    "rbench/orchestration/runner.py:_GPU_SLOTS": "per-process GPU semaphores of the thread runner",
    "retrievers/models.py:_ENCODE_LOCKS": "one encode at a time per model in this process",
    "rbench/llm/rewrite.py:_KINDS": "the rewrite parsers, registered at import",
    "rbench/arm/mip.py:_SOLVER_IDS": "a constant (OR-Tools solver names)",
}


def _mutable(value: ast.expr | None) -> bool:
    if isinstance(value, (ast.Dict, ast.List, ast.Set, ast.DictComp, ast.ListComp, ast.SetComp)):
        return True
    if isinstance(value, ast.Call):
        func = value.func
        return (func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")) in MUTABLE_CALLS
    return False


def module_state(path: Path) -> list[str]:
    """The private mutable containers assigned at the module level of ``path``, and its ``global`` statements."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in tree.body:
        if not isinstance(node, (ast.Assign, ast.AnnAssign)):
            continue
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        value = node.value
        found += [t.id for t in targets if isinstance(t, ast.Name) and t.id.startswith("_") and t.id != "__all__"
                  and _mutable(value)]
    found += [f"global {name}" for node in ast.walk(tree) if isinstance(node, ast.Global) for name in node.names]
    return found


def test_module_level_mutable_state_is_the_listed_process_state():
    found = {f"{path.relative_to(REPO)}:{name}" for package in PACKAGES
             for path in sorted((REPO / package).rglob("*.py")) for name in module_state(path)}
    assert found - set(LISTED) == set(), "new module-level state: list it with its reason, or let the run own it"
    assert set(LISTED) - found == set(), "listed state no longer exists: take it off the list"


def test_the_scan_sees_state_in_every_form(tmp_path):
    source = tmp_path / "m.py"
    source.write_text("_A = {}\n_B: list[int] = []\n_C = set()\nD = {}\n__all__ = []\n_F = threading.Event()\n"
                      "def f():\n    global _E\n    _E = 1\n")
    assert module_state(source) == ["_A", "_B", "_C", "_F", "global _E"]  # public constants and __all__ are not state
