"""The configuration reference, generated from the code: every experiment key, dataset adapter,
retriever (plugins included) and LLM backend setting, with its type, default, allowed values and
description, read from the pydantic models and the registries. The docs site builds its
reference page from :func:`configuration_reference`, so the page cannot drift from the code."""

from __future__ import annotations

import enum
import inspect
import json
import re
import types
import typing
from pathlib import Path
from typing import Any, Iterable

import annotated_types
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from rbench.core.settings import VARIABLES

CONSTRAINTS = ((annotated_types.Gt, "gt", ">"), (annotated_types.Ge, "ge", ">="), (annotated_types.Lt, "lt", "<"),
               (annotated_types.Le, "le", "<="), (annotated_types.MinLen, "min_length", "length >="),
               (annotated_types.MaxLen, "max_length", "length <="))


def anchor(title: str) -> str:
    """The anchor MkDocs gives a heading (its ``toc`` slugify: lower case, words joined by ``-``)."""
    text = re.sub(r"[^\w\s-]", "", title.strip().lower())
    return re.sub(r"[-\s]+", "-", text)


class Sections:
    """Models that get a section of their own (linked from the fields that hold them)."""

    def __init__(self, titles: dict[type, str]):
        self.titles = dict(titles)

    def link(self, model: type) -> str | None:
        title = self.titles.get(model)
        return f"[{title}](#{anchor(title)})" if title else None


def _strip_annotated(tp: Any) -> tuple[Any, list]:
    metadata: list = []
    while typing.get_origin(tp) is typing.Annotated:
        metadata += list(tp.__metadata__)
        tp = typing.get_args(tp)[0]
    return tp, metadata


def _constraints(metadata: Iterable) -> list[str]:
    out = []
    for item in metadata:
        if isinstance(item, FieldInfo):
            out += _constraints(item.metadata)
        for cls, attr, sign in CONSTRAINTS:
            if isinstance(item, cls):
                out.append(f"{sign} {getattr(item, attr)}")
        if isinstance(item, annotated_types.Interval):
            out += [f"{sign} {getattr(item, attr)}" for _, attr, sign in CONSTRAINTS[:4]
                    if getattr(item, attr, None) is not None]
        for attr in ("gt", "ge", "lt", "le", "min_length", "max_length"):  # pydantic's own metadata objects
            if type(item).__name__ == "_PydanticGeneralMetadata" and getattr(item, attr, None) is not None:
                out.append(f"{dict((a, s) for _, a, s in CONSTRAINTS)[attr]} {getattr(item, attr)}")
    return out


def type_text(tp: Any, sections: Sections) -> tuple[str, list[str], list[str]]:
    """``(type, allowed values, constraints)`` of an annotation, in words a config author reads."""
    tp, metadata = _strip_annotated(tp)
    constraints = _constraints(metadata)
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        parts, allowed = [], []
        for arg in typing.get_args(tp):
            if arg is type(None):
                continue
            text, values, more = type_text(arg, sections)
            parts.append(text)
            allowed += values
            constraints += more
        nullable = type(None) in typing.get_args(tp)
        return " or ".join(dict.fromkeys(parts)) + (" or null" if nullable else ""), allowed, constraints
    if origin is typing.Literal:
        values = list(typing.get_args(tp))
        kinds = sorted({type(v).__name__ for v in values})
        return " or ".join(kinds), [json.dumps(v) for v in values], constraints
    if origin in (list, tuple, set, frozenset):
        args = [a for a in typing.get_args(tp) if a is not Ellipsis]
        inner, allowed, more = type_text(args[0], sections) if args else ("any", [], [])
        return f"list of {inner}", allowed, constraints + more
    if origin is dict:
        key, value = typing.get_args(tp) or (str, Any)
        key_text, allowed, _ = type_text(key, sections)
        value_text, _, _ = type_text(value, sections)
        keys = f" (keys: {', '.join(allowed)})" if allowed else ""
        return f"mapping of {key_text} to {value_text}{keys}", [], constraints
    if inspect.isclass(tp) and issubclass(tp, BaseModel):
        return sections.link(tp) or tp.__name__, [], constraints
    if inspect.isclass(tp) and issubclass(tp, enum.Enum):
        return "str", [json.dumps(m.value) for m in tp], constraints
    if tp is Path:
        return "path (relative to the config file)", [], constraints
    if tp is Any:
        return "any", [], constraints
    names = {str: "str", int: "int", float: "float", bool: "bool", dict: "mapping", list: "list"}
    if tp in names:
        if tp is str and any(getattr(m, "func", None) is not None and "resolved_str" in repr(m) for m in metadata):
            return "str (a name, or a path relative to the config file)", [], constraints
        return names[tp], [], constraints
    return getattr(tp, "__name__", str(tp)), [], constraints


