"""Comparison tables: our figure next to the published one, as Markdown and CSV."""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Callable
from dataclasses import dataclass, field

from dnnpart.reproduce.records import Cell


@dataclass(frozen=True, slots=True, kw_only=True)
class Row:
    """A table row: a workload (``key``), its label and its group heading."""

    key: str
    label: str
    group: str


@dataclass(slots=True, kw_only=True)
class Table:
    """Measured cells and published figures, by (row key, column key).

    ``digits`` is the number of decimals shown; ``suffix`` follows every value (``"x"``).
    """

    name: str
    title: str
    columns: dict[str, str]
    rows: list[Row] = field(default_factory=list)
    cells: dict[tuple[str, str], Cell] = field(default_factory=dict)
    published: dict[tuple[str, str], float | None] = field(default_factory=dict)
    marks: dict[tuple[str, str], str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    digits: int = 2
    suffix: str = ""

    def add(self, row: Row, column: str, cell: Cell, published: float | None = None) -> None:
        if row not in self.rows:
            self.rows.append(row)
        self.cells[(row.key, column)] = cell
        if published is not None:
            self.published[(row.key, column)] = published

    def cell(self, row: str, column: str) -> Cell | None:
        return self.cells.get((row, column))


def relative_difference(ours: float | None, published: float | None) -> float | None:
    """``(ours - published) / published``; ``None`` when either is missing.

    Examples
    --------
    >>> relative_difference(101.0, 100.0)
    0.01
    """
    if ours is None or published is None or published == 0 or not math.isfinite(ours):
        return None
    return (ours - published) / published


def _number(x: float | None, digits: int, suffix: str = "") -> str:
    return "-" if x is None else f"{x:.{digits}f}{suffix}"


def _cell_text(table: Table, row: str, column: str) -> str:
    cell = table.cells.get((row, column))
    pub = table.published.get((row, column))
    mark = table.marks.get((row, column), "")
    if cell is None and pub is None:
        return ""
    pub_text = ("" if pub is None else _number(pub, table.digits, table.suffix)) + mark
    if cell is None or cell.value is None:
        why = "n/a" if cell is None else (cell.note or cell.status)
        ours = f"— ({why})"
        return ours + (f" · paper {pub_text}" if pub_text else "")
    ours = _number(cell.value, table.digits, table.suffix)
    if cell.note.startswith("infeasible"):
        ours += "†"
    if not pub_text:
        return ours
    diff = relative_difference(cell.value, pub)
    diff_text = "" if diff is None else f", {diff:+.1%}"
    return f"{ours} · paper {pub_text}{diff_text}"


def to_markdown(table: Table, *, runtimes: bool = False) -> str:
    """The table as GitHub Markdown; ``runtimes`` adds a second table of wall times.

    Examples
    --------
    >>> t = Table(name="t", title="Demo", columns={"dp": "DP"})
    >>> t.add(Row(key="w", label="W", group="g"), "dp", Cell(value=10.1), published=10.0)
    >>> print(to_markdown(t).splitlines()[-1])
    | W | 10.10 · paper 10.00, +1.0% |
    """
    lines = [f"### {table.title}", ""]
    lines += _grid(table, lambda r, c: _cell_text(table, r, c))
    if runtimes:
        lines += ["", f"Wall time of each method (s), {table.title.split(':')[0]}:", ""]
        lines += _grid(table, lambda r, c: _runtime_text(table.cells.get((r, c))))
    if table.notes:
        lines.append("")
        lines += [f"* {note}" for note in table.notes]
    return "\n".join(lines) + "\n"


def _runtime_text(cell: Cell | None) -> str:
    if cell is None or cell.runtime_s is None:
        return ""
    return f"{cell.runtime_s:.2f}" if cell.runtime_s < 10 else f"{cell.runtime_s:.0f}"


def _grid(table: Table, text: Callable[[str, str], str]) -> list[str]:
    header = "| workload | " + " | ".join(table.columns.values()) + " |"
    lines = [header, "|" + "---|" * (len(table.columns) + 1)]
    group = None
    for row in table.rows:
        if row.group != group:
            group = row.group
            lines.append(f"| **{group}** |" + " |" * len(table.columns))
        texts = [text(row.key, c) for c in table.columns]
        lines.append(f"| {row.label} | " + " | ".join(texts) + " |")
    return lines


CSV_FIELDS = ("table", "group", "workload", "label", "column", "ours", "published", "published_mark",
              "relative_difference", "runtime_s", "status", "note")


def to_csv(table: Table) -> str:
    """The table in long form, one line per (workload, column).

    Examples
    --------
    >>> t = Table(name="t", title="Demo", columns={"dp": "DP"})
    >>> t.add(Row(key="w", label="W", group="g"), "dp", Cell(value=10.0), published=10.0)
    >>> to_csv(t).splitlines()[1]
    't,g,w,W,dp,10.0,10.0,,0.0,,skipped,'
    """
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_FIELDS)
    for row in table.rows:
        for column in table.columns:
            cell = table.cells.get((row.key, column))
            pub = table.published.get((row.key, column))
            if cell is None and pub is None:
                continue
            value = None if cell is None else cell.value
            diff = relative_difference(value, pub)
            writer.writerow([
                table.name, row.group, row.key, row.label, column,
                "" if value is None else repr(float(value)),
                "" if pub is None else repr(float(pub)),
                table.marks.get((row.key, column), ""),
                "" if diff is None else repr(round(diff, 6)),
                "" if cell is None or cell.runtime_s is None else f"{cell.runtime_s:.4f}",
                "" if cell is None else cell.status,
                "" if cell is None else cell.note,
            ])
    return out.getvalue()
