"""The configuration reference is generated from the settings classes and the registries: a new
parameter, a new retriever or a plugin's component shows up in it with no other edit, with the
type, default, allowed values and description the code gives it."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

import pytest
from pydantic import BaseModel, ConfigDict, Field, PositiveInt

from rbench.config import ExperimentConfig, MetricsConfig
from rbench.core.configfile import ConfigPath, PathOrName
from rbench.dataset_adapters.base import ADAPTERS
from rbench.reference_pages import Sections, anchor, cli_reference, configuration_reference, docstring_clause, type_text
from rbench.retrievers.base import RETRIEVERS, Retriever

REPO = Path(__file__).resolve().parents[2]


def section(text: str, title: str) -> str:
    """The body of the ``### title`` section of the reference."""
    match = re.search(rf"^### {re.escape(title)}\n(.*?)(?=^##)", text, flags=re.S | re.M)
    assert match, f"no section {title!r}"
    return match.group(1)


def test_a_new_retriever_parameter_changes_the_reference_and_nothing_else(monkeypatch):
    bm25 = RETRIEVERS.get("bm25")
    before = configuration_reference()

    class Widened(bm25.Params):
        """Okapi BM25 with one more setting."""

        model_config = ConfigDict(extra="forbid", frozen=True)

        probe_depth: PositiveInt = Field(7, description="documents probed per term")

    monkeypatch.setattr(bm25, "Params", Widened)
    monkeypatch.setattr(bm25, "search_fields", (*bm25.search_fields, "probe_depth"))  # placed, as a retriever must
    after = configuration_reference()
    changed = [line for line in after.splitlines() if line not in before.splitlines()]
    assert "| `probe_depth` | int | `7` | > 0 | documents probed per term |" in changed
    assert section(after, "retriever: bm25") != section(before, "retriever: bm25")
    assert section(after, "retriever: dense") == section(before, "retriever: dense")


def test_a_registered_plugin_retriever_gets_its_section(monkeypatch):
    class Params(BaseModel):
        """``mode``: how hard to look."""

        mode: Literal["fast", "thorough"] = "fast"

    class Plugin(Retriever):
        name = "plugin_probe"
        description = "a retriever a plugin registers"

    Plugin.Params = Params
    RETRIEVERS._load()
    monkeypatch.setitem(RETRIEVERS._items, "plugin_probe", Plugin)
    body = section(configuration_reference(), "retriever: plugin_probe")
    assert "**a retriever a plugin registers**" in body
    assert '| `mode` | str | `"fast"` | `"fast"`, `"thorough"` | `mode`: how hard to look. |' in body


def test_an_undocumented_key_of_rbench_stops_the_reference_build_and_a_plugins_is_marked(monkeypatch):
    from rbench.reference_pages import UndocumentedKey

    bm25 = RETRIEVERS.get("bm25")

    class Widened(bm25.Params):
        model_config = ConfigDict(extra="forbid", frozen=True)

        probe_depth: PositiveInt = 7

    monkeypatch.setattr(bm25, "Params", Widened)
    monkeypatch.setattr(bm25, "search_fields", (*bm25.search_fields, "probe_depth"))  # placed, as a retriever must
    monkeypatch.setattr(Widened, "__module__", "rbench.retrievers.bm25")
    with pytest.raises(UndocumentedKey, match=r"rbench\.retrievers\.bm25\..*Widened\.probe_depth has no description"):
        configuration_reference()
    monkeypatch.setattr(Widened, "__module__", "someones_plugin.retrievers")
    assert "| `probe_depth` | int | `7` | > 0 | *(undocumented by its plugin)* |" in configuration_reference()


def test_the_built_reference_describes_every_key_and_shows_nested_defaults():
    text = configuration_reference()
    rows = [line for line in text.splitlines() if line.startswith("| `") and line.count(" | ") >= 4]
    assert len(rows) > 250
    assert [row for row in rows if not row.rsplit(" | ", 1)[1].strip(" |")] == []
    assert ('| `first_stage` | [retriever entry](#retriever-entry) | `{"name": "bm25s", "params": '
            '{"query_weighting": "tf"}}` |') in section(text, "retriever: xrr2")
    assert '| `chunker` | [chunker](#chunker) | `{"kind": "none"}` |' in section(text, "dataset: beir")
    assert "| `rerank` | [reranker](#reranker) or null |" in section(text, "retriever: decompose")
    assert "| `family` | str | `\"auto\"` | `\"auto\"`, `\"cross-encoder\"`, `\"mxbai-v2\"` |" in section(text, "reranker")


