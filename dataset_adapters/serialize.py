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


def serialize_row_arm(name: str, header: Sequence[str], row: Sequence[str]) -> str | None:
    """A row as the ARM reproduction's ``scripts/target/serialize_tables.py`` (apostolhskouk/ARM at
    5a6cb92) writes it: ``name [SEP] [H] col1: val1 , [H] col2: val2 ...`` over every cell, empty
    ones included (``f"[H] {str(h)}: {str(v)}"`` joined by ``" , "``, lines 115-117); with no name,
    the cells alone, without ``[SEP]`` (lines 120-123); None for a row whose cell count differs from
    the header's, which that script skips (line 109)."""
    if len(row) != len(header):
        return None
    cells = " , ".join(f"[H] {h}: {v}" for h, v in zip(header, row))
    return f"{name} {SEP} {cells}" if name else cells


def arm_row_objects(name: str, header: Sequence[str],
                    rows: Sequence[Sequence[str]]) -> Iterator[tuple[str, int, str, dict]]:
    """``(modality, position, text, metadata)`` of each row :func:`serialize_row_arm` keeps; the
    metadata's ``row`` is the row's place in the table, skipped rows included."""
    position = 0
    for i, row in enumerate(rows):
        text = serialize_row_arm(name, header, row)
        if text is not None:
            yield "row", position, text, {"row": i}
            position += 1


def serialize_schema_arm(database_id: str, table_id: str, first_row: str) -> str:
    """A table's metadata object as the ARM reproduction's ``scripts/run_extract_schemas.py``
    (lines 21-25) writes it from the table's first serialized row: ``database [SEP] table [SEP] [H] col1 [H]
    col2``, each column the text between ``[H]`` and the first ``:`` of that row (so a column
    name holding ``:`` is cut there, as in that script)."""
    columns = [part.split(":")[0].strip() for part in first_row.split("[H]")[1:]]
    return f"{database_id} {SEP} {table_id} {SEP} [H] " + " [H] ".join(columns)


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
