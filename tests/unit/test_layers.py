"""One installed package, one-way layers, no import cycles.

Every ``import`` in the package's source, inside functions too, may only point at the same
layer or a lower one, and the module graph has no cycle."""

from __future__ import annotations

import os
import sys
import tomllib
from pathlib import Path

import pytest

import rbench.layers
from rbench.core.identity import imported_modules

REPO = Path(__file__).resolve().parents[2]
LAYERS = [names for names, _ in rbench.layers.LAYERS]  # lowest first; the list the architecture page shows


def package_dirs() -> dict[str, Path]:
    """``{package: folder}`` as ``pyproject.toml`` maps them."""
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    return {name: REPO / folder for name, folder in config["package-dir"].items()}


def modules() -> dict[str, Path]:
    """Every module of the installed package, by dotted name."""
    found = {}
    for package, folder in package_dirs().items():
        for path in folder.rglob("*.py"):
            parts = path.relative_to(folder).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            name = ".".join((package, *parts))
            if not any(name.startswith(f"{other}.") for other in package_dirs() if other != package and
                       other.startswith(f"{package}.") and path.is_relative_to(package_dirs()[other])):
                found[name] = path
    return found


def layer(name: str) -> int:
    best = max((p for group in LAYERS for p in group if name == p or name.startswith(f"{p}.")), key=len)
    return next(i for i, group in enumerate(LAYERS) if best in group)


def graph() -> dict[str, set[str]]:
    """``{module: the package's modules it imports}`` (resolved as the cache keys' code identity resolves them)."""
    mods = modules()
    return {name: imported_modules(name, path, mods.get) - {name} for name, path in mods.items()}


def test_one_top_level_package_that_packages_every_source_folder():
    """The wheel installs one name, ``rbench``, and every folder of the checkout that holds a
    Python package (an ``__init__.py``) is in it: a folder left out would import from a checkout
    and fail from the wheel."""
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert {p.split(".")[0] for p in config["packages"]} == {"rbench"}
    roots = config["package-dir"]

    def folder(package: str) -> Path:
        top = max((n for n in roots if package == n or package.startswith(n + ".")), key=len)
        return (REPO / roots[top]).joinpath(*package[len(top):].split(".")[1:]).resolve()

    packaged = {folder(p) for p in config["packages"]}
    sources = set()
    for here, dirs, files in os.walk(REPO):
        dirs[:] = [d for d in dirs if not d.startswith(".") and d not in ("tests", "docs", "site", "build", "dist")]
        if "__init__.py" in files:
            sources.add(Path(here).resolve())
    assert len(sources) >= 10 and not sources - packaged, sorted(str(p.relative_to(REPO)) for p in sources - packaged)


def test_no_upward_imports():
    upward = sorted(f"{m} (layer {layer(m)}) imports {t} (layer {layer(t)})"
                    for m, targets in graph().items() for t in targets if layer(t) > layer(m))
    assert not upward, "\n".join(upward)


def test_dataset_adapters_sit_below_the_config_and_import_nothing_above_them():
    """The config resolves adapters by name, so ``rbench.dataset_adapters`` is below ``rbench.config`` and
    imports neither it nor the stages in ``tasks/``."""
    assert layer("rbench.dataset_adapters") < layer("rbench.config") < layer("rbench.tasks")
    above = sorted(f"{m} imports {t}" for m, targets in graph().items() if m.startswith("rbench.dataset_adapters")
                   for t in targets if layer(t) > layer("rbench.dataset_adapters"))
    assert not above, "\n".join(above)


def test_llm_layer_imports_nothing_above_the_core():
    above = sorted(f"{m} imports {t}" for m, targets in graph().items() if m.startswith("rbench.llm")
                   for t in targets if not t.startswith(("rbench.core", "rbench.llm")))
    assert not above, "\n".join(above)


