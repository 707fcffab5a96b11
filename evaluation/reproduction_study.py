"""A whole published study reproduced in one command: which study configs run here and which on a
cluster, and the page that lines every published cell up, in the manner of Pyserini's 2CR pages.

A reproduction (``evaluation/published/reproductions/<name>.yaml``) names published tables and
the study configs that produce their cells. :func:`matrix` turns the comparison documents of the
runs (:func:`rbench.evaluation.reproduction.document`) into one row per benchmark x method with,
per published cell, the published value, rbench's value and the verdict, and the command that
reproduces the row.
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Literal, Mapping, Sequence

from pydantic import BaseModel, ConfigDict, Field

from rbench.core.configfile import validate_file
from rbench.evaluation.reproduction import PUBLISHED, shipped_file
from rbench.evaluation.reproduction_text import ceilings_line

REPRODUCTIONS = PUBLISHED / "reproductions"
REPO = Path(__file__).resolve().parents[1]


class Study(BaseModel):
    """A study config (a path from the repository root) and where it runs: ``local`` (this
    command runs it) or ``cluster`` (listed with its command). ``needs``: files a local study
    reads from the mirror (paths in it); without them it is listed as not run, with the reason."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    config: str = Field(min_length=1)
    where: Literal["local", "cluster"] = "local"
    needs: list[str] = Field(default_factory=list)

    def path(self, base: Path = REPO) -> Path:
        """The config file, relative to ``base`` unless absolute."""
        return Path(self.config) if Path(self.config).is_absolute() else base / self.config

    def command(self, mirror: str | None = None, rbench: str = "rbench") -> str:
        """The one command that runs this study (``rbench``: how to call rbench)."""
        flag = f" --mirror {mirror}" if mirror and self.where == "local" else ""
        return f"{rbench} run {self.config}{flag}"

    def missing(self, mirror: Path | None) -> list[str]:
        """The needed files a mirror lacks (none without a mirror: they are downloaded)."""
        return [] if mirror is None else [n for n in self.needs if not (mirror / n).exists()]


class Reproduction(BaseModel):
    """A published study: its tables and the study configs that produce their cells."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9_.-]*$")
    title: str = Field(min_length=1)
    tables: list[str] = Field(min_length=1)
    studies: list[Study] = Field(min_length=1)


def load_reproduction(name_or_path: str) -> Reproduction:
    """A shipped reproduction by name (``arm-report``), or a YAML file of the same shape."""
    return validate_file(Reproduction, shipped_file(name_or_path, REPRODUCTIONS, "reproduction"), "reproduction")


def _covers(study_pairs: Mapping[str, set[tuple[str, str]]], dataset: str, system: str) -> str | None:
    return next((config for config, pairs in study_pairs.items() if (dataset, system) in pairs), None)


def matrix(repro: Reproduction, docs: Sequence[Mapping], study_pairs: Mapping[str, set[tuple[str, str]]],
           commands: Mapping[str, str], status: Mapping[str, str]) -> list[dict]:
    """One row per published table x benchmark x method: ``cells`` (``metric@k`` -> published,
    measured and verdict; measured None where no run has it), the study config that produces the
    row and its command, and that study's status here (``ran``, or why not)."""
    by_table: dict[str, dict[tuple[str, str], dict[str, dict]]] = {}
    ceilings: dict[tuple[str, str], Mapping] = {}
    for doc in docs:
        for c in doc["cells"]:
            if c["run_dataset"] in doc.get("ceilings", {}):
                ceilings[(doc["against"], c["dataset"])] = doc["ceilings"][c["run_dataset"]]
            cell = by_table.setdefault(doc["against"], {}).setdefault((c["dataset"], c["system"]), {})
            key = f"{c['metric']}@{c['k']}"
            if c["measured"] is not None or key not in cell:
                cell[key] = {"published": c["published"], "measured": c["measured"],
                             "verdict": c["verdict"] if c["measured"] is not None else ""}
    rows = []
    for table in repro.tables:
        for (dataset, system), cells in by_table.get(table, {}).items():
            config = _covers(study_pairs, dataset, system)
            command = f"{commands[config]} && rbench compare latest --against {table}" if config in commands else ""
            rows.append({"table": table, "dataset": dataset, "system": system, "cells": cells, "study": config,
                         "command": command, "ceiling": ceilings.get((table, dataset)),
                         "status": status.get(config, "no study config runs it") if config
                         else "no study config runs it"})
    return rows


