"""Subcommand handlers: parse arguments into API calls, render the results."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
from typing import Any

import numpy as np
from rich.markup import escape
from rich.table import Table

from dnnpart.cli.main import EXIT_NO_PLAN, EXIT_OK, dumps
from dnnpart.cli.render import Renderer, fmt, fmt_bytes, safe
from dnnpart.devices.cluster import Cluster
from dnnpart.errors import FormatError, ProblemTooLargeError
from dnnpart.evaluate import evaluate
from dnnpart.graph import algorithms as alg
from dnnpart.io import plan_to_dict, read_plan
from dnnpart.limits import check_output_path
from dnnpart.plan import Plan, SolveResult, Status
from dnnpart.problem import Objective, Problem
from dnnpart.solvers import available_methods, get_method, solve
from dnnpart.workflow import load_problem


def _problem(args: argparse.Namespace) -> Problem:
    from dnnpart.cli.args import objective_from_args
    from dnnpart.cli.model_cmds import model_options
    from dnnpart.cost import resolve_cluster
    from dnnpart.io.plan_files import plan_cluster

    priced = resolve_cluster(args.cluster) if args.cluster else None
    cluster = priced.cluster if priced else None
    objective = objective_from_args(args)
    if cluster is None and getattr(args, "plan", None):
        cluster = plan_cluster(args.plan)  # a version-2 plan keeps the cluster it was made for
        if cluster is not None:
            cluster = legacy_specs(cluster, _plan_json(args.plan), objective)
    return load_problem(args.graph, cluster=cluster, objective=objective, model=model_options(args))


def _plan_json(path: str) -> Any:
    from dnnpart.io import fields as f

    try:
        return f.read_json(path)
    except FormatError:
        return None


def legacy_specs(cluster: Cluster, data: Any, objective: Objective) -> Cluster:
    """A plan's stored cluster with the device specs plans written before devices carried them
    imply: their ``objective_spec.device`` preset (the roofline of the iteration objective), or,
    for the iteration objective without it, ``P100`` (the default those plans were scored by)."""
    from dnnpart.cost import CostModel
    from dnnpart.cost.clusters import with_specs

    if all(d.spec is not None for d in cluster.devices):
        return cluster
    spec = data.get("objective_spec") if isinstance(data, dict) else None
    device = spec.get("device") if isinstance(spec, dict) else None
    if isinstance(device, str):
        return with_specs(cluster, CostModel.from_presets(device))
    if objective.kind == "iteration":
        return with_specs(cluster, CostModel.from_presets("P100"))
    return cluster


# -- info -------------------------------------------------------------------------------
def graph_summary(problem: Problem, *, ideal_limit: int) -> dict[str, Any]:
    """Structural figures of a problem's graph (what `dnnpart info` shows)."""
    g, c = problem.graph, problem.cluster
    counted = True
    try:
        n_ideals: int | None = alg.count_ideals(g, limit=ideal_limit)
    except ProblemTooLargeError as exc:
        n_ideals, counted = None, "not counted" not in str(exc)
    dp_ideals = _dp_ideals(problem, ideal_limit)
    width, exact = alg.width(g)
    classes = g.color_class[g.color_class >= 0]
    multi = int(np.count_nonzero(np.bincount(classes) > 1)) if classes.size else 0
    acc = g.time_on("accelerator")
    return {
        "name": problem.name,
        "nodes": g.n_nodes,
        "edges": g.n_edges,
        "backward_nodes": int(g.is_backward.sum()),
        "colocation_classes_with_several_nodes": multi,
        "unsupported_on_accelerator": int(np.count_nonzero(~np.isfinite(acc))),
        "total_cpu_time": float(g.time_on("cpu").sum()),
        "total_accelerator_time": float(acc[np.isfinite(acc)].sum()),
        "total_memory_bytes": float(g.memory_bytes.sum()),
        "critical_path_accelerator": alg.critical_path(g) if np.isfinite(acc).all() else None,
        "depth_levels": int(alg.topological_levels(g).max()) + 1,
        "width": width,
        "width_exact": exact,
        "ideals": n_ideals,
        "dp_ideals": dp_ideals,
        "ideal_limit": ideal_limit,
        "ideals_counted": counted,
        "ccr": alg.communication_to_computation_ratio(g),
        "degree_of_parallelism": alg.degree_of_parallelism(g) if np.isfinite(acc).all() else None,
        "cluster": {
            "name": c.name,
            "devices": [
                {"name": d.name, "kind": d.kind, "memory_bytes": d.memory_bytes, "speed": d.speed}
                for d in c.devices
            ],
        },
    }