def test_the_environment_prompts_models_and_published_tables_are_listed():
    from rbench.core.settings import VARIABLES as ENVIRONMENT
    from rbench.evaluation.reproduction import published_names
    from rbench.llm.prompts import BUILTIN

    read = set()
    for folder in ("rbench", "tasks", "retrievers", "flows", "evaluation", "deployments"):
        for path in (REPO / folder).rglob("*.py"):
            if path.name != "settings.py":
                read |= set(re.findall(r"RBENCH_[A-Z_]+[A-Z]", path.read_text(encoding="utf-8")))
    assert read and read <= set(ENVIRONMENT), sorted(read - set(ENVIRONMENT))
    text = configuration_reference()
    for name in ENVIRONMENT:
        assert f"| `{name}` |" in text
    for prompt in BUILTIN.glob("*.yaml"):
        assert re.search(rf"^\| `{prompt.stem}` \| .+ \| \w.+ \|$", text, flags=re.M), prompt.stem
    for name in published_names():
        assert f"| `{name}` |" in text
    assert "`static-64d`" in text and "`smollm2-135m`" in text


def test_every_registered_component_and_experiment_key_is_listed():
    text = configuration_reference()
    for name in RETRIEVERS.names():
        assert f"### retriever: {name}\n" in text
        for field in RETRIEVERS.get(name).Params.model_fields:
            assert f"| `{field}` |" in section(text, f"retriever: {name}")
    for name in ADAPTERS.names():
        for field in ADAPTERS.get(name).Params.model_fields:
            assert f"| `{field}` |" in section(text, f"dataset: {name}")
    experiment = text.split("\n## ", 2)[1]
    for field in ExperimentConfig.model_fields:
        assert f"| `{field}` |" in experiment
    assert "| `precision_denominator` | str | `\"k\"` | `\"k\"`, `\"retrieved\"` |" in section(text, "metrics")
    assert "backend: vllm" in section(text, "LLM settings")


def test_links_in_the_reference_name_sections_that_exist():
    text = configuration_reference()
    anchors = {anchor(h) for h in re.findall(r"^#+ (.+)$", text, flags=re.M)}
    targets = set(re.findall(r"\]\(#([^)]+)\)", text))
    assert targets and targets <= anchors


def test_types_are_spelled_as_a_config_author_reads_them():
    sections = Sections({MetricsConfig: "metrics"})
    assert type_text(PositiveInt | None, sections) == ("int or null", [], ["> 0"])
    assert type_text(Literal["a", "b"], sections) == ("str", ['"a"', '"b"'], [])
    assert type_text(list[MetricsConfig], sections)[0] == "list of [metrics](#metrics)"
    assert type_text(ConfigPath, sections)[0] == "path (relative to the config file)"
    assert type_text(PathOrName, sections)[0] == "str (a name, or a path relative to the config file)"
    assert type_text(dict[str, int], sections)[0] == "mapping of str to int"


def test_a_docstring_clause_is_cut_where_its_definition_ends():
    doc = """``model``: a hub id (or a folder; see below); ``index``: ``flat`` or ``hnsw``. ``min_score``:
    a threshold in [0, 1]. Uses ``model`` twice."""
    assert docstring_clause(doc, "model") == "``model``: a hub id (or a folder; see below)"
    assert docstring_clause(doc, "index") == "``index``: ``flat`` or ``hnsw``."
    assert docstring_clause(doc, "min_score") == "``min_score``: a threshold in [0, 1]."
    assert docstring_clause(doc, "nprobe") == ""


def test_the_cli_reference_holds_every_subcommands_help():
    text = cli_reference()
    for name in ("run", "compare", "compare-grid", "report", "verify"):
        assert f"## rbench {name}\n" in text
        assert f"usage: rbench {name}" in text


def test_the_readme_fits_one_screen_and_its_links_exist():
    readme = (REPO / "README.md").read_text()
    assert len(readme.splitlines()) <= 150
    for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", readme):
        if not target.startswith(("http://", "https://")):
            assert (REPO / target).exists(), target


@pytest.mark.parametrize("page", sorted(p.name for p in (REPO / "docs").glob("*.md")))
def test_every_docs_page_is_in_the_navigation(page):
    assert f": {page}" in (REPO / "mkdocs.yml").read_text()