def _cell_text(cell: Mapping) -> str:
    if cell["measured"] is None:
        return f"{cell['published']:.3f} / -"
    return f"{cell['published']:.3f} / {cell['measured']:.4f} {cell['verdict']}"


def _counts(rows: Sequence[Mapping]) -> str:
    verdicts = [c["verdict"] for r in rows for c in r["cells"].values() if c["measured"] is not None]
    total = sum(len(r["cells"]) for r in rows)
    equal = verdicts.count("equal")
    off = sum(v.startswith("off by") for v in verdicts)
    inside = verdicts.count("inside")
    return (f"{len(verdicts)} of {total} published cells measured here: {equal} equal, {off} off by some queries, "
            f"{inside} inside their interval, {verdicts.count('outside')} outside, "
            f"{verdicts.count('not comparable')} not comparable")


def page(repro: Reproduction, rows: Sequence[Mapping], studies: Sequence[tuple[Study, str]],
         mirror: str | None) -> tuple[str, str]:
    """The reproduction page as ``(markdown, html)``: per table, one row per benchmark x method
    (each published cell as ``published / rbench verdict``) with its command; then the studies,
    where each runs and whether it ran here."""
    md = [f"# Reproduction: {repro.title}", "",
          "Each cell: the published value / rbench's value and the verdict (`equal` or `off by q of N queries` "
          "where rbench runs the same computation; else the 95% interval's `inside` or `outside`, or `not "
          "comparable` where a stand-in model runs); `-`: not run here.", ""]
    body = [f"<h1>Reproduction: {html.escape(repro.title)}</h1>"]
    for table in repro.tables:
        mine = [r for r in rows if r["table"] == table]
        if not mine:
            continue
        keys = list(dict.fromkeys(k for r in mine for k in r["cells"]))
        md += [f"## {table}", "", _counts(mine) + ".", "",
               "| benchmark | method | " + " | ".join(keys) + " | command |",
               "|---|---|" + "---|" * len(keys) + "---|"]
        body.append(f"<h2>{html.escape(table)}</h2><p>{html.escape(_counts(mine))}.</p><table><tr><th>benchmark</th>"
                    "<th>method</th>" + "".join(f"<th>{html.escape(k)}</th>" for k in keys) + "<th>command</th></tr>")
        for r in mine:
            texts = [_cell_text(r["cells"][k]) if k in r["cells"] else "" for k in keys]
            command = r["command"] or r["status"]
            md.append(f"| {r['dataset']} | {r['system']} | " + " | ".join(texts) + f" | `{command}` |")
            body.append(f"<tr><td>{html.escape(r['dataset'])}</td><td>{html.escape(r['system'])}</td>"
                        + "".join(f"<td>{html.escape(t)}</td>" for t in texts)
                        + f"<td><code>{html.escape(command)}</code></td></tr>")
        counted = ceilings_line({r["dataset"]: r["ceiling"] for r in mine if r.get("ceiling")})
        md += ["", counted + "."] if counted else []
        md.append("")
        body.append("</table>" + (f"<p>{html.escape(counted)}.</p>" if counted else ""))
    md += ["## Study configs", "", "| config | where | here |", "|---|---|---|"]
    body.append("<h2>Study configs</h2><table><tr><th>config</th><th>where</th><th>here</th></tr>")
    for study, state in studies:
        md.append(f"| `{study.command(mirror)}` | {study.where} | {state} |")
        body.append(f"<tr><td><code>{html.escape(study.command(mirror))}</code></td><td>{study.where}</td>"
                    f"<td>{html.escape(state)}</td></tr>")
    from rbench.evaluation.report import html_page

    return "\n".join(md) + "\n", html_page(f"Reproduction: {repro.title}", "".join(body) + "</table>")
