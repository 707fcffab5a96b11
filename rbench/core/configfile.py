"""The one way rbench reads a YAML settings file: strict parsing (duplicate keys refused,
file:line in errors), pydantic errors rendered as ``key.path: problem`` lines, and path
fields typed as :data:`ConfigPath` so that a relative path resolves against the folder of
the file that holds it, whatever the working directory."""

from __future__ import annotations

import difflib
import re
import typing
from pathlib import Path
from typing import Annotated, Any, Callable, Iterable, Mapping

import yaml
from pydantic import AfterValidator, BaseModel, ValidationError, ValidationInfo

from rbench.core.errors import ConfigError
from rbench.core.secrets import redact


class _UniqueKeyLoader(yaml.SafeLoader):
    """A YAML loader that refuses a key given twice in one mapping (YAML keeps the last silently)."""

    def construct_mapping(self, node, deep=False):
        seen: dict = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise ConfigError(f"{self.name}:{key_node.start_mark.line + 1}: key {key!r} appears twice in one "
                                  f"mapping (first on line {seen[key]}): YAML would keep only the last; remove one")
            seen[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep=deep)


MAX_FILE_BYTES = 4 << 20
MAX_VALUES = 100_000
"""Limits checked before a settings file is resolved: its size, and how many values it holds once
every YAML alias is expanded (an "anchor bomb" of a few lines expands to billions)."""


def read_yaml(path: Path) -> Any:
    """Parse a YAML file, refusing duplicate keys and files past :data:`MAX_FILE_BYTES` or
    :data:`MAX_VALUES`; errors name the file and line."""
    return read_yaml_text(path)[0]


def read_yaml_text(path: Path) -> tuple[Any, str]:
    """:func:`read_yaml`'s value and the text it was parsed from (the file is read once)."""
    size = path.stat().st_size
    if size > MAX_FILE_BYTES:
        raise ConfigError(f"{path} is {size / 1e6:.1f} MB: a settings file holds at most {MAX_FILE_BYTES >> 20} MiB; "
                          "put data in files the settings name, not in the settings themselves")
    with open(path, "rb") as f:  # bounded: a device, FIFO or /proc file reports no size
        data = f.read(MAX_FILE_BYTES + 1)
    if len(data) > MAX_FILE_BYTES:
        raise ConfigError(f"{path} gives more than {MAX_FILE_BYTES >> 20} MiB (it is not a regular file of that "
                          "size): a settings file holds at most that; give the settings as a file")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise ConfigError(f"{path} is not UTF-8 text (byte {e.start}): give a YAML settings file") from None
    loader = _UniqueKeyLoader(text)
    loader.name = str(path)
    try:
        node = loader.get_single_node()
        if node is None:
            return None, text
        _count_values(node, path)
        return loader.construct_document(node), text
    except RecursionError:
        raise ConfigError(f"{path} is nested too deeply to be a settings file") from None
    finally:
        loader.dispose()


def _count_values(root: yaml.Node, path: Path) -> int:
    """How many values the YAML document ``root`` holds with its aliases expanded; refuses more than
    :data:`MAX_VALUES` and an alias inside itself, at the file's line."""
    def children(node: yaml.Node) -> list | None:
        if isinstance(node, yaml.MappingNode):
            return [part for pair in node.value for part in pair]
        return node.value if isinstance(node, yaml.SequenceNode) else None

    return _expanded(root, children, lambda node: f"{path}:{node.start_mark.line + 1}",
                     "once its YAML aliases (*name) are repeated", "write the values out, or use fewer aliases")


def count_values(value: Any, where: str) -> int:
    """The same limit on settings given as Python values (a notebook's dict, a deployment's
    parameters): values shared by reference are counted at each use."""
    def children(v: Any) -> list | None:
        if isinstance(v, dict):
            return [*v.keys(), *v.values()]
        return list(v) if isinstance(v, (list, tuple)) else None

    return _expanded(value, children, lambda _: where, "once shared values are repeated", "give fewer")