def default_text(field: FieldInfo) -> str:
    """A field's default as YAML would spell it, or *required*."""
    if field.default_factory is not None:
        value = field.default_factory()
    elif field.default is PydanticUndefined:
        return "*required*"
    else:
        value = field.default
    if isinstance(value, BaseModel):
        given = _given(value)
        return f"`{json.dumps(given)}`" if given else "(its defaults)"
    if isinstance(value, Path):
        value = str(value)
    if isinstance(value, enum.Enum):
        value = value.value
    try:
        return f"`{json.dumps(value)}`"
    except TypeError:
        return f"`{value!r}`"


def _given(value: BaseModel) -> dict:
    """What a settings object sets away from its defaults (a retriever entry: its name and the
    params that differ from that retriever's defaults), as YAML would spell it."""
    given = value.model_dump(mode="json", exclude_defaults=True)
    params = given.get("params")
    if isinstance(params, dict) and "name" in given:
        from rbench.retrievers.base import RETRIEVERS

        fields = RETRIEVERS.get(given["name"]).Params.model_fields
        default = {k: json.loads(json.dumps(f.get_default(call_default_factory=True), default=_json_default))
                   for k, f in fields.items() if not f.is_required()}
        params = {k: v for k, v in params.items() if k not in default or default[k] != v}
        given = {"name": given["name"], **({"params": params} if params else {})}
    return given


def _json_default(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, (Path, enum.Enum)):
        return str(getattr(value, "value", value))
    raise TypeError(type(value).__name__)


def docstring_clause(doc: str, name: str) -> str:
    """What a class docstring says of field ``name``: from where it is named in double backquotes
    and followed by ``:`` or `` (``, to the end of that clause (``;`` or ``.`` outside brackets); the
    empty string when the docstring defines it nowhere."""
    text = " ".join(doc.split())
    match = re.search(rf"``{re.escape(name)}``(:| \()", text)
    if match is None:
        return ""
    depth, start = 0, match.start()
    for i in range(start, len(text)):
        char = text[i]
        depth += {"(": 1, "[": 1, ")": -1, "]": -1}.get(char, 0)
        if depth <= 0 and (char == ";" or (char == "." and text[i + 1:i + 2] in (" ", ""))):
            return text[start:i + (char == ".")]
    return text[start:]


def field_rows(model: type[BaseModel], sections: Sections, only: Iterable[str] | None = None,
               extra: dict[str, str] | None = None) -> list[str]:
    """A Markdown table of the model's fields: key, type, default, allowed values, description; a
    model without fields (an adapter without settings) has none, not a table of no rows."""
    doc = inspect.getdoc(model) or ""
    if not model.model_fields:
        return []
    rows = ["| key | type | default | allowed | description |", "| --- | --- | --- | --- | --- |"]
    for name, field in model.model_fields.items():
        if only is not None and name not in only:
            continue
        annotation = field.annotation
        text, allowed, constraints = type_text(annotation, sections)
        constraints += _constraints(field.metadata)
        allowed_text = ", ".join(f"`{v}`" for v in allowed) or "; ".join(dict.fromkeys(constraints)) or ""
        if allowed and constraints:
            allowed_text += "; " + "; ".join(dict.fromkeys(constraints))
        described = markdown(field.description or docstring_clause(doc, name))
        if not described:
            if model.__module__.startswith("rbench."):
                raise UndocumentedKey(f"{model.__module__}.{model.__qualname__}.{name} has no description: write "
                                      "one as a docstring under the field (or Field(description=...))")
            described = "*(undocumented by its plugin)*"
        if extra and name in extra:
            described = f"{described} *({extra[name]})*" if described else f"*{extra[name]}*"
        rows.append(f"| `{name}` | {_cell(text)} | {_cell(default_text(field))} | {_cell(allowed_text)} | "
                    f"{_cell(described)} |")
    return rows