def _dp_ideals(problem: Problem, limit: int) -> int | None:
    """Ideals the exact DP enumerates: those of the graph after its contraction (appendix B)."""
    from dnnpart.graph.stage_graph import build_stage_graph
    from dnnpart.solvers.dp import enumerate_stage_ideals

    stage = build_stage_graph(problem.graph,
                              memory_limit=float(problem.cluster.memory_capacity().min()))
    try:
        return enumerate_stage_ideals(stage, max_ideals=limit).n_ideals
    except ProblemTooLargeError:
        return None


def cmd_info(args: argparse.Namespace, out: Renderer) -> int:
    problem = _problem(args)
    s = graph_summary(problem, ideal_limit=args.ideal_limit)
    if out.json_mode:
        out.json(dumps(s))
        return EXIT_OK
    table = Table(title=f"Graph {safe(str(s['name']))}", title_justify="left", show_header=False)
    table.add_column("what")
    table.add_column("value", justify="right")
    def count(n: int | None) -> str:
        return f"{n:,}" if n is not None else f"> {s['ideal_limit']:,}"

    rows = [
        ("nodes / edges", f"{s['nodes']:,} / {s['edges']:,}"),
        ("backward nodes", f"{s['backward_nodes']:,}"),
        ("colocation classes (>1 node)", f"{s['colocation_classes_with_several_nodes']:,}"),
        ("unsupported on accelerators", f"{s['unsupported_on_accelerator']:,}"),
        ("total time on CPU / accelerator",
         f"{fmt(s['total_cpu_time'])} / {fmt(s['total_accelerator_time'])}"),
        ("total memory", fmt_bytes(s["total_memory_bytes"])),
        ("critical path (accelerator)", fmt(s["critical_path_accelerator"])),
        ("depth (levels)", f"{s['depth_levels']:,}"),
        ("width (max antichain)", f"{s['width']:,}" + ("" if s["width_exact"] else " (lower bound)")),
        ("ideals", count(s["ideals"]) if s["ideals_counted"] else "not counted (too large)"),
        ("ideals searched by the DP (contracted)", count(s["dp_ideals"])),
        ("CCR (comm / compute)", fmt(s["ccr"])),
        ("avg. degree of parallelism", fmt(s["degree_of_parallelism"])),
    ]
    for row in rows:
        table.add_row(*row)
    out.print(table)
    devs = s["cluster"]["devices"]
    kinds: dict[str, int] = {}
    for d in devs:
        kinds[d["kind"]] = kinds.get(d["kind"], 0) + 1
    mem = {fmt_bytes(d["memory_bytes"]) for d in devs if d["kind"] == "accelerator"}
    out.print(
        "cluster: " + ", ".join(f"{n} {k}{'s' if n > 1 else ''}" for k, n in kinds.items())
        + (f" (accelerator memory {', '.join(sorted(mem))})" if mem else "")
    )
    return EXIT_OK


# -- evaluate ---------------------------------------------------------------------------
def cmd_evaluate(args: argparse.Namespace, out: Renderer) -> int:
    problem = _problem(args)
    plan = read_plan(args.plan, problem, fill_by_colocation=args.fill_by_colocation)
    mismatch = graph_mismatch(args.plan, args.graph)  # a warning: inference split on training graph...
    if mismatch:
        out.note(mismatch)
    ev = evaluate(problem, plan)
    if out.json_mode:
        out.json(dumps(ev.to_dict(problem)))
    else:
        out.print(f"{problem.objective.describe()}: [bold]{fmt(ev.objective)}[/]"
                  + ("" if ev.feasible else "  [red](plan violates constraints)[/]"))
        if plan.layer_configs is not None:
            out.print(layer_config_table(problem, plan, title="Layer configurations"))
        else:
            out.print(out.device_table(problem, plan, ev))
        if ev.simulation is not None and "bytes_per_step" in ev.simulation:
            sim = ev.simulation
            out.print(f"{fmt_bytes(sim['bytes_per_step'])} moved per step, "
                      f"{sim['throughput_samples_per_s']:.1f} samples/s at global batch "
                      f"{sim['global_batch']}")
        if ev.simulation is not None and "max_stage_time_eq5" in ev.simulation:
            sim = ev.simulation
            out.print(f"step time {fmt(sim['step_time'])}, bubble {sim['bubble_fraction']:.1%}, "
                      f"max stage time (paper 4 Eq. 5) {fmt(sim['max_stage_time_eq5'])}")
        for v in ev.violations:
            out.print(f"[red]violation:[/] {safe(v)}")
    return EXIT_OK if ev.feasible else EXIT_NO_PLAN


