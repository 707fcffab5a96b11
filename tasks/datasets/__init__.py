"""Dataset adapters, registered by name."""

from __future__ import annotations

from rbench.errors import ConfigError
from tasks.datasets.arm import Arm
from tasks.datasets.base import Adapter
from tasks.datasets.beir import Beir
from tasks.datasets.fetaqa import Fetaqa
from tasks.datasets.jsonl import Jsonl
from tasks.datasets.ottqa import Ottqa
from tasks.datasets.tabfact import Tabfact
from tasks.datasets.target import Target

ADAPTERS: dict[str, type[Adapter]] = {
    cls.name: cls for cls in (Fetaqa, Ottqa, Tabfact, Arm, Target, Beir, Jsonl)
}


def get_adapter(name: str) -> Adapter:
    """The adapter registered as ``name``; a ConfigError lists the known names otherwise."""
    try:
        return ADAPTERS[name]()
    except KeyError:
        raise ConfigError(
            f"unknown dataset adapter {name!r}; known adapters: {sorted(ADAPTERS)}. "
            "For your own files use adapter 'jsonl'."
        ) from None