class UndocumentedKey(ValueError):
    """A settings key of rbench's own without a description: the reference is not built."""


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def markdown(text: str) -> str:
    """A docstring's reST made Markdown: double backquotes and roles such as :class: become code spans."""
    text = re.sub(r":[a-z]+:`~?([^`]+)`", r"`\1`", text)
    return text.replace("``", "`")


def _doc(obj: Any) -> str:
    return markdown(" ".join((inspect.getdoc(obj) or "").split()))


def _section(title: str, level: int, intro: list[str], model: type[BaseModel], sections: Sections,
             **kwargs: Any) -> list[str]:
    return [f"{'#' * level} {title}", "", *[line for line in intro if line], "", *field_rows(model, sections, **kwargs),
            ""]


def configuration_reference() -> str:
    """The whole reference page, as Markdown."""
    from rbench.config import (
        PROTOCOLS,
        DatasetConfig,
        ExecutionConfig,
        ExperimentConfig,
        MetricsConfig,
        MlflowConfig,
        RetrieverConfig,
        SubsampleConfig,
    )
    from rbench.config.chunking import ChunkingGridConfig, ChunkingSearch
    from rbench.config.search import Dimension, SearchConfig
    from rbench.dataset_adapters.base import ADAPTERS
    from rbench.dataset_adapters.chunking import ChunkerConfig
    from rbench.llm.config import BACKEND_FIELDS, LLMConfig
    from rbench.retrievers.base import RETRIEVERS, RetrieverSpec
    from rbench.retrievers.models import Encoding
    from rbench.retrievers.rerankers import RerankerParams

    shared = {
        ExperimentConfig: "Experiment file", SubsampleConfig: "subsample", MetricsConfig: "metrics",
        MlflowConfig: "mlflow", ExecutionConfig: "execution", DatasetConfig: "dataset entry",
        RetrieverConfig: "retriever entry", LLMConfig: "LLM settings", SearchConfig: "search",
        Dimension: "search space dimension", ChunkingGridConfig: "Chunking grid file",
        ChunkingSearch: "chunking search", Encoding: "encoding", ChunkerConfig: "chunker",
        RetrieverSpec: "retriever entry", RerankerParams: "reranker",
    }
    sections = Sections(shared)
    out = ["# Configuration reference", "",
           "Generated from the code when the site is built (`rbench.reference_pages`): the typed settings classes, "
           "the dataset adapter registry and the retriever registry, including retrievers and adapters that "
           "installed plugins register. A key not listed here is an error in a config file.", ""]
    out += _section("Experiment file", 2, [_doc(ExperimentConfig),
                                           "Protocols: " + "; ".join(
                                               f"`{name}` fixes {json.dumps(fixed) if fixed else 'nothing'}"
                                               for name, fixed in PROTOCOLS.items()) + "."],
                    ExperimentConfig, sections)
    for model in (SubsampleConfig, MetricsConfig, MlflowConfig, ExecutionConfig, DatasetConfig, RetrieverConfig):
        out += _section(shared[model], 3, [_doc(model)], model, sections)
    out += _section("search", 3, [_doc(SearchConfig), "An optional section of an experiment file, read by "
                                  "`rbench search`."], SearchConfig, sections)
    out += _section("search space dimension", 3, [_doc(Dimension)], Dimension, sections)

    out += ["## Dataset adapters", "", "`datasets[].adapter` (default: the dataset's `name`) names one of these; "
            "its `params` are the adapter's.", ""]
    for name, adapter in ADAPTERS.items():
        out += _section(f"dataset: {name}", 3, [f"**{adapter.description}**",
                                                 f"Defined in `{adapter.__module__}`.", _doc(adapter.Params)],
                        adapter.Params, sections)
    out += _section("chunker", 3, [_doc(ChunkerConfig)], ChunkerConfig, sections)

    out += ["## Retrievers", "", "`retrievers[].name` names one of these; its `params` are the retriever's. "
            "A field typed [retriever entry](#retriever-entry) takes another retriever as `{name, params}`.", ""]
    for name, cls in RETRIEVERS.items():
        kind = "" if cls.searchable else " (a component, not a retriever of its own)"
        out += _section(f"retriever: {name}", 3, [f"**{cls.description}**{kind}", f"Defined in `{cls.__module__}`.",
                                                   _doc(cls.Params)], cls.Params, sections)
    out += _section("encoding", 3, [_doc(Encoding)], Encoding, sections)
    out += _section("reranker", 3, [_doc(RerankerParams), "Given inline where a retriever takes one "
                                    "(`rerank`, `cross_encoder`)."], RerankerParams, sections)

    backends = {field: sorted(b for b, fields in BACKEND_FIELDS.items() if field in fields)
                for field in LLMConfig.model_fields}
    notes = {f: f"backend{'s' if len(b) > 1 else ''}: {', '.join(b)}" for f, b in backends.items() if b}
    out += ["## LLMs", "", "An LLM is configured once under `llms:` and named by retrievers (`llm: NAME`), or given "
            "inline. Settings that only one backend reads say which; giving them to another backend is an error.", ""]
    out += _section("LLM settings", 3, [_doc(LLMConfig)], LLMConfig, sections, extra=notes)
    for backend, fields in BACKEND_FIELDS.items():
        out += [f"- `{backend}`: " + ", ".join(f"`{f}`" for f in sorted(fields))]
    out += [""]

    out += _section("Chunking grid file", 2, [_doc(ChunkingGridConfig), "Read by `rbench chunking`."],
                    ChunkingGridConfig, sections)
    out += _section("chunking search", 3, [_doc(ChunkingSearch)], ChunkingSearch, sections)
    out += _named_things()
    return "\n".join(out).rstrip() + "\n"


