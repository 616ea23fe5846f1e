"""Terminal output: rich tables on stdout, messages and progress on stderr."""

from __future__ import annotations

import math
import sys
from typing import Any

import numpy as np
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from dnnpart.cli.progress import LineProgress, StatusProgress, make_progress
from dnnpart.evaluate import Evaluation
from dnnpart.limits import printable
from dnnpart.plan import Plan, SolveResult
from dnnpart.problem import Problem


def safe(text: str) -> str:
    """Text from a file (names, messages) for rich: control characters and markup escaped."""
    return escape(printable(str(text)))


def fmt(x: float | None) -> str:
    """Readable number: ``inf``/``None`` spelled out, 2 decimals from 1 up, 3 digits below."""
    if x is None:
        return "-"
    if math.isinf(x):
        return "inf"
    if x == 0:
        return "0"
    if abs(x) >= 1e6:
        return f"{x:.4g}"
    if abs(x) >= 1:
        return f"{x:,.2f}"
    return f"{x:.3g}"


def fmt_bytes(x: float) -> str:
    if math.isinf(x):
        return "unbounded"
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(x) < 1000 or unit == "TB":
            return f"{x:.3g} {unit}"
        x /= 1000
    return f"{x:.3g} TB"


class Renderer:
    """Prints for the CLI; in JSON mode only the final object goes to stdout."""

    def __init__(self, *, json_mode: bool = False, quiet: bool = False, progress: str = "auto") -> None:
        self.json_mode = json_mode
        self.quiet = quiet
        self.progress_mode = "none" if quiet else progress
        # Piped output is read by people too: do not squeeze tables into 80 columns.
        self.out = Console(highlight=False)
        if not self.out.is_terminal:
            self.out = Console(highlight=False, width=140)
        self.err = Console(stderr=True, highlight=False)

    def error(self, message: str) -> None:
        # One line, never wrapped, and the message (which quotes the input) is not markup.
        self.err.print(f"[bold red]error:[/] {safe(message)}", highlight=False, soft_wrap=True)

    def note(self, message: str) -> None:
        if not self.quiet:
            self.err.print(printable(message), markup=False, highlight=False, soft_wrap=True)

    def print(self, *items: Any) -> None:
        self.out.print(*items)

    def json(self, text: str) -> None:
        sys.stdout.write(text + "\n")

    def progress(self, label: str = "") -> StatusProgress | LineProgress | None:
        """The progress reporter of ``--progress`` (see :mod:`dnnpart.cli.progress`)."""
        return make_progress(self.progress_mode, self.err, label=label)

    # -- tables ---------------------------------------------------------------------
    def device_table(
        self, problem: Problem, plan: Plan, ev: Evaluation, title: str = "Devices"
    ) -> Table:
        table = Table(title=title, title_justify="left")
        training = problem.graph.is_training
        columns = ["device", "kind", "nodes", "load"] + (["fw", "bw"] if training else [])
        columns += ["compute", "in", "out", "memory", "contiguous"]
        for col in columns:
            table.add_column(col, justify="left" if col in ("device", "kind") else "right")
        cap = problem.cluster.memory_capacity()
        n_nodes = np.bincount(plan.assignment, minlength=problem.cluster.n_devices)
        worst = int(ev.load.argmax())
        for i, dev in enumerate(problem.cluster.devices):
            load = [fmt(ev.load[i]) if n_nodes[i] else "-"]
            if training:
                load += [fmt(ev.forward_load[i]), fmt(ev.backward_load[i])]
            mem = fmt_bytes(ev.memory_bytes[i]) + ("" if math.isinf(cap[i]) else f" / {fmt_bytes(cap[i])}")
            name = f"[bold]{safe(dev.name)}[/]" if i == worst else safe(dev.name)
            table.add_row(
                name, dev.kind, str(n_nodes[i]), *load,
                fmt(float(ev.breakdown.compute[:, i].sum())),
                fmt(float(ev.breakdown.comm_in[:, i].sum())),
                fmt(float(ev.breakdown.comm_out[:, i].sum())),
                mem, "yes" if ev.contiguous[i] else "no",
            )
        return table

    def result_line(self, result: SolveResult) -> str:
        gap = result.gap
        # every bound says what it bounds: optimal (and the bound) only among the method's plans
        space = f" among {escape(result.search_space)}" if result.search_space else ""
        optimal = result.status.value == "optimal"
        bound = ("no bound" if result.bound is None
                 else f"bound {fmt(result.bound)}" + ("" if optimal else space))
        parts = [
            f"[bold]{result.method}[/]: {result.status.value}{space if optimal else ''}",
            f"objective {fmt(result.objective)}",
            bound,
        ]
        if gap is not None:
            parts.append(f"gap {gap:.2%}")
        if result.stats.get("stopped"):
            parts.append(f"stopped: {result.stats['stopped']}")
        parts.append(f"{result.wall_time_s:.2f} s")
        return ", ".join(parts)
