"""Published span-level chunking grids (``published/grids/<name>.yaml``) and a grid run lined up
against one: each mean's delta, a 95% interval of it, and whether it rounds to the published value."""

from __future__ import annotations

import math
from datetime import date
from typing import Mapping, Sequence

from pydantic import BaseModel, ConfigDict, Field, model_validator

from rbench.core.configfile import validate_file
from rbench.core.errors import RbenchError
from rbench.evaluation.reproduction import PUBLISHED, Source, shipped_file

GRID_COLUMNS = ("chunk_size", "overlap", "n", "precision_mean", "precision_std", "recall_mean", "recall_std",
                "f1_mean", "f1_std")


class GridNote(BaseModel):
    """A reviewed note on how a published grid was reproduced: its text, the command that
    measured it, and the variants measured (free-form rows)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    text: str = Field(min_length=1)
    command: str = Field(min_length=1)
    date: date
    measured: list[dict[str, str | int | float]] = Field(default_factory=list)


class PublishedGrid(BaseModel):
    """A published span-level chunking grid (``published/grids/<name>.yaml``): per chunk size,
    overlap (tokens) and N retrieved, precision, recall and F1 in percent, mean and standard
    deviation over ``queries`` questions."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9_.-]*$")
    title: str = Field(min_length=1)
    source: Source
    notes: str = ""
    queries: int = Field(gt=0)
    decimals: int = Field(ge=0, le=6)
    columns: tuple[str, ...]
    cells: list[tuple[int, int, int, float, float, float, float, float, float]] = Field(min_length=1)
    reviewed: list["GridNote"] = Field(default_factory=list)

    @model_validator(mode="after")
    def _shape(self) -> "PublishedGrid":
        if self.columns != GRID_COLUMNS:
            raise ValueError(f"columns must be {list(GRID_COLUMNS)}, not {list(self.columns)}")
        keys = [c[:3] for c in self.cells]
        dupes = sorted({k for k in keys if keys.count(k) > 1})
        if dupes:
            raise ValueError(f"cells repeat (chunk_size, overlap, n) {dupes}")
        for cell in self.cells:
            if any(not 0 <= v <= 100 for v in cell[3:]):
                raise ValueError(f"cell {list(cell)}: means and deviations are percentages in [0, 100]")
        return self

    def rows(self) -> list[dict]:
        """The cells as dicts under :data:`GRID_COLUMNS`."""
        return [dict(zip(GRID_COLUMNS, cell)) for cell in self.cells]


def load_grid(name_or_path: str) -> PublishedGrid:
    """A shipped chunking grid by name, or a YAML file of the same shape."""
    path = shipped_file(name_or_path, PUBLISHED / "grids", "published grid")
    return validate_file(PublishedGrid, path, "published chunking grid")


GRID_METRICS = ("precision", "recall", "f1")


def compare_grid(grid: PublishedGrid, measured: Sequence[Mapping], z: float = 1.959964) -> list[dict]:
    """Each published grid mean (chunk size x overlap x N x precision/recall/F1, in percent)
    beside a run's ``measured`` rows (``chunk_size``, ``overlap``, ``n``, ``<metric>_mean`` and
    ``<metric>_std_population`` or ``<metric>_std_sample``, as fractions, as ``grid.csv`` holds them):
    the delta and a 95% interval of it from both standard deviations over the grid's ``queries``
    questions each (Welch, ``delta +- z sqrt((s_run^2 + s_pub^2) / n)``, widened by the published
    rounding; ``grid.csv`` does not carry the run's question count).
    Both sides score the same questions, so this interval is conservative. A cell the run lacks
    has ``measured`` None. ``equal`` and ``std_equal``: the run's mean and standard deviation
    round to the published ones."""
    by_key = {(int(r["chunk_size"]), int(r["overlap"]), int(r["n"])): r for r in measured}
    half_unit = 0.5 * 10.0 ** -grid.decimals
    out = []
    for cell in grid.rows():
        key = (cell["chunk_size"], cell["overlap"], cell["n"])
        row = by_key.get(key)
        for metric in GRID_METRICS:
            base = {"chunk_size": key[0], "overlap": key[1], "n": key[2], "metric": metric,
                    "published": cell[f"{metric}_mean"], "published_std": cell[f"{metric}_std"]}
            if row is None:
                out.append({**base, "measured": None, "inside": None})
                continue
            std = row.get(f"{metric}_std_population", row.get(f"{metric}_std_sample"))
            if std is None:
                raise RbenchError(f"the run's grid has no {metric}_std_population or {metric}_std_sample column; "
                                  "it has "
                                  f"{sorted(row)}")
            mean, std = 100 * float(row[f"{metric}_mean"]), 100 * float(std)
            delta = mean - cell[f"{metric}_mean"]
            half = z * math.sqrt((std ** 2 + cell[f"{metric}_std"] ** 2) / grid.queries) + half_unit
            out.append({**base, "measured": mean, "measured_std": std, "delta": delta, "low": delta - half,
                        "high": delta + half, "inside": delta - half <= 0 <= delta + half,
                        "equal": abs(delta) <= half_unit + 1e-9,
                        "std_equal": abs(std - cell[f"{metric}_std"]) <= half_unit + 1e-9})
    return out


def grid_markdown(grid: PublishedGrid, cells: Sequence[Mapping], run: str) -> tuple[str, str]:
    """A grid comparison as Markdown (counts per metric, then every cell) and its one-line summary."""
    measured = [c for c in cells if c["measured"] is not None]
    inside = sum(bool(c["inside"]) for c in measured)
    line = (f"{inside} of {len(measured)} measured means inside their 95% interval, "
            f"{sum(bool(c['equal']) for c in measured)} equal to the published mean and "
            f"{sum(bool(c['std_equal']) for c in measured)} to its standard deviation at the printed rounding "
            f"({len(cells) - len(measured)} of {len(cells)} published means not in the run)")
    per_metric = ", ".join(f"{m} {sum(bool(c['inside']) for c in measured if c['metric'] == m)}/"
                           f"{sum(1 for c in measured if c['metric'] == m)}" for m in GRID_METRICS)
    lines = [f"# {grid.name} against run {run}", "",
             f"Published: {grid.source.reference} ({grid.source.url}, read {grid.source.read}); {grid.title}. "
             f"Percent. Interval: of the difference, from both standard deviations over {grid.queries} questions "
             "each (Welch, normal approximation, widened by the published rounding); both sides score the same "
             "questions, so it is conservative.", "", f"{line}; inside per metric: {per_metric}.", "",
             *(f"Note: {n.text} Measured with: {n.command}\n" for n in grid.reviewed),
             "| size | overlap | N | metric | published (std) | measured (std) | delta | 95% interval | inside |",
             "|---|---|---|---|---|---|---|---|---|"]
    for c in cells:
        head = (f"| {c['chunk_size']} | {c['overlap']} | {c['n']} | {c['metric']} | "
                f"{c['published']:.2f} ({c['published_std']:.2f}) |")
        if c["measured"] is None:
            lines.append(head + " not in the run | | | |")
        else:
            lines.append(head + f" {c['measured']:.2f} ({c['measured_std']:.2f}) | {c['delta']:+.2f} | "
                                f"[{c['low']:+.2f}, {c['high']:+.2f}] | {'yes' if c['inside'] else 'no'} |")
    return "\n".join(lines) + "\n", line
