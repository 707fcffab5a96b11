"""A published rule's whole computation, resolved as a run resolves its own settings.

:func:`rbench.evaluation.reproduction.compare` judges a cell ``equal`` only when every resolved
setting of the run is the rule's (:data:`rbench.evaluation.reproduction.EXEMPT` aside). A rule
states the settings that make the computation (``retriever.params.k1: 0.9``); :data:`SETTINGS`
completes it here, by validating it as an experiment file's dataset or retriever, so that every
setting it leaves unstated is compared at the default the code gives it, a parameter added after
the rule was written included."""

from __future__ import annotations

from typing import Any, Mapping

from rbench.config import (PROTOCOL_FORMS, PROTOCOL_RETRIEVER_PARAMS, PROTOCOLS, DatasetConfig, MetricsConfig,
                           RetrieverConfig, _with_form, _with_params)
from rbench.core.configfile import flatten
from rbench.evaluation.reproduction import exempt

DEFINITIONS = ("precision_denominator", "recall_denominator", "ties")
"""The metric settings that define what a cell's number is (``k`` picks cells; ``standard`` adds measures)."""
LOGGED = {"None": None, "True": True, "False": False}
"""Values as MLflow logs them (``str`` of the JSON value), where a rule copies them, and the values they stand for."""


def _typed(value: object) -> object:
    return LOGGED.get(value, value) if isinstance(value, str) else value


LENT = ("dataset.params.path",)
"""Exempt settings (:data:`~rbench.evaluation.reproduction.EXEMPT`) that a dataset's validation
requires and no rule can state (a BEIR folder: where the files are on the run's machine): the
reference takes the run's value. Other exempt values stay at their defaults: MLflow logs every value
as text, and a text where a number belongs does not validate."""


def _nested(prefix: str, stated: Mapping[str, object], run: Mapping[str, str]) -> dict[str, Any]:
    """``stated``'s dotted keys as the nested settings an experiment file holds, with the run's
    values of :data:`LENT` keys where the rule leaves them out."""
    root: dict[str, Any] = {}
    for key, value in stated.items():
        *parents, last = key.split(".")[1:]
        node = root
        for part in parents:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise ValueError(f"the rule gives {key} and a value for its parent")
            node = child
        node[last] = _typed(value)
    for key in LENT:
        if key.startswith(f"{prefix}.") and key in run and exempt(key):
            *parents, last = key.split(".")[1:]
            node = root
            for part in parents:
                node = node.setdefault(part, {})
            node.setdefault(last, run[key])
    return root


class ResolvedSettings:
    """:class:`rbench.evaluation.reproduction.Settings` from the experiment schema itself."""

    def resolved(self, prefix: str, stated: Mapping[str, object], run: Mapping[str, str],
                 protocol: str | None = None) -> Mapping[str, object]:
        """The complete settings of the dataset or retriever ``stated`` describes, as an experiment file
        under ``protocol`` resolves them (its corpus form, its retriever params), flattened as logged."""
        nested = _nested(prefix, stated, run)
        if prefix == "dataset":
            nested.setdefault("name", nested.get("adapter") or "published")
            if protocol in PROTOCOL_FORMS:
                nested = _with_form(nested, PROTOCOL_FORMS[protocol])
            return flatten(prefix, DatasetConfig.model_validate(nested).model_dump(mode="json"))
        if prefix == "retriever":
            nested = _with_params(nested, PROTOCOL_RETRIEVER_PARAMS.get(protocol or "", {}))
            return flatten(prefix, RetrieverConfig.model_validate(nested).model_dump(mode="json"))
        raise ValueError(f"no settings resolve under {prefix!r}: use dataset or retriever")

    def protocol(self, name: str) -> Mapping[str, object]:
        """The parent-run settings protocol ``name`` fixes (:data:`rbench.config.PROTOCOLS`), flattened,
        over the metric definitions every protocol leaves at their defaults (``standard`` fixes no
        setting, but its cells are scored with the default denominators)."""
        defaults = MetricsConfig().model_dump(mode="json")
        return {**flatten("metrics", {name: defaults[name] for name in DEFINITIONS}), **flatten("", PROTOCOLS[name])}


SETTINGS = ResolvedSettings()
"""The one resolver ``rbench compare`` passes."""
