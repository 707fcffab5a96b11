"""The package's layers, lowest first: the one list that ``tests/unit/test_layers.py`` checks
every import against and that the architecture page shows (generated at the docs build).

A module belongs to the layer of the longest prefix that names it, and imports only from its own
layer or lower ones. ``rbench.X`` lives in ``rbench/X`` except for the top-level folders the
project keeps, which ``pyproject.toml`` maps into the package (:data:`FOLDERS`)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

LAYERS: list[tuple[tuple[str, ...], str]] = [
    (("rbench.core",), "the store (stages, keys, atomic writes, fingerprints), leases, errors, registries, "
                       "code identity, the strict settings loader, every environment variable (`settings.py`), "
                       "where the store, mirror and tracking URI are (`locations.py`), secrets redaction"),
    (("rbench.llm", "rbench.arm", "rbench.evaluation"),
     "LLM calls (backends, call cache, prompts, parsers, rewrite kinds; imports only the core), ARM's MIP, "
     "one metric per file (`metrics/`), reports, published tables (`published/`) and the comparison with them"),
    (("rbench.retrievers", "rbench.dataset_adapters"),
     "one retriever per file behind `base.py`, the model registry; one dataset adapter per file behind "
     "`base.py`, the chunker (`chunking.py`), the corpus checks (`validate.py`)"),
    (("rbench.config", "rbench.experiment", "rbench.results"),
     "the experiment schema, its search section and the chunking grid file; resolving an experiment, preflight; "
     "typed records of what crosses stages and doors (`results.py`)"),
    (("rbench.tasks",), "one module per pipeline stage, nothing else (a test checks it)"),
    (("rbench.tracking", "rbench.orchestration"),
     "MLflow: runs written, read back, kept for later; Prefect glue: the stage graph, stages as tasks on a "
     "task runner, retried runs, the deployments' pull step"),
    (("rbench.flows",), "the Prefect flows, wiring only (no settings class: a test checks it)"),
    (("rbench.cli", "rbench.commands", "rbench.console_tables", "rbench"),
     "the command line (a dispatcher over one module per subcommand), the Python API, the text tables"),
]
"""``(packages or modules, what they hold)`` per layer, lowest first."""

FOLDERS = {"rbench.flows": "flows", "rbench.tasks": "tasks", "rbench.retrievers": "retrievers",
           "rbench.evaluation": "evaluation", "rbench.dataset_adapters": "dataset_adapters"}
"""The top-level folders ``pyproject.toml`` maps into the package (``package-dir``)."""


def folder(name: str) -> str:
    """Where module or package ``name`` lives in a checkout: ``rbench.tasks.index`` ->
    ``tasks/index.py``, ``rbench.dataset_adapters`` -> ``dataset_adapters/``, ``rbench.core`` ->
    ``rbench/core/``, ``rbench.cli`` -> ``rbench/cli.py``."""
    top = max((p for p in FOLDERS if name == p or name.startswith(f"{p}.")), key=len, default=None)
    path = FOLDERS[top] + name[len(top):].replace(".", "/") if top else name.replace(".", "/")
    package = importlib.util.find_spec(name).submodule_search_locations is not None
    return f"{path}/" if package else f"{path}.py"


def layer_table() -> str:
    """The layers as a Markdown table: layer, module names, their folders, what they hold."""
    rows = ["| layer | modules | folders | holds |", "| --- | --- | --- | --- |"]
    for number, (names, holds) in enumerate(LAYERS):
        shown = [n for n in names if n != "rbench"] or list(names)
        modules = ", ".join(f"`{n}`" for n in shown) + (" (and the rest of `rbench`)" if "rbench" in names else "")
        folders = ", ".join(f"`{folder(n)}`" for n in shown)
        rows.append(f"| {number} | {modules} | {folders} | {holds} |")
    return "\n".join(rows) + "\n"


def type_tree(out: Path) -> Path:
    """A tree in which a type checker finds every module under its package name: ``out/rbench`` links
    each entry of ``rbench/`` and each of :data:`FOLDERS` (``out/rbench/tasks`` -> ``tasks/``), as the
    installed package lays them out; made afresh, and returned. mypy does not follow the editable
    install's folder mapping, and so saw ``tasks/``, ``retrievers/``, ... as untyped imports."""
    import shutil

    repo = Path(__file__).resolve().parents[1]
    tree = out / "rbench"
    if out.exists():
        shutil.rmtree(out)
    tree.mkdir(parents=True)
    for entry in sorted((repo / "rbench").iterdir()):
        if entry.name != "__pycache__":
            (tree / entry.name).symlink_to(entry)
    for package, where in FOLDERS.items():
        (tree / package.split(".", 1)[1]).symlink_to(repo / where)
    return out


if __name__ == "__main__":
    import sys

    print(type_tree(Path(sys.argv[1])))