def _expanded(root: Any, children: Callable[[Any], list | None], where: Callable[[Any], str], how: str,
              fix: str) -> int:
    """How many values ``root`` holds with every shared value counted at each use (each computed
    once); a ConfigError past :data:`MAX_VALUES` or for a value that holds itself."""
    sizes: dict[int, int] = {}

    def size(value: Any) -> int:
        parts = children(value)
        if parts is None:
            return 1
        known = sizes.get(id(value))
        if known == -1:
            raise ConfigError(f"{where(value)}: this value refers to a value that holds it (an alias inside "
                              "itself): it would never end; remove that reference")
        if known is not None:
            return known
        sizes[id(value)] = -1
        total = 1 + sum(size(part) for part in parts)
        if total > MAX_VALUES:
            raise ConfigError(f"{where(value)}: this value expands to more than {MAX_VALUES:,} values {how}: a "
                              f"settings file holds fewer; {fix}")
        sizes[id(value)] = total
        return total

    return size(root)


def load_mapping(path: Path | str, what: str, hint: str = "") -> dict:
    """Read ``path`` as a YAML mapping; every problem is one :class:`ConfigError` naming the
    file (and the line where YAML gives one). ``what`` names the kind of file in messages."""
    return load_mapping_text(path, what, hint)[0]


def load_mapping_text(path: Path | str, what: str, hint: str = "") -> tuple[dict, str]:
    """:func:`load_mapping`'s mapping and the text it was parsed from (the file is read once)."""
    path = Path(path)
    if path.is_dir():
        raise ConfigError(f"{what} {path} is a folder: pass the path of a YAML file inside it")
    try:
        raw, text = read_yaml_text(path)
    except FileNotFoundError:
        raise ConfigError(f"{what} {path} does not exist: pass the path of a YAML file") from None
    except UnicodeDecodeError as e:
        raise ConfigError(f"{what} {path}: byte {e.object[e.start:e.start + 1]!r} at offset {e.start} "
                          "is not UTF-8; save the file as UTF-8") from None
    except yaml.YAMLError as e:
        raise ConfigError(f"{what} {path} is not valid YAML: {e}") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{what} {path} must be a YAML mapping{hint}, got {type(raw).__name__}")
    return raw, text


def _fields_at(model: type[BaseModel] | None, loc: tuple) -> list[str]:
    """The keys the model at ``loc`` (a pydantic error's location, its last part the bad key) takes;
    list indexes and the keys of a mapping of models are stepped over, [] where the path leaves
    pydantic models."""
    keyed = False
    for part in loc[:-1]:
        if model is None or isinstance(part, int) or keyed:
            keyed = False
            continue
        field = model.model_fields.get(str(part))
        if field is None:
            return []
        keyed = typing.get_origin(field.annotation) is dict
        candidates = [field.annotation, *typing.get_args(field.annotation)]
        candidates += [a for c in candidates for a in typing.get_args(c)]
        model = next((c for c in candidates if isinstance(c, type) and issubclass(c, BaseModel)), None)
    return list(model.model_fields) if model is not None else []


def unknown_key(loc: tuple, model: type[BaseModel] | None) -> str:
    """The message for an unknown key: a close known key as "did you mean", else how to fix it."""
    close = difflib.get_close_matches(str(loc[-1]), _fields_at(model, loc), n=1, cutoff=0.6) if loc else []
    return f"unknown key; did you mean {close[0]!r}?" if close else "unknown key; remove it or check its spelling"