# -- solve ------------------------------------------------------------------------------
def parse_options(pairs: list[str], method: str | None = None) -> dict[str, Any]:
    """``KEY=VALUE`` strings to keyword arguments, typed by ``method``'s option schema.

    Without a method (or for keys the schema lacks, which :func:`solve` then refuses) the
    text is kept as given.
    """
    info = get_method(method) if method is not None else None
    options: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise FormatError(f"--set {pair!r}: expected KEY=VALUE")
        if info is None:
            options[key.replace("-", "_")] = raw
            continue
        opt = info.option(key)  # the error names the key as typed
        options[opt.name] = opt.parse(raw, info.name)
    return options


def solve_options(args: argparse.Namespace) -> dict[str, Any]:
    """The method options of ``dnnpart solve``: ``--set`` pairs plus the dedicated flags."""
    options = parse_options(args.options, args.method)
    for flag in ("backend", "gap", "threads", "seed", "subgraphs_per_device", "descent"):
        value = getattr(args, flag, None)
        if value is not None:  # dedicated flags are method options like --set KEY=VALUE
            options[flag] = value
    return options


def write_solved_plan(problem: Problem, result: SolveResult, out_path: str, graph: str) -> None:
    """Write a plan file; a graph given as a file is named by absolute path and SHA-256."""
    from dnnpart.io.dnn_partitioning import write_json_atomic
    from dnnpart.io.file_refs import file_ref, is_file_spec

    data = plan_to_dict(problem, result.require_plan(), result)
    # found (and checked) again by evaluate, export placement-text and report
    data["graph"] = file_ref(graph) if is_file_spec(graph) else {"spec": graph}
    # the objective's settings beside the plan's objective value (which keeps its key)
    data["objective_spec"] = dataclasses.asdict(problem.objective)
    write_json_atomic(data, out_path)


def solved_problem(path: str, data: dict[str, Any]) -> tuple[Problem, Plan]:
    """The problem and plan of a ``solve -o`` plan file, from the graph and objective it names."""
    from dnnpart.io.file_refs import resolve_ref
    from dnnpart.io.plan_files import parse_plan, plan_cluster
    from dnnpart.problem import Objective

    ref = data.get("graph")
    graph = ref["spec"] if isinstance(ref, dict) and isinstance(ref.get("spec"), str) \
        else str(resolve_ref(ref, "graph", path))
    fields = data.get("objective_spec")
    try:
        objective = Objective(**{k: v for k, v in fields.items()
                                 if k in {f.name for f in dataclasses.fields(Objective)}}) \
            if isinstance(fields, dict) else None
    except (TypeError, ValueError) as exc:
        raise FormatError(f"{path}: objective_spec: {exc}") from None
    cluster = plan_cluster(path)
    if cluster is not None:
        cluster = legacy_specs(cluster, data, objective or Objective())
    problem = load_problem(graph, cluster=cluster, objective=objective)
    return problem, parse_plan(data, problem, path)


def graph_mismatch(plan_path: str, graph: str) -> str | None:
    """A warning when a plan names another graph file (by hash) than the one given."""
    from dnnpart.io import fields as f
    from dnnpart.io.file_refs import is_file_spec, sha256_of

    ref = f.require_mapping(f.read_json(plan_path), plan_path).get("graph")
    if not isinstance(ref, dict) or not isinstance(ref.get("sha256"), str) or not is_file_spec(graph):
        return None
    have = sha256_of(graph)
    if have == ref["sha256"]:
        return None
    return (f"warning: {plan_path} was made for {ref.get('path')} (sha256 {ref['sha256'][:12]}...), "
            f"{graph} differs (sha256 {have[:12]}...)")


