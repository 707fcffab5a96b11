"""What each dataset adapter reads from a mirror: its variants, the paths it looks for there, and
whether a mirror holds them (``rbench list datasets --mirror DIR``, the datasets page's layout table)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, get_args

from rbench.dataset_adapters.base import ADAPTERS, FileSpec, expand

SHOWN = 3
"""Paths printed per variant before the rest are summed up under their common folder."""


def dataset_variants(adapter_cls: Any) -> list[tuple[str, list[FileSpec]]] | None:
    """``(variant, the files it reads)`` per variant of an adapter (its ``benchmark``, ``split`` or
    ``task`` values, else its defaults); None when its files are given in the config."""
    fields = adapter_cls.Params.model_fields
    axis = next((k for k in ("benchmark", "split", "task") if k in fields and get_args(fields[k].annotation)), None)
    if axis is not None:
        variants: list[dict[str, Any]] = [{axis: b} for b in get_args(fields[axis].annotation)]
    elif all(not f.is_required() for f in fields.values()):
        variants = [{}]
    else:
        return None
    return [(", ".join(f"{k}={v}" for k, v in params.items()) or "default",
             expand(adapter_cls().files(adapter_cls.Params.model_validate(params)))) for params in variants]


def paths_text(names: list[str], root: str = "") -> str:
    """Mirror-relative paths, the first :data:`SHOWN` in full and the rest counted under their common folder."""
    shown = ", ".join(f"{root}{n}" for n in names[:SHOWN])
    if len(names) <= SHOWN:
        return shown
    common = os.path.commonpath(names) if len({n.split("/")[0] for n in names}) == 1 else ""
    return f"{shown} and {len(names) - SHOWN:,} more" + (f" under {root}{common}/" if common else "")


def dataset_availability(adapter_cls: Any, mirror: Path | None) -> list[tuple[str, str, str]]:
    """``(variant, status, the paths it looks for)`` per dataset variant: offline from the mirror (with
    its size), or not, and from where it downloads."""
    variants = dataset_variants(adapter_cls)
    if variants is None:
        return [("(given in the config)", adapter_cls.where_from, "")]
    rows = []
    root = f"{mirror}/" if mirror is not None else "MIRROR/"
    for label, specs in variants:
        paths = paths_text([s.name for s in specs], root)
        present = [mirror / s.name for s in specs if mirror is not None and (mirror / s.name).exists()]
        if mirror is not None and len(present) == len(specs):
            size = sum(f.stat().st_size for p in present for f in ([p] if p.is_file() else p.rglob("*")) if f.is_file())
            rows.append((label, f"offline from the mirror, {size / 1e6:.1f} MB in {len(specs)} file(s)", paths))
            continue
        sourced = [s for s in specs if s.hf_repo or s.url]
        if not sourced:
            rows.append((label, f"not in the mirror ({len(present)}/{len(specs)} files) and no download source: "
                                "put the files in the mirror (or give their paths in the params)", paths))
            continue
        source = sourced[0].hf_repo or "GitHub"
        unpinned = sum(s.sha256 is None for s in specs)
        rows.append((label, f"not in the mirror ({len(present)}/{len(specs)} files): downloads from {source}"
                     + (f" ({unpinned} file(s) unverified: no pinned sha256)" if unpinned else ""), paths))
    return rows


def mirror_layout_table() -> str:
    """Every adapter's variants and the mirror paths each reads, as a Markdown table (the datasets page)."""
    rows = ["| adapter | variant | paths under the mirror |", "| --- | --- | --- |"]
    for name, cls in ADAPTERS.items():
        variants = dataset_variants(cls)
        if variants is None:
            rows.append(f"| `{name}` | - | none: {cls.where_from} |")
            continue
        for label, specs in variants:
            shown = paths_text([s.name for s in specs]).replace("|", "\\|")
            rows.append(f"| `{name}` | {label} | `{shown}` |" if len(specs) <= SHOWN else f"| `{name}` | {label} | {shown} |")
    return "\n".join(rows) + "\n"
