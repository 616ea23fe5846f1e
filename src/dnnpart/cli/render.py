"""Terminal output: rich tables on stdout, messages and progress on stderr."""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from dnnpart.cli.output import EXIT_INTERRUPTED
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
        self.out = Console(highlight=False, emoji=False)
        if not self.out.is_terminal:
            self.out = Console(highlight=False, width=140, emoji=False)
        self.err = Console(stderr=True, highlight=False, emoji=False)

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
        if result.provenance and result.plan is not None:
            parts.append(f"plan from {escape(result.provenance)}")
        if result.stats.get("stopped"):
            parts.append(f"stopped: {result.stats['stopped']}")
        parts.append(f"{result.wall_time_s:.2f} s")
        return ", ".join(parts)


# -- shared blocks of output ---------------------------------------------------------------
def print_plan(problem: Problem, result: SolveResult, out: Renderer, *, unit: str = "",
               labels: dict[str, str] | None = None) -> None:
    """Diagnostics (see :mod:`dnnpart.evaluate.diagnose`) and the per-device or per-layer table.

    ``unit``: the time unit for the title (``"ms"`` for imported models); ``labels``: readable
    names of nodes (module paths) for the diagnostics.
    """
    from dnnpart.evaluate import evaluate
    from dnnpart.evaluate.diagnose import (
        binding_constraint,
        bottleneck,
        bound_is_one_operator,
        host_offload,
    )

    if result.plan is None:
        why = binding_constraint(problem)
        if why:
            out.note(f"why: {why}")
        return
    notes = [host_offload(problem, result.plan), bottleneck(problem, result.plan, labels=labels),
             bound_is_one_operator(problem, result.bound, labels=labels)]
    for note in notes:
        if note:
            out.note(note)
    ev = evaluate(problem, result.plan)
    title = f"{problem.objective.describe()}{f' ({unit})' if unit else ''}: {fmt(ev.objective)}"
    if result.plan.layer_configs is not None:
        out.print(layer_config_table(problem, result.plan, title=title))
    elif problem.objective.kind == "stages" and ev.simulation:
        out.print(stage_table(problem, result.plan, ev, title=title))
        out.note(stage_summary(problem, ev))
    else:
        out.print(out.device_table(problem, result.plan, ev, title=title))


def stage_table(problem: Problem, plan: Plan, ev: Evaluation, *, title: str) -> Table:
    """A trainer's pipeline, one row per stage: blocks, time and its parts, memory by part."""
    from dnnpart.evaluate.chain import stage_rows

    assert ev.simulation is not None
    table = Table(title=title, title_justify="left")
    for col in ("stage", "device", "blocks", "time", "compute", "transfers",
                "weights+state", "activations", "memory"):
        table.add_column(col, justify="left" if col in ("device", "blocks") else "right")
    for r in stage_rows(problem, plan, ev.simulation):
        blocks = (safe(r["first_block"]) if r["blocks"] == 1 else
                  f"{safe(r['first_block'])} .. {safe(r['last_block'])} ({r['blocks']})")
        cap = r["capacity_bytes"]
        mem = fmt_bytes(r["memory_bytes"]) + ("" if math.isinf(cap) else f" / {fmt_bytes(cap)}")
        stage = f"[bold]{r['stage']}[/]" if r["bottleneck"] else str(r["stage"])
        table.add_row(stage, safe(r["device"]), blocks, fmt(r["time"]), fmt(r["compute"]),
                      fmt(r["transfers"]), fmt_bytes(r["static_bytes"]),
                      f"{fmt_bytes(r['activation_bytes'])} ({r['in_flight']} in flight)", mem)
    return table


def stage_summary(problem: Problem, ev: Evaluation) -> str:
    """One line: the simulated step, the bubble and the bottleneck stage."""
    sim = ev.simulation
    assert sim is not None
    b = int(sim["bottleneck"])
    obj = problem.objective
    return (f"simulated step ({obj.schedule}, {obj.microbatches} micro-batches): "
            f"{fmt(sim['simulated_step_time'])} ms, bubble {sim['bubble_fraction']:.0%}; "
            f"bottleneck: stage {b} on {sim['stages'][b]} "
            f"(compute {fmt(sim['compute'][b])} of {fmt(sim['stage_times'][b])})")


def layer_config_table(problem: Problem, plan: Plan, *, title: str) -> Table:
    """Per-layer parallel configuration of a layer-wise plan (paper 3's Table 5 layout)."""
    from dnnpart.viz.report import layer_rows

    table = Table(title=title, title_justify="left")
    for col in ("layer", "op", "output (N, C, H, W)", "configuration", "devices"):
        table.add_column(col, justify="left")
    for name, *rest in layer_rows(problem, plan):
        table.add_row(escape(name), *rest)
    return table


def comparison_table(rows: Sequence[dict[str, Any]]) -> Table:
    """The comparison of ``plan --compare`` as a rich table (the report shows the same rows)."""
    table = Table(title="Methods compared", title_justify="left")
    for col in ("method", "status", "objective", "bound", "gap", "vs best", "seconds", "note"):
        table.add_column(col, justify="left" if col in ("method", "status", "note") else "right")
    for r in rows:
        table.add_row(r["method"], r["status"], fmt(r["objective"]), fmt(r["bound"]),
                      "-" if r["gap"] is None else f"{r['gap']:.2%}", r["vs_best"],
                      "-" if r["seconds"] is None else f"{r['seconds']:.2f}", safe(str(r["note"])))
    return table


def print_model_summary(s: dict[str, Any], out: Renderer) -> None:
    """An imported model's summary (:func:`dnnpart.workflow.summary.model_summary`)."""
    out.print(
        f"[bold]{s['model']}[/] ({s['frontend']}): {s['operators']:,} operators, "
        f"{s['nodes']:,} nodes, {s['edges']:,} edges, {s['gflops']:.3f} GFLOPs"
        + (f", {s['backward_nodes']:,} backward nodes" if s["backward_nodes"] else "")
    )
    out.print(
        f"total time: CPU {fmt(s['cpu_time_ms'])} ms ({s['cpu_time_source']}), accelerator "
        f"{fmt(s['accelerator_time_ms'])} ms; memory {fmt_bytes(s['memory_bytes'])}"
    )
    out.print(f"pricing: {s['pricing']}")
    if s["unknown_operator_types"]:
        out.print(f"[yellow]priced by bytes only (no cost formula):[/] {s['unknown_operator_types']}")
    else:
        out.print("every operator has a cost formula")
    if s["orphan_backward_nodes"]:
        orphans = s["orphan_backward_nodes"]
        out.print(f"{len(orphans)} backward node(s) with no identified forward op (orphans: the "
                  "loss's gradient and autograd's sums of gradients; they go with what feeds "
                  f"them): {', '.join(orphans[:5])}{' ...' if len(orphans) > 5 else ''}")


def report_stop(out: Renderer, result: SolveResult, out_path: str | None) -> int | None:
    """After an interrupted solve: one ``interrupted`` line (with the incumbent), exit 130;
    ``None`` when the solve was not interrupted.

    The incumbent, if any, was written to ``--out`` marked ``"stopped": "interrupted"``.
    """
    if result.stats.get("stopped") != "interrupted":
        return None
    best = f"; best plan {fmt(result.objective)}" if result.plan is not None else "; no plan yet"
    written = f", written to {out_path}" if result.plan is not None and out_path else ""
    out.err.print(f"interrupted{best}{written}", markup=False, highlight=False, soft_wrap=True)
    return EXIT_INTERRUPTED