def did_you_mean(value: object, choices: Iterable[object]) -> str:
    """``"; did you mean 'map'?"`` for the choice closest to a misspelt ``value``, else ""."""
    close = difflib.get_close_matches(str(value), [str(c) for c in choices], n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


def problem(err: Mapping[str, Any], model: type[BaseModel] | None) -> str:
    """One pydantic error's message: an unknown key names the known key it is closest to, and a value
    outside a closed choice the choice it is closest to ("did you mean 'map'?")."""
    if err["type"] == "extra_forbidden":
        return unknown_key(err["loc"], model)
    msg = err["msg"]
    if err["type"] in ("literal_error", "enum") and isinstance(err.get("input"), str):
        msg += did_you_mean(err["input"], re.findall(r"'([^']*)'", str((err.get("ctx") or {}).get("expected", ""))))
    return msg


def format_validation_error(err: ValidationError, source: str, what: str = "experiment config",
                            model: type[BaseModel] | None = None) -> str:
    """Render pydantic errors as 'key.path: problem (got value)' lines; an unknown key of ``model``
    (or of a model inside it) names the known key it is closest to."""
    lines = [f"invalid {what} {source}:"]
    for e in err.errors():
        where = ".".join(str(p) for p in e["loc"]) or "(top level)"
        msg = problem(e, model)
        got = e.get("input")
        secret = "api_key" in where  # a key pasted where its variable's name belongs is not repeated
        shown = "" if isinstance(got, (dict, list)) or got is None or secret else f" (got {got!r})"
        lines.append(f"  {where}: {msg}{shown}")
    return redact("\n".join(lines))


def validate_file(model: type[BaseModel], path: Path | str, what: str, hint: str = "") -> Any:
    """Load ``path`` strictly and validate it as ``model``, path fields resolved against its folder."""
    path = Path(path)
    raw = load_mapping(path, what, hint)
    try:
        return model.model_validate(raw, context={"base": path.resolve().parent})
    except ValidationError as e:
        raise ConfigError(format_validation_error(e, str(path), what, model)) from None


def flatten(prefix: str, value: Any) -> dict[str, Any]:
    """Nested settings as MLflow params: ``{prefix}.{key}`` per leaf (``execution.runner``)."""
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for k, v in value.items():
            out.update(flatten(f"{prefix}.{k}" if prefix else str(k), v))
        return out
    return {prefix: value}


def validate_params(model: type[BaseModel], params: dict[str, Any], context: dict | None = None) -> dict[str, Any]:
    """Validate a component's ``params`` as ``model`` (paths resolved by ``context``) and return
    them as plain JSON values; problems become one ValueError of ``params.key: problem (got
    value)`` parts (a value under a key naming an API key is never repeated)."""
    try:
        return model.model_validate(params, context=context).model_dump(mode="json")
    except ValidationError as e:
        problems = []
        for err in e.errors():
            where = ".".join(str(p) for p in err["loc"])
            msg = problem(err, model)
            got = err.get("input")
            secret = "api_key" in where  # a key pasted where its variable's name belongs is not repeated
            shown = "" if isinstance(got, (dict, list)) or got is None or secret else f" (got {got!r})"
            problems.append(f"params.{where}: {msg}{shown}")
        raise ValueError("; ".join(problems)) from None


def _resolve(value: Path, info: ValidationInfo) -> Path:
    value = value.expanduser()
    if value.is_absolute():
        return value
    base = (info.context or {}).get("base")
    try:
        return (Path(base) / value).resolve() if base is not None else value.resolve()
    except (RuntimeError, OSError) as e:  # pathlib reports a symbolic link loop as a RuntimeError
        raise ValueError(f"the path {str(value)!r} cannot be resolved ({e}): point it at a real file or folder") \
            from None


ConfigPath = Annotated[Path, AfterValidator(_resolve)]
"""A path in a settings file: relative paths resolve against the file's folder (the ``base``
of the validation context), else the working directory."""


def resolved_str(value: str, info: ValidationInfo) -> str:
    """A path-or-name string (a model folder, a prompt file): resolved against the settings
    file's folder when a file or folder of that relative name exists there, kept as is otherwise."""
    base = (info.context or {}).get("base")
    if base is None or not value or "://" in value:
        return value
    candidate = Path(value).expanduser()
    if candidate.is_absolute():
        return value
    here = Path(base) / candidate
    return str(here.resolve()) if here.exists() else value


PathOrName = Annotated[str, AfterValidator(resolved_str)]
"""A setting that is either a name (a registered model, a built-in prompt, a hub id) or a
path; a relative path that exists beside the settings file resolves against it."""