def report_stop(out: Renderer, result: SolveResult, out_path: str | None) -> int | None:
    """After an interrupted solve: one ``interrupted`` line (with the incumbent), exit 130.

    The incumbent, if any, was written to ``--out`` marked ``"stopped": "interrupted"``.
    """
    if result.stats.get("stopped") != "interrupted":
        return None
    from dnnpart.cli.main import EXIT_INTERRUPTED

    best = f"; best plan {fmt(result.objective)}" if result.plan is not None else "; no plan yet"
    written = f", written to {out_path}" if result.plan is not None and out_path else ""
    out.err.print(f"interrupted{best}{written}", markup=False, highlight=False, soft_wrap=True)
    return EXIT_INTERRUPTED


def cmd_solve(args: argparse.Namespace, out: Renderer) -> int:
    get_method(args.method)  # fail fast on an unknown name, before any work
    options = solve_options(args)
    if args.out is not None:
        check_output_path(args.out)
    problem = _problem(args)
    progress = out.progress(args.method)
    with progress if progress is not None else contextlib.nullcontext():
        result = solve(problem, args.method, time_limit=args.time_limit, progress=progress,
                       deterministic=args.deterministic, **options)
    if result.plan is not None and args.out:
        write_solved_plan(problem, result, args.out, args.graph)
    stopped = report_stop(out, result, args.out)
    if stopped is not None:
        return stopped
    if out.json_mode:
        payload = result.to_dict()
        if result.plan is not None:
            payload["evaluation"] = evaluate(problem, result.plan).to_dict(problem)
            payload["plan"] = plan_to_dict(problem, result.plan, result)
        out.json(dumps(payload))
    else:
        out.print(out.result_line(result))
        st = result.stats
        if "eq5_max_stage_time" in st:  # paper 4: the pipeline and its mapping beside the sim
            gap = st.get("mapping_gap")
            out.print(f"S={st['stages']} stages x R={st['replicas']} replicas; mapping "
                      f"{st.get('mapping_pick')} ({st.get('picked_mapping_status')}, "
                      f"{st.get('picked_instantiation')}); Eq. 5 max stage time "
                      f"{fmt(st.get('picked_eq5_max_stage_time'))} s; mapper "
                      f"({st.get('instantiation')}) {st.get('mapping_status')}"
                      + ("" if gap is None else f", gap {gap:.2%}"))
        print_plan(problem, result, out)
        if "violations" in result.stats:
            out.print(f"[red]violations:[/] {safe(str(result.stats['violations']))}")
        if "heuristic1_success" in result.stats:  # PARDNN's memory heuristic I (paper 2, §3.2.1)
            if result.stats["heuristic1_success"]:
                out.print(f"memory heuristic I: every device fits, {result.stats['heuristic1_moved']} "
                          f"nodes moved in {result.stats['heuristic1_rounds']} rounds")
            else:
                out.print("[red]memory heuristic I failed:[/] "
                          f"{safe(str(result.stats.get('heuristic1_failure', '')))}")
        if "final_nodes" in result.stats:
            st = result.stats
            out.print(f"Algorithm 1: K = {st['final_nodes']} nodes after {st['node_eliminations']} node and "
                      f"{st['edge_eliminations']} edge eliminations ({st['completion']}); "
                      f"tables {st['table_time_s']:.2f} s, search {st['search_time_s']:.3f} s")
        if args.out and result.plan is not None:
            out.note(f"plan written to {args.out}")
    return EXIT_OK if result.plan is not None and result.status is not Status.UNKNOWN else EXIT_NO_PLAN


def print_plan(problem: Problem, result: SolveResult, out: Renderer, *, unit: str = "",
               labels: dict[str, str] | None = None) -> None:
    """Diagnostics (see :mod:`dnnpart.evaluate.diagnose`) and the per-device or per-layer table.

    ``unit``: the time unit for the title (``"ms"`` for imported models); ``labels``: readable
    names of nodes (module paths) for the diagnostics.
    """
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
    else:
        out.print(out.device_table(problem, result.plan, ev, title=title))


