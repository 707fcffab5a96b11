"""Prompt files: a system message, few-shot examples and a user template, in YAML.

A prompt is named by a built-in name (a file in ``rbench/prompts``), a reference prompt read from a
reference implementation's pinned source (``arm:decompose``: :mod:`rbench.llm.reference_prompts`) or a
path to a user's file of the same shape. The system message and user template hold ``{variables}``
that the caller fills; other braces are left as they are. The file's content is part of every cache key
that depends on it.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any

import yaml
from pydantic import AfterValidator

from rbench.core.configfile import resolved_str
from rbench.core.errors import ConfigError, DataError

BUILTIN = Path(__file__).resolve().parent.parent / "prompts"
VARIABLE = re.compile(r"\{([a-z_]+)\}")


@dataclass(frozen=True)
class Prompt:
    """A loaded prompt: where it came from, its text, and its parts."""

    source: str
    text: str
    system: str
    examples: tuple[tuple[str, str], ...]
    user: str

    @property
    def digest(self) -> str:
        """sha256 of the file's text."""
        return hashlib.sha256(self.text.encode()).hexdigest()

    @property
    def variables(self) -> set[str]:
        """The ``{variables}`` of the system message and the user template."""
        return set(VARIABLE.findall(self.system)) | set(VARIABLE.findall(self.user))

    def render(self, **values: str) -> list[tuple[str, str]]:
        """The chat messages with the user template filled in."""
        missing = self.variables - set(values)
        if missing:
            raise ConfigError(f"prompt {self.source} needs {sorted(missing)}")
        def fill(template: str) -> str:
            return VARIABLE.sub(lambda m: str(values[m.group(1)]) if m.group(1) in values else m.group(0), template)

        messages = [("system", fill(self.system))] if self.system else []
        for user, assistant in self.examples:
            messages += [("user", user), ("assistant", assistant)]
        return messages + [("user", fill(self.user))]


def prompt_location(ref: str) -> Path:
    """The file of a built-in prompt name or a user's path."""
    if re.fullmatch(r"[a-z_]+", ref):
        path = BUILTIN / f"{ref}.yaml"
        if path.is_file():
            return path
    path = Path(ref).expanduser()
    if path.is_file():
        return path.resolve()
    from rbench.llm.reference_prompts import REFERENCE_PROMPTS

    builtin = sorted(p.stem for p in BUILTIN.glob("*.yaml"))
    raise ConfigError(f"prompt {ref!r} is neither a built-in prompt {builtin}, a reference prompt "
                      f"{sorted(REFERENCE_PROMPTS)} nor an existing file")


def parse_prompt(text: str, source: str) -> Prompt:
    """A prompt from the text of a prompt file (``source`` names it in errors)."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise ConfigError(f"prompt file {source} is not valid YAML: {e}") from None
    if not isinstance(data, dict) or not isinstance(data.get("user"), str):
        raise ConfigError(f"prompt file {source} needs a 'user' template (a string); optional 'system' and "
                          "'examples' (a list of {user, assistant})")
    unknown = set(data) - {"description", "system", "examples", "user"}
    if unknown:
        raise ConfigError(f"prompt file {source}: unknown keys {sorted(unknown)}; allowed: description, system, "
                          "examples, user")
    examples = []
    for n, example in enumerate(data.get("examples") or [], 1):
        if not isinstance(example, dict) or set(example) != {"user", "assistant"}:
            raise ConfigError(f"prompt file {source}: example {n} must have exactly 'user' and 'assistant'")
        examples.append((str(example["user"]).strip(), str(example["assistant"]).strip()))
    return Prompt(source, text, str(data.get("system") or "").strip(), tuple(examples), data["user"].strip())


def prompt_file_text(data: dict[str, Any], where: str) -> str:
    """The prompt file of a prompt given by its parts (``system``, ``examples`` of ``user``/``assistant``, the
    ``user`` template, optional ``description``); a DataError naming ``where`` the parts came from if the file
    could not keep a message as it is (white space at its ends, or a ``{name}`` that rendering would fill)."""
    fixed = [data["system"], *(t for shot in data["examples"] for t in shot.values())]
    for part in (*fixed, data["user"]):
        if part != part.strip():
            raise DataError(f"{where}: a message begins or ends with white space, which a prompt file cannot keep")
    for part in fixed:
        found = VARIABLE.search(part)
        if found:
            raise DataError(f"{where}: {found.group(0)} in a fixed message would be filled in as a variable: this "
                            "prompt cannot be kept as it is")
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=1 << 16)


@lru_cache(maxsize=None)
def _load(path: Path, mtime_ns: int) -> Prompt:
    return parse_prompt(path.read_text(encoding="utf-8"), str(path))


def load_prompt(ref: str, needs: set[str] | frozenset[str] = frozenset()) -> Prompt:
    """Load a prompt and check that its template uses the ``needs`` variables."""
    from rbench.llm.reference_prompts import REFERENCE_PROMPTS, reference_prompt

    if ref in REFERENCE_PROMPTS:
        where, prompt = ref, parse_prompt(prompt_file_text(*reference_prompt(ref)), ref)
    else:
        path = prompt_location(ref)
        where, prompt = str(path), _load(path, path.stat().st_mtime_ns)
    missing = set(needs) - prompt.variables
    if missing:
        raise ConfigError(f"prompt {where}: the user template must contain {sorted('{' + v + '}' for v in missing)}")
    return prompt


def prompt_ref(*needs: str):
    """The type of a retriever param naming a prompt (built-in name or path) whose template
    must use the ``needs`` variables; checked when the config is read."""

    def check(ref: str) -> str:
        from rbench.llm.reference_prompts import REFERENCE_PROMPTS

        if ref in REFERENCE_PROMPTS:  # read when the plan needs its text, like a dataset's files
            return ref
        try:
            load_prompt(ref, set(needs))
        except ConfigError as e:
            raise ValueError(str(e)) from None
        return ref

    return Annotated[str, AfterValidator(resolved_str), AfterValidator(check)]


QuestionPrompt = prompt_ref("question")
PassagesPrompt = prompt_ref("question", "passages")
DocumentsPrompt = prompt_ref("question", "documents")