def _named_things() -> list[str]:
    """The environment variables, prompts, model names and published tables a config may name."""
    from rbench.evaluation.reproduction import load_published, published_names
    from rbench.llm import models as llm_models
    from rbench.llm.prompts import BUILTIN, load_prompt
    from rbench.retrievers.models import ALIASES, MODELS

    out = ["## Environment variables", "", "A flag or a config key wins over the environment.", "",
           "| variable | what it sets |", "| --- | --- |"]
    out += [f"| `{name}` | {_cell(text)} |" for name, text in VARIABLES.items()]
    out += ["", "## Prompts", "", "A retriever's `prompt`-typed keys take one of these names, or the path of a "
            "YAML file of your own with the same parts (`system`, `examples`, `user`).", "",
            "| name | variables | what it asks |", "| --- | --- | --- |"]
    for path in sorted(BUILTIN.glob("*.yaml")):
        prompt = load_prompt(path.stem)
        described = yaml_description(path)
        out.append(f"| `{path.stem}` | {', '.join(f'`{{{v}}}`' for v in sorted(prompt.variables))} | "
                   f"{_cell(described)} |")
    out += ["", "## Model names", "", "Where a key takes a model, it takes a hub id, a local folder, or one of these "
            "names (the packaged ones load with no network).", "", "| name | is | packaged |", "| --- | --- | --- |"]
    for spec in MODELS.values():
        names = [f"`{spec.id}`"] + [f"`{a}`" for a, target in ALIASES.items() if target == spec.id]
        out.append(f"| {', '.join(names)} | {_cell(spec.description)} | {'yes' if spec.module else 'no'} |")
    for model_id in llm_models.PACKAGED:
        names = [f"`{model_id}`"] + [f"`{a}`" for a, target in llm_models.ALIASES.items() if target == model_id]
        out.append(f"| {', '.join(names)} | an LLM (`llm: {{model: ...}}`) | yes |")
    out += ["", "## Published tables", "", "`rbench compare RUN TABLE` takes one of these names, or the path of a "
            "table file of your own.", "", "| name | what it holds |", "| --- | --- |"]
    out += [f"| `{name}` | {_cell(load_published(name).title)} |" for name in published_names()]
    return out + [""]


def yaml_description(path: Path) -> str:
    """The ``description`` of a prompt file."""
    import yaml

    return str((yaml.safe_load(path.read_text(encoding="utf-8")) or {}).get("description") or "")


def cli_reference() -> str:
    """Every subcommand's ``--help``, as Markdown."""
    import argparse

    from rbench.cli import build_parser

    parser = build_parser()
    out = ["# Command line", "", "Generated from the command line's own parser (`rbench <command> --help`).", "",
           "```text", parser.format_help().rstrip(), "```", ""]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                out += [f"## rbench {name}", "", "```text", sub.format_help().rstrip(), "```", ""]
    return "\n".join(out)
