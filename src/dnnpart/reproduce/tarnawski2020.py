"""Regenerate paper 1's Tables 1-4 and Figure 8 from the workloads in a folder.

Every figure is computed here by a registered method called by name and scored by the
evaluator; the paper's figures (:mod:`dnnpart.reproduce.published`) only sit beside ours.
A method that is not registered, fails or finds no plan leaves a cell that says why, and
the run goes on.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from dnnpart.baselines.graph_partitioner import scotch_program
from dnnpart.errors import UsageError
from dnnpart.io import read_problem
from dnnpart.io.output_files import write_output
from dnnpart.problem import Objective, Problem
from dnnpart.reproduce import published as pub
from dnnpart.reproduce.layers import contract_layers, has_layer_ids
from dnnpart.reproduce.records import DETERMINISTIC, NOT_AVAILABLE, Cell, run_cell
from dnnpart.reproduce.tables import Row, Table, to_csv, to_markdown
from dnnpart.reproduce.workloads import Workload, find_workloads
from dnnpart.scenarios import latency_scenario

logger = logging.getLogger(__name__)

Notify = Callable[[str], None]


@dataclass(frozen=True, slots=True, kw_only=True)
class MethodSpec:
    """A table column: which registered method runs it, with which options."""

    method: str
    options: dict[str, Any] = field(default_factory=dict)
    layer_only: bool = False  # the paper ran it on layer graphs only (expert splits)
    fallback: str | None = None  # method to run when this one refuses the instance as too large
    slow: bool = False  # runs to its time limit on most workloads: left out of --quick


def table1_methods(restarts: int = 10) -> dict[str, MethodSpec]:
    """Table 1's columns (and ours: METIS, one accelerator) mapped to registered methods.

    The IP columns name the methods the integer-program module registers; a name that is
    not registered gives "not available" cells.

    Examples
    --------
    >>> table1_methods()["scotch"].options
    {'tool': 'scotch'}
    """
    return {
        "dp": MethodSpec(method="dp"),
        "ipc": MethodSpec(method="ip", slow=True),
        # CP-SAT, then HiGHS from its plan: CP-SAT alone stalls on op BERT-12 (docs/results/ip.md)
        "ipn": MethodSpec(method="ip-noncontig", options={"backend": "portfolio"}, slow=True),
        "dpl": MethodSpec(method="dpl"),
        "expert": MethodSpec(method="expert", layer_only=True),
        "local-search": MethodSpec(method="local-search", options={"restarts": restarts, "seed": 0}),
        "pipedream": MethodSpec(method="pipedream"),
        "scotch": MethodSpec(method="graph-partitioner", options={"tool": "scotch"}),
        "metis": MethodSpec(method="graph-partitioner", options={"tool": "metis"}),
        "one-accelerator": MethodSpec(method="one-accelerator"),
    }


#: Titles of our extra columns.
EXTRA_COLUMNS = {"metis": "METIS (ours)", "one-accelerator": "One accelerator"}
#: Table 4's columns and ours.
TABLE4_METHODS: dict[str, MethodSpec] = {
    "greedy": MethodSpec(method="greedy"),
    "maxload-dp": MethodSpec(method="dp", fallback="dpl"),
    "scotch": MethodSpec(method="graph-partitioner", options={"tool": "scotch"}),
    "metis": MethodSpec(method="graph-partitioner", options={"tool": "metis"}),
    "expert": MethodSpec(method="expert", layer_only=True),
    "ip": MethodSpec(method="ip", slow=True),
}

#: Time limit per method run: full and quick mode (seconds).
FULL_TIME_LIMIT_S = 1200.0
QUICK_TIME_LIMIT_S = 60.0
QUICK_RESTARTS = 2


@dataclass(slots=True, kw_only=True)
class Report:
    """What :func:`reproduce_tarnawski2020` produced."""

    tables: dict[str, Table]
    files: list[Path]
    wall_time_s: float
    workloads: list[str]


def _row(w: Workload) -> Row:
    return Row(key=w.key, label=w.title, group=w.group)


def _wanted(key: str, spec: MethodSpec, methods: set[str] | None, quick: bool = False) -> bool:
    if methods is None:
        return not (quick and spec.slow)
    return key in methods or spec.method in methods


def _skip_reason(spec: MethodSpec, w: Workload, scotch: bool) -> str | None:
    if spec.layer_only and w.expert_file is None:
        return "no expert split"
    if spec.options.get("tool") == "scotch" and not scotch:
        return f"{NOT_AVAILABLE}: Scotch's gpart is not on PATH"
    return None


def _options(spec: MethodSpec, w: Workload, folder: Path) -> dict[str, Any]:
    options = dict(spec.options)
    if spec.method == "expert":
        assert w.expert_file is not None
        options["split"] = str(folder / w.expert_file)
    return options


def check_methods(methods: list[str] | None) -> None:
    """Refuse ``--methods`` names that are neither a column nor a method of the tables.

    A typo would otherwise give empty tables and exit 0.

    Examples
    --------
    >>> check_methods(["dp", "scotch"])
    >>> check_methods(["bogus"])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    dnnpart.errors.UsageError: --methods: unknown column or method 'bogus'; choose from ...
    """
    if not methods:
        return
    specs = table1_methods()
    known = {*specs, *TABLE4_METHODS}
    known |= {s.method for s in (*specs.values(), *TABLE4_METHODS.values())}
    unknown = sorted(set(methods) - known)
    if unknown:
        raise UsageError(f"--methods: unknown column or method {', '.join(map(repr, unknown))}; "
                         f"choose from {', '.join(sorted(known))}")


def reproduce_tarnawski2020(
    workloads_dir: str | Path, out_dir: str | Path, *, time_limit: float | None = None,
    methods: list[str] | None = None, quick: bool = False, only: list[str] | None = None,
    figure: bool = True, notify: Notify | None = None, deterministic: bool = True,
) -> Report:
    """Run paper 1's experiments on the workloads under ``workloads_dir``; write to ``out_dir``.

    Parameters
    ----------
    time_limit : seconds per method run (default 1200, or 60 with ``quick``).
    methods : column keys (``dp``, ``scotch``, ...) or method names to run; default all.
    quick : a 60 s time limit, 2 local-search restarts and no IP runs (minutes, not hours).
    only : keep the workloads whose key contains one of these substrings.
    figure : draw Figure 8 (needs matplotlib; skipped with a note when missing).
    notify : receives one line per step (the CLI shows them on stderr).
    deterministic : run every method with ``deterministic=True`` (the same tables run to
        run; the portfolio IP then runs CP-SAT only, HiGHS having no deterministic time).

    Writes ``table{1,2,3,4}.{md,csv}``, ``figure8.{png,svg}`` and ``report.md`` (all tables).

    Examples
    --------
    >>> import tempfile
    >>> r = reproduce_tarnawski2020("/nonexistent", tempfile.mkdtemp(), figure=False)
    >>> r.workloads
    []
    """
    token = DETERMINISTIC.set(deterministic)
    try:
        return _reproduce(workloads_dir, out_dir, time_limit=time_limit, methods=methods,
                          quick=quick, only=only, figure=figure, notify=notify)
    finally:
        DETERMINISTIC.reset(token)


def _reproduce(
    workloads_dir: str | Path, out_dir: str | Path, *, time_limit: float | None,
    methods: list[str] | None, quick: bool, only: list[str] | None, figure: bool,
    notify: Notify | None,
) -> Report:
    started = time.perf_counter()
    folder, out = Path(workloads_dir), Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    say = notify or (lambda _line: None)
    limit = time_limit if time_limit is not None else (QUICK_TIME_LIMIT_S if quick else FULL_TIME_LIMIT_S)
    wanted = set(methods) if methods else None
    specs = table1_methods(QUICK_RESTARTS if quick else 10)
    check_methods(methods)
    found = find_workloads(folder, only)
    scotch = scotch_program() is not None

    t1 = Table(name="table1", title="Table 1: time per sample (TPS, lower is better)",
               columns={**pub.TABLE1_COLUMNS, **EXTRA_COLUMNS})
    t3 = Table(name="table3",
               title="Table 3: DP on the operator graph vs on the graph contracted by layer (TPS)",
               columns={"operator": "DP, operator graph", "layer": "DP, contracted by layer"})
    t4 = Table(name="table4", title="Table 4: single-sample latency on the section-7 scenarios",
               columns={**pub.TABLE4_COLUMNS, "metis": "METIS (ours)"})
    t4.marks.update(pub.TABLE4_MARKS)
    problems: dict[str, Problem] = {}

    for i, (w, path) in enumerate(found, 1):
        problem = read_problem(path)
        problems[w.key] = problem
        row = _row(w)
        for key, spec in specs.items():
            published = pub.TABLE1.get(w.key, {}).get(key)
            if not _wanted(key, spec, wanted, quick):
                if quick and spec.slow and wanted is None:
                    t1.add(row, key, Cell(value=None, note="left out of --quick"), published)
                continue
            reason = _skip_reason(spec, w, scotch)
            if reason is not None:
                t1.add(row, key, Cell(value=None, note=reason), published)
                continue
            say(f"[{i}/{len(found)}] {w.group} {w.title}: {key} ...")
            cell = run_cell(problem, spec.method, time_limit=limit, **_options(spec, w, folder))
            say(f"[{i}/{len(found)}] {w.group} {w.title}: {key} = {_brief(cell)}")
            t1.add(row, key, cell, published)
        if w.granularity == "operator" and _wanted("table3", MethodSpec(method="dp"), wanted):
            _table3_row(t3, w, problem, t1.cell(w.key, "dp"), limit, say)
        if w.mode == "inference":
            _table4_row(t4, w, problem, folder, limit, wanted, quick, scotch, say, i, len(found))

    t2 = table2_from_table1(t1)
    _explain(t1, t3)
    t4.notes += [
        "Scenarios from `dnnpart.scenarios.latency_scenario` on the throughput inference graphs "
        "(600 MB or 2 GB accelerators, 1.4x the model size in total, 8 CPUs). The paper ran "
        "Table 4 on separate latency inputs (its layer rows list 354/652/192 nodes, the sizes "
        "of the training graphs), which are not in the shared workloads: operator-graph rows "
        "are comparable, layer-graph rows are not.",
        "Max-load DP: the throughput DP's split on the scenario, scored for latency (DPL's "
        "split where the memory-bound graph has too many ideals). † = memory exceeded.",
    ]
    tables = {"table1": t1, "table2": t2, "table3": t3, "table4": t4}
    files = _write(tables, out)
    if figure:
        files += _figure(t2, out, say)
    wall = time.perf_counter() - started
    files.append(_write_report(tables, out, wall=wall, limit=limit, quick=quick, scotch=scotch))
    say(f"done in {wall:.0f} s; wrote {len(files)} files to {out}")
    return Report(tables=tables, files=files, wall_time_s=wall, workloads=[w.key for w, _ in found])


def _brief(cell: Cell) -> str:
    if cell.value is None:
        return cell.note or cell.status
    time_text = "" if cell.runtime_s is None else f" ({cell.runtime_s:.1f} s)"
    return f"{cell.value:.2f}{time_text}" + (f" [{cell.note}]" if cell.note else "")


def _table3_row(t3: Table, w: Workload, problem: Problem, dp: Cell | None, limit: float | None,
                say: Notify) -> None:
    published = pub.TABLE3.get(w.key, (None, None))
    row = _row(w)
    if dp is None:
        dp = run_cell(problem, "dp", time_limit=limit)
    t3.add(row, "operator", dp, published[0])
    if not has_layer_ids(problem.graph):
        t3.add(row, "layer", Cell(value=None, note="the graph carries no layer ids"), published[1])
        return
    say(f"{w.group} {w.title}: DP on the graph contracted by layer ...")
    cell = run_cell(contract_layers(problem), "dp", time_limit=limit, score_on=problem)
    t3.add(row, "layer", cell, published[1])


def _table4_row(t4: Table, w: Workload, problem: Problem, folder: Path, limit: float | None,
                wanted: set[str] | None, quick: bool, scotch: bool, say: Notify, i: int, n: int) -> None:
    scenario = latency_scenario(problem.graph, name=f"{w.key} latency")
    row = Row(key=w.key, label=f"{w.title} ({scenario.cluster.n_accelerators} acc.)", group=w.group)
    for key, spec in TABLE4_METHODS.items():
        published = pub.TABLE4.get(w.key, {}).get(key)
        if not _wanted(key, spec, wanted, quick):
            if quick and spec.slow and wanted is None:
                t4.add(row, key, Cell(value=None, note="left out of --quick"), published)
            continue
        reason = _skip_reason(spec, w, scotch)
        if reason is not None:
            t4.add(row, key, Cell(value=None, note=reason), published)
            continue
        say(f"[{i}/{n}] latency {w.title}: {key} ...")
        options = _options(spec, w, folder)
        if key == "maxload-dp":  # the throughput-optimal split, scored for latency
            cell = run_cell(scenario.with_objective(Objective()), spec.method, time_limit=limit,
                            score_on=scenario, **options)
            if spec.fallback and "ProblemTooLargeError" in cell.note:
                say(f"[{i}/{n}] latency {w.title}: {key}: too many ideals, {spec.fallback} instead ...")
                cell = run_cell(scenario.with_objective(Objective()), spec.fallback, time_limit=limit,
                                score_on=scenario)
                cell = replace(cell, note="; ".join(
                    x for x in (f"{spec.fallback} split (dp: too many ideals)", cell.note) if x))
        else:
            cell = run_cell(scenario, spec.method, time_limit=limit, **options)
        say(f"[{i}/{n}] latency {w.title}: {key} = {_brief(cell)}")
        t4.add(row, key, cell, published)


def table2_from_table1(t1: Table) -> Table:
    """Throughput relative to the DP (``TPS_DP / TPS_method``), ours and the paper's.

    Examples
    --------
    >>> t1 = Table(name="table1", title="t", columns={"dp": "DP", "x": "X"})
    >>> row = Row(key="w", label="W", group="g")
    >>> t1.add(row, "dp", Cell(value=10.0), 10.0); t1.add(row, "x", Cell(value=20.0), 25.0)
    >>> t2 = table2_from_table1(t1)
    >>> t2.cell("w", "x").value, t2.published[("w", "x")]
    (0.5, 0.4)
    """
    t2 = Table(name="table2", title="Table 2: throughput relative to the DP (higher is better)",
               columns=dict(t1.columns), suffix="x", notes=[
                   "Ours: our DP's TPS / the method's TPS; paper: the same ratio of Table 1's "
                   "published TPS (Table 2 of the paper rounds these)."])
    for row in t1.rows:
        dp = t1.cell(row.key, "dp")
        dp_pub = t1.published.get((row.key, "dp"))
        for column in t1.columns:
            cell = t1.cell(row.key, column)
            if cell is None:
                continue
            pub_value = t1.published.get((row.key, column))
            ratio_pub = dp_pub / pub_value if dp_pub and pub_value else None
            if dp is not None and dp.value and cell.value:
                ratio = Cell(value=dp.value / cell.value, status=cell.status, note=cell.note)
            else:
                why = cell.note if cell.value is None else "no DP figure"
                ratio = Cell(value=None, status=cell.status, note=why)
            t2.add(row, column, ratio, ratio_pub)
    return t2


def _explain(t1: Table, t3: Table) -> None:
    t1.notes += [
        "Each cell: our TPS · the paper's TPS, relative difference. † marks a plan that exceeds "
        "a device's memory (reported, not repaired).",
        "Scotch: Scotch's gpart on the colocation-contracted graph (vertex weight = accelerator "
        "time, edge weight = transfer cost), one part per accelerator, as the paper's code ran it; "
        "METIS (ours) is the same with pymetis. Both are heuristics whose splits depend on the "
        "tool's version and seed; they need not match exactly.",
        "Local search: random start, best single-unit move until a local optimum, 10 restarts "
        "(2 with --quick); ours also moves nodes to CPUs and respects memory, the paper's moved "
        "among accelerators only, so figures differ in both directions.",
        "PipeDream: branching regions contracted (tails of each biconnected component), then the "
        "DP over one linear order. The paper ran it on layer graphs only. For BERT-24 and GNMT "
        "training the published figures equal ours; the authors' released code prints 187.9 and "
        "294.9 there because its list of input nodes to ignore names original ids that, after "
        "contraction of colocation classes, no longer match the backward copies of those inputs "
        "(run pipedream with ignore_inputs=False to get those figures).",
        "IP columns: the integer-program methods `ip` (contiguous, CP-SAT) and `ip-noncontig` "
        "(backend portfolio: CP-SAT for half the time limit, then HiGHS from its best plan), run "
        "to the time limit (left out of --quick); 'not available' when not registered.",
    ]
    t3.notes += [
        "Of the public operator graphs only BERT-12 inference carries layer ids. In it, layer 0 "
        "(embeddings) also holds Add1 (id 216), which consumes Gather1 (id 215) of layer 13, so "
        "the graph of layers has a cycle through all 14 layers; contracting it (the DP must, as "
        "the paper's code does) leaves one node, and the only split is the whole model on one "
        "accelerator: 642.78, which is also what the authors' code prints with -contractLayers. "
        "The published 159.43 must come from an annotation without that edge.",
    ]


def _write(tables: dict[str, Table], out: Path) -> list[Path]:
    files = []
    for name, table in tables.items():
        md, csv_path = out / f"{name}.md", out / f"{name}.csv"
        write_output(to_markdown(table, runtimes=name in ("table1", "table4")), md)
        write_output(to_csv(table), csv_path)
        files += [md, csv_path]
    return files


def _figure(t2: Table, out: Path, say: Notify) -> list[Path]:
    from dnnpart.errors import MissingDependencyError
    from dnnpart.viz.figure8 import Figure8Panel, plot_figure8

    panels = []
    for group in dict.fromkeys(r.group for r in t2.rows):
        rows = [r for r in t2.rows if r.group == group]
        series: dict[str, list[float | None]] = {}
        for column, title in t2.columns.items():
            values = [None if (c := t2.cell(r.key, column)) is None else c.value for r in rows]
            if any(v is not None for v in values):
                series[title] = values
        panels.append(Figure8Panel(title=f"{group} graphs", labels=[r.label for r in rows],
                                   series=series))
    try:
        return plot_figure8(panels, out / "figure8")
    except MissingDependencyError as exc:
        say(f"figure 8 skipped: {exc}")
        return []


def _write_report(tables: dict[str, Table], out: Path, *, wall: float, limit: float | None,
                  quick: bool, scotch: bool) -> Path:
    lines = [
        "# Paper 1 (Tarnawski et al. 2020) reproduced by dnnpart",
        "",
        "Generated by `dnnpart reproduce tarnawski2020`"
        + (" --quick" if quick else "")
        + f"; time limit {limit:g} s per method run; Scotch {'found' if scotch else 'not found'}; "
        f"total wall time {wall:.0f} s.",
        "Figures: time per sample (TPS) or latency, as computed by `dnnpart.evaluate`; the paper's "
        "figures are typed in from its tables.",
        "",
    ]
    for table in tables.values():
        runtimes = table.name in ("table1", "table4")
        lines.append(to_markdown(table, runtimes=runtimes))
    path = out / "report.md"
    write_output("\n".join(lines), path)
    return path