def layer_config_table(problem: Problem, plan: Plan, *, title: str) -> Table:
    """Per-layer parallel configuration of a layer-wise plan (paper 3's Table 5 layout)."""
    from dnnpart.viz.report import layer_rows

    table = Table(title=title, title_justify="left")
    for col in ("layer", "op", "output (N, C, H, W)", "configuration", "devices"):
        table.add_column(col, justify="left")
    for name, *rest in layer_rows(problem, plan):
        table.add_row(escape(name), *rest)
    return table


# -- methods ----------------------------------------------------------------------------
def cmd_methods(args: argparse.Namespace, out: Renderer) -> int:
    methods = available_methods()
    if out.json_mode:
        out.json(dumps([
            {"name": m.name, "summary": m.summary, "guarantee": m.guarantee,
             "objectives": list(m.objectives), "exact": m.exact, "source": m.source,
             "default_time_limit_s": m.default_time_limit,
             "options": [{"name": o.name, "type": o.describe_type(),
                          "default": o.default if isinstance(o.default, (int, float, str, bool))
                          or o.default is None else str(o.default), "doc": o.doc}
                         for o in m.options]}
            for m in methods
        ]))
        return EXIT_OK
    table = Table(title="Methods", title_justify="left")
    for col in ("method", "objectives", "guarantee", "what it does", "options (--set KEY=VALUE)"):
        table.add_column(col)
    for m in methods:
        opts = "\n".join(f"{o.name}: {o.describe_type()} = {o.default!r}" for o in m.options)
        limit = m.default_time_limit
        summary = m.summary + (f" (default --time-limit {limit:g} s)" if limit is not None else "")
        table.add_row(m.name, ", ".join(m.objectives), m.guarantee, summary, escape(opts) or "-")
    out.print(table)
    return EXIT_OK


# -- demo -------------------------------------------------------------------------------
DEMO_METHODS = ("dp", "dpl", "one-accelerator")


def cmd_demo(args: argparse.Namespace, out: Renderer) -> int:
    from dnnpart.zoo import list_examples

    if args.list:
        listing = Table(title="Built-in examples", title_justify="left")
        listing.add_column("example", no_wrap=True)
        listing.add_column("what it is")
        for spec, description in list_examples():
            listing.add_row(spec, description)
        out.print(listing)
        return EXIT_OK
    problem = load_problem(args.example)
    g, c = problem.graph, problem.cluster
    out.print(f"[bold]{escape(args.example)}[/]: {g.n_nodes:,} operators, {g.n_edges:,} edges"
              f"{' (training graph)' if g.is_training else ''}; cluster {escape(c.name)}")
    out.print(f"objective: {problem.objective.describe()}; built-in examples are timed in ms")
    registered = {m.name for m in available_methods()}
    results: list[SolveResult] = []
    for name in DEMO_METHODS:
        if name not in registered:
            continue
        results.append(solve(problem, name))
    table = Table(title="Methods compared", title_justify="left")
    for col in ("method", "status", "time per sample", "bound", "vs best", "seconds"):
        table.add_column(col, justify="left" if col in ("method", "status") else "right")
    from dnnpart.viz.report import comparison_rows  # the words of plan --compare

    rows = comparison_rows([(r.method, r) for r in results])
    for r, row in zip(results, rows, strict=True):
        table.add_row(r.method, r.status.value, fmt(r.objective), fmt(r.bound), row["vs_best"],
                      f"{r.wall_time_s:.2f}")
    out.print(table)
    winner = min((r for r in results if r.plan is not None), key=lambda r: r.objective, default=None)
    if winner is None:
        return EXIT_NO_PLAN
    plan: Plan = winner.require_plan()
    ev = evaluate(problem, plan)
    out.print(out.device_table(problem, plan, ev, title=f"Best plan ({winner.method})"))
    out.print("Try: dnnpart solve zoo:bert-3 --method dp --out plan.json; "
              "dnnpart evaluate zoo:bert-3 plan.json; dnnpart methods")
    return EXIT_OK