def test_no_import_cycles():
    g = graph()
    state: dict[str, int] = {}
    cycles = []

    def visit(node: str, trail: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(g.get(node, ())):
            if state.get(nxt) == 1:
                cycles.append(" -> ".join(trail[trail.index(nxt):] + [nxt]))
            elif nxt not in state:
                visit(nxt, trail + [nxt])
        state[node] = 2

    for start in sorted(g):
        if start not in state:
            visit(start, [start])
    assert not cycles, "\n".join(cycles)


@pytest.mark.parametrize("module", ["rbench.core.store", "rbench.llm.client", "rbench.config"])
def test_lower_layers_import_without_the_upper_ones(module):
    import subprocess

    code = (f"import sys, {module}; up = sorted(m for m in sys.modules if m.startswith(('rbench.flows', "
            f"'rbench.cli', 'rbench.tasks'))); "
            f"print(up); sys.exit(1 if up else 0)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert done.returncode == 0, done.stdout + done.stderr


def _environment_reads(tree) -> list[tuple[int, str]]:
    """``(line, what)`` of each read of the environment in a module: ``os.environ.get``, ``os.getenv``,
    ``os.environ[...]`` read, ``dict(os.environ)`` and the like."""
    import ast

    reads = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("get", "getenv"):
            owner = ast.unparse(node.func.value)
            if owner in ("os.environ", "os", "environ") and node.args:
                reads.append((node.lineno, ast.unparse(node.args[0])))
        elif isinstance(node, ast.Subscript) and ast.unparse(node.value) == "os.environ" \
                and isinstance(node.ctx, ast.Load):
            reads.append((node.lineno, ast.unparse(node.slice)))
    return reads


def test_rbench_variables_are_read_in_the_settings_module_only():
    """Every ``RBENCH_`` variable (and the store, mirror and tracking URI) is read through
    ``rbench.core.settings``, at run time: no other module reads one, by name or through a constant."""
    import ast

    from rbench.core import settings

    ours = set(settings.VARIABLES)
    found = []
    for name, path in modules().items():
        if name == "rbench.core.settings":
            continue
        for line, what in _environment_reads(ast.parse(path.read_text(encoding="utf-8"))):
            literal = what.strip("'\"")
            constant = not what.startswith(("'", '"')) and what.split(".")[-1].isupper()
            if literal.startswith("RBENCH_") or literal in ours or constant:
                found.append(f"{path.relative_to(REPO)}:{line} reads {what}")
    assert not found, "\n".join(found)


def test_tasks_hold_stages_and_flows_hold_no_config_schema():
    """``tasks/`` holds pipeline stages only (each module defines a ``Stage``; dataset adapters live in
    ``datasets``), and ``flows/`` defines no settings class: schemas live in the config layer."""
    import importlib

    from pydantic import BaseModel

    from rbench.core.store import Stage

    mods = modules()
    stageless = sorted(n for n in mods if n.startswith("rbench.tasks.")
                       and not any(isinstance(v, Stage) and v.build.__module__ == n
                                   for v in vars(importlib.import_module(n)).values()))
    assert not stageless, f"modules of tasks/ that define no stage: {stageless}"
    schemas = sorted(f"{n}.{v.__name__}" for n in mods if n.startswith("rbench.flows")
                     for v in vars(importlib.import_module(n)).values()
                     if isinstance(v, type) and issubclass(v, BaseModel) and v.__module__ == n)
    assert not schemas, f"config schemas in flows/: {schemas}"


def test_the_layer_lists_folders_are_pyprojects():
    """The folders the architecture page names for each ``rbench.X`` are those ``pyproject.toml`` maps."""
    mapped = {name: str(folder.relative_to(REPO)) for name, folder in package_dirs().items() if name != "rbench"}
    assert rbench.layers.FOLDERS == mapped
    assert rbench.layers.folder("rbench.dataset_adapters") == "dataset_adapters/"
    assert rbench.layers.folder("rbench.cli") == "rbench/cli.py" and rbench.layers.folder("rbench.core") == "rbench/core/"
    table = rbench.layers.layer_table()
    assert all(f"| {i} | " in table for i in range(len(LAYERS)))
