"""Table and text serialization in the formats of DESIGN.md."""

from __future__ import annotations

from typing import Iterator, Literal, Sequence

SEP = "[SEP]"
Granularity = Literal["row", "table", "cell", "schema"]


def _cells(header: Sequence[str], row: Sequence[str]) -> list[str]:
    return [f"[H] {h} : {v}" for h, v in zip(header, row) if str(v).strip()]


def serialize_row(title: str, header: Sequence[str], row: Sequence[str]) -> str:
    """``title [SEP] [H] col1 : val1 , [H] col2 : val2 ...`` (empty cells dropped)."""
    return f"{title} {SEP} " + " , ".join(_cells(header, row))


def serialize_text(title: str, passage: str) -> str:
    """``title [SEP] passage``."""
    return f"{title} {SEP} {passage}"


def table_objects(
    title: str, header: Sequence[str], rows: Sequence[Sequence[str]], granularity: Granularity
) -> Iterator[tuple[str, int, str, dict]]:
    """Yield ``(modality, position, text, metadata)`` for a table at the given granularity.

    ``row``: one object per data row; ``cell``: one per non-empty cell (with its column);
    ``table``: one object, the rows joined by `` [ROW] ``; ``schema``: one object naming
    the columns only (``title [SEP] [H] col1 , [H] col2``), for databases with huge tables.
    """
    if granularity == "row":
        for i, row in enumerate(rows):
            yield "row", i, serialize_row(title, header, row), {"row": i}
    elif granularity == "cell":
        position = 0
        for i, row in enumerate(rows):
            for j, cell in enumerate(_cells(header, row)):
                yield "cell", position, f"{title} {SEP} {cell}", {"row": i, "cell": j}
                position += 1
    elif granularity == "table":
        body = " [ROW] ".join(" , ".join(_cells(header, row)) for row in rows)
        yield "table", 0, f"{title} {SEP} {body}", {"rows": len(rows)}
    elif granularity == "schema":
        yield "schema", 0, f"{title} {SEP} " + " , ".join(f"[H] {h}" for h in header), {"columns": len(header)}
    else:
        raise ValueError(f"unknown table granularity {granularity!r}: use 'row', 'table', 'cell' or 'schema'")
