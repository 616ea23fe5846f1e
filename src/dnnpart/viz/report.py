"""One self-contained HTML report of a plan: summary, stages in the model's language, figures.

No network resources: figures are matplotlib PNGs embedded as ``data:`` URIs, styles inline.
Content (choices, also in docs/report.md):

* the ``stages`` objective (a trainer's pipeline) leads with what a trainer decides on: the
  simulated step time, micro-batches (samples, tokens) per second, the bubble, per-stage time
  and peak memory by part (activations of the micro-batches in flight shown) against
  capacity, the bottleneck stage and why, and a uniform block split beside it (labelled: the
  block DP searches it too, so it is never better by construction);
* summary: model, method, status, objective with what it means, bound (and what it bounds:
  the method's search space), devices used;
* stages in pipeline order: device, operators, module-path range (first and last operator's
  module), parameter bytes, predicted forward/backward time, and the memory split (weights,
  gradients, optimizer state, activations) from the pipeline simulator for the plan's
  schedule and micro-batch count (defaults 1F1B, 4);
* content fitting the objective: throughput, latency and pipeline get a pipeline Gantt
  (stages x time, F/B blocks per micro-batch) and memory over time per device, from
  :func:`dnnpart.simulate.pipeline.simulate_pipeline` (plans that are not pipelines are
  simulated as a chain of the devices' loads, said so); makespan gets the op-level timeline
  and memory of :func:`dnnpart.simulate.emulate_ops` (paper 2); iteration gets the per-layer
  configuration table (paper 3's Table 5 layout) instead of stages;
* diagnostics (:mod:`dnnpart.evaluate.diagnose`): host offload, a one-operator bottleneck, a
  bound equal to one operator's time;
* the placement drawn on the graph, coloured by device (:mod:`dnnpart.viz.placement`;
  contracted to modules on big graphs);
* with ``plan --compare``: a table of the methods run (status, objective, bound, gap, how far
  from the best, seconds);
* with ``report --run RUN.json`` (a ``run --json`` output): the run's measured step, stage
  times and peak memory beside their prediction, with the spread over the timed steps and the
  relative error (:mod:`dnnpart.workflow.measured`).
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dnnpart.evaluate import evaluate
from dnnpart.frontends.build import ImportedModel
from dnnpart.plan import Plan, SolveResult
from dnnpart.problem import Problem
from dnnpart.viz.page import gantt_png, html_page, html_table, png
from dnnpart.viz.stages import plan_stages


@dataclass(slots=True, kw_only=True)
class ReportInput:
    """What a report shows: the planned problem, its plan and where it came from."""

    problem: Problem
    plan: Plan
    imported: ImportedModel | None = None
    meta: dict[str, Any] = field(default_factory=dict)  # plan file fields: method, status, bound...
    schedule: str = "1f1b"
    microbatches: int = 4
    comparison: list[dict[str, Any]] = field(default_factory=list)  # rows of comparison_rows()
    measured: dict[str, Any] | None = None  # a run's rows and notes (workflow.measured)


def _fmt_bytes(x: float) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if x >= scale:
            return f"{x / scale:.3g} {unit}"
    return f"{x:.0f} B"


def comparison_rows(results: Sequence[tuple[str, SolveResult | str]]) -> list[dict[str, Any]]:
    """One row per method run by ``plan --compare``: a result, or the reason it gave none.

    ``vs_best`` is how much longer than the best objective among the rows (``best`` for it).

    Examples
    --------
    >>> from dnnpart.plan import Status
    >>> a = SolveResult(method="dp", status=Status.OPTIMAL, plan=Plan(assignment=[0]), objective=2.0,
    ...                 bound=2.0, wall_time_s=0.1)
    >>> b = SolveResult(method="greedy", status=Status.FEASIBLE, plan=Plan(assignment=[0]),
    ...                 objective=3.0, wall_time_s=0.0)
    >>> [r["vs_best"] for r in comparison_rows([("dp", a), ("greedy", b), ("ip", "refused")])]
    ['best', '+50%', '-']
    """
    finite = [r.objective for _, r in results if isinstance(r, SolveResult) and r.plan is not None
              and math.isfinite(r.objective)]
    best = min(finite, default=math.inf)
    rows: list[dict[str, Any]] = []
    for name, r in results:
        if not isinstance(r, SolveResult):
            rows.append({"method": name, "status": "no plan", "objective": None, "bound": None,
                         "gap": None, "vs_best": "-", "seconds": None, "note": r})
            continue
        has = r.plan is not None and math.isfinite(r.objective)
        vs = "-" if not has or not math.isfinite(best) else (
            "best" if r.objective <= best * (1 + 1e-12) else f"+{100 * (r.objective / best - 1):.0f}%")
        rows.append({"method": name, "status": r.status.value, "objective": r.objective if has else None,
                     "bound": r.bound, "gap": r.gap, "vs_best": vs, "seconds": r.wall_time_s,
                     "note": r.search_space or ""})
    return rows


def layer_rows(problem: Problem, plan: Plan) -> list[tuple[str, str, str, str, str]]:
    """``(layer, op, output N x C x H x W, configuration, devices)`` of a layer-wise plan."""
    from dnnpart.evaluate.iteration import iteration_configs, iteration_setting
    from dnnpart.layerwise.configs import format_config

    layers = iteration_setting(problem)[0].layers
    configs = iteration_configs(problem, plan)
    return [(layer.name, layer.op, "x".join(str(v) for v in layer.out_shape),
             format_config(layer, cfg.degrees), ",".join(str(d) for d in cfg.devices))
            for layer, cfg in zip(layers, configs, strict=True)]


def _num(x: float | None, unit: str = "") -> str:
    if x is None or not math.isfinite(x):
        return "-"
    return f"{x:.4g}{unit}"


def _timeline_figures(plt: Any, tl: Any, *, title: str, gantt: str) -> list[str]:
    """A Gantt of a simulator's :class:`~dnnpart.simulate.Timeline` and its memory curves."""
    # pipeline: forward blue, backward orange; ops: compute blue; transfers and the rest grey
    image = gantt_png(plt, tl, title=title, phases=gantt == "pipeline")
    parts = [f'<h2>{"Pipeline" if gantt == "pipeline" else "Timeline"}</h2>'
             f'<img alt="{html.escape(gantt)} Gantt" src="{image}">']
    if tl.memory:
        fig, ax = plt.subplots(figsize=(9, 3))
        for dev, curve in tl.memory.items():
            ax.step(curve.times, np.asarray(curve.after) / 1e6, where="post", label=dev)
        ax.set_xlabel("ms")
        ax.set_ylabel("MB")
        ax.legend(fontsize="small")
        ax.set_title("memory over the step")
        parts.append(f'<h2>Memory</h2><img alt="memory over time" src="{png(fig)}">')
        plt.close(fig)
    return parts


def _pipeline(rep: ReportInput, ev: Any, names: list[str]) -> tuple[Any, str, list[tuple[str, str]]]:
    """``(simulation or None, why not, summary rows)`` of the plan run as a pipeline."""
    from dnnpart.simulate.pipeline import simulate_pipeline
    from dnnpart.simulate.stages import stages_from_plan
    from dnnpart.stages import Stage

    problem, plan = rep.problem, rep.plan
    source = "the plan's stages"
    try:
        try:
            stages, edges = stages_from_plan(problem, plan)
        except ValueError as exc:
            # a chain of the devices' loads, in first-use order: what a linear pipeline of this
            # plan runs (the run reorders stragglers; see dnnpart.export.training_run)
            source = f"a chain of the devices' loads ({exc})"
            used = list(dict.fromkeys(int(d) for d in plan.assignment))
            weights = np.zeros(len(problem.cluster.devices))
            if problem.graph.param_bytes is not None:
                np.add.at(weights, plan.assignment, problem.graph.param_bytes)
            stages = [Stage(devices=(d,), forward=float(ev.forward_load[d]),
                            backward=float(ev.backward_load[d]), weight_bytes=float(weights[d]),
                            name=names[d]) for d in used]
            edges = None
        sim = simulate_pipeline(stages, problem.cluster, edges=edges, microbatches=rep.microbatches,
                                schedule=rep.schedule, training=bool(problem.graph.is_training))
    except ValueError as exc:
        return None, str(exc), [("step time", f"not simulated: {exc}")]
    rows = [
        ("simulated from", source),
        (f"step time ({rep.schedule}, {rep.microbatches} micro-batches)", f"{sim.step_time:.4g} ms"),
        ("bubble", f"{100 * sim.bubble_fraction:.1f} % of the step"),
        ("throughput", f"{1000.0 * rep.microbatches / sim.step_time:.4g} micro-batches/s"
         if sim.step_time > 0 else "-"),
    ]
    return sim, "", rows


def _decision(rep: ReportInput, ev: Any) -> list[str]:
    """What a trainer decides on, first: step time, throughput, bubble, per-stage memory with
    activations against capacity, the bottleneck and why, and a uniform block split beside."""
    from dnnpart.evaluate.chain import stage_rows
    from dnnpart.solvers.block_pipeline import uniform_split

    problem, plan, sim = rep.problem, rep.plan, ev.simulation
    obj = problem.objective
    step = float(sim["simulated_step_time"])
    per_s = 1000.0 * obj.microbatches / step if step > 0 else math.inf
    samples = rep.meta.get("samples_per_microbatch")
    tokens = rep.meta.get("tokens_per_microbatch")
    rows = [
        (f"step time ({obj.schedule}, {obj.microbatches} micro-batches, simulated)", f"{step:.4g} ms"),
        ("throughput", f"{per_s:.4g} micro-batches/s"
         + (f", {per_s * samples:.4g} samples/s" if samples else "")
         + (f", {per_s * tokens:.4g} tokens/s" if tokens else "")),
        ("bubble", f"{100 * float(sim['bubble_fraction']):.1f} % of the step"),
        ("max stage time (the objective)", f"{ev.objective:.4g} ms per micro-batch"),
    ]
    srows = stage_rows(problem, plan, sim)
    b = next(r for r in srows if r["bottleneck"])
    share = b["compute"] / b["time"] if b["time"] > 0 else 1.0
    held = b["first_block"] if b["blocks"] == 1 else f"{b['first_block']} .. {b['last_block']}"
    rows.append(("bottleneck", f"stage {b['stage']} on {b['device']} ({held}): {b['time']:.4g} ms, "
                 f"of which compute {100 * share:.0f} % and transfers {100 * (1 - share):.0f} %"))
    uni = uniform_split(problem)
    uev = evaluate(problem, uni)
    usim = uev.simulation or {}
    rows.append(("uniform block split (baseline)",
                 f"{uev.objective:.4g} ms max stage time"
                 + ("" if uev.feasible else " (breaks memory: " + "; ".join(uev.violations) + ")")
                 + f", simulated step {float(usim.get('simulated_step_time', math.inf)):.4g} ms"
                 + " -- same blocks, equal counts per stage (DeepSpeed's partition_method='uniform'); "
                   "the block DP searches every split, this one included, so it is never worse "
                   "by construction"))
    head = ("stage", "device", "blocks", "time ms", "compute ms", "transfers ms",
            "weights + gradients + optimizer", "activations (in flight)", "peak memory / capacity")
    table = [(str(r["stage"]) + (" (bottleneck)" if r["bottleneck"] else ""), r["device"],
              r["first_block"] if r["blocks"] == 1
              else f"{r['first_block']} .. {r['last_block']} ({r['blocks']})",
              f"{r['time']:.4g}", f"{r['compute']:.4g}", f"{r['transfers']:.4g}",
              _fmt_bytes(r["static_bytes"]),
              f"{_fmt_bytes(r['activation_bytes'])} ({r['in_flight']})",
              f"{_fmt_bytes(r['memory_bytes'])} / {_fmt_bytes(r['capacity_bytes'])}")
             for r in srows]
    return ["<h2>Decision</h2><table>" + "".join(
        f"<tr><th>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>" for k, v in rows) + "</table>",
        "<h2>Stages</h2>" + html_table(head, table)]


def _node_modules(rep: ReportInput) -> list[str] | None:
    if rep.imported is None:
        return None
    path = {op.name: op.module_path.replace("/", ".") for op in rep.imported.ir.ops}
    return [path.get(n, "") for n in rep.problem.graph.names]


def _measured(m: dict[str, Any]) -> str:
    """The section of a run's measurements beside their prediction."""
    head = f"<h2>Predicted against measured ({html.escape(str(m.get('steps')))} timed steps)</h2>"
    notes = "".join(f"<p>{html.escape(n)}</p>" for n in m.get("notes", []))
    return head + html_table(("", "predicted", "measured (median)", "min-max", "error"),
                         [list(r) for r in m["rows"]]) + notes


def build_report(rep: ReportInput) -> str:
    """The HTML text.

    Examples
    --------
    >>> from dnnpart.testing import chain_problem
    >>> p = chain_problem([1.0, 2.0, 3.0], n_accelerators=2)
    >>> text = build_report(ReportInput(problem=p, plan=Plan(assignment=[0, 0, 1])))
    >>> "<html" in text and "step time" in text and "<svg" in text
    True
    """
    import matplotlib

    matplotlib.use("Agg")
    # names come from files: "$\\frac{1}{$" is a device name, not mathtext to parse
    with matplotlib.rc_context({"text.parse_math": False}):
        return _build_report(rep)


def _build_report(rep: ReportInput) -> str:
    import matplotlib.pyplot as plt

    from dnnpart.evaluate.diagnose import bottleneck, bound_is_one_operator, host_offload
    from dnnpart.viz.placement import placement_svg

    problem, plan = rep.problem, rep.plan
    ev = evaluate(problem, plan)
    names = [d.name for d in problem.cluster.devices]
    kind = problem.objective.kind
    meta = rep.meta
    bound = meta.get("bound")
    space = meta.get("search_space") or "the method's search space"
    summary = [
        ("model", str(meta.get("model") or problem.name)),
        ("method", str(meta.get("method", "?"))),
        *([("plan from", str(meta["provenance"]))]
          if meta.get("provenance") and meta.get("provenance") != meta.get("method") else []),
        ("status", str(meta.get("status", "?"))),
        ("objective", f"{ev.objective:.4g} ms — {problem.objective.describe()}"),
        ("bound", f"{bound:.4g} ms (a lower bound among {space})" if isinstance(bound, (int, float))
         else "none (the method proves nothing)"),
        ("feasible", "yes" if ev.feasible else "no: " + "; ".join(ev.violations)),
    ]
    figures: list[str] = []
    decision: list[str] = []  # the stages objective: what a trainer decides on, first
    memory: dict[int, dict[str, float]] = {}  # per device: weights, gradients... (pipeline sim)
    if kind == "makespan":
        from dnnpart.simulate import emulate_ops

        sched = emulate_ops(problem.graph, problem.cluster, plan.assignment)
        summary.append(("makespan (op-level emulation)", f"{sched.makespan:.4g} ms"))
        summary += [(f"peak memory {names[d]}", _fmt_bytes(float(p)))
                    for d, p in enumerate(sched.peak_memory) if p > 0]
        figures = _timeline_figures(plt, sched.timeline(), gantt="ops",
                                    title="op-level timeline (compute blue, transfers grey)")
    elif kind == "stages" and ev.simulation:
        decision = _decision(rep, ev)
    elif kind != "iteration":
        sim, why, sim_rows = _pipeline(rep, ev, names)
        summary += sim_rows
        if sim is not None:
            figures = _timeline_figures(
                plt, sim.timeline, gantt="pipeline",
                title=f"pipeline schedule {rep.schedule}, {rep.microbatches} micro-batches "
                      "(F blue, B orange)")
            memory = sim.memory
        else:
            figures = [f"<p>No pipeline figure: {html.escape(why)}</p>"]
    labels = None
    modules = _node_modules(rep)
    if modules is not None:
        labels = {n: f"{m} ({n})" for n, m in zip(problem.graph.names, modules, strict=True) if m}
    notes = [host_offload(problem, plan), bottleneck(problem, plan, labels=labels),
             bound_is_one_operator(problem, bound if isinstance(bound, (int, float)) else None,
                                   labels=labels)]
    summary += [("diagnostic", n) for n in notes if n]
    parts = [*decision[:1], "<h2>Summary</h2><table>" + "".join(
        f"<tr><th>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>" for k, v in summary) + "</table>"]

    if decision:
        parts += decision[1:]
    elif kind == "iteration":
        parts.append("<h2>Layers</h2>" + html_table(
            ("layer", "op", "output (N, C, H, W)", "configuration", "devices"), layer_rows(problem, plan)))
    else:
        head = ["stage", "device", "operators", "modules", "parameters", "forward ms", "backward ms",
                "load ms"]
        mem_keys = sorted({k for m in memory.values() for k in m})
        head += mem_keys
        stage_rows = []
        for st in plan_stages(problem, plan, ev, rep.imported):
            row = [str(st.index), st.device_name, str(st.nodes), st.modules,
                   _fmt_bytes(st.parameter_bytes), f"{st.forward:.4g}", f"{st.backward:.4g}",
                   f"{st.load:.4g}"]
            row += [_fmt_bytes(float(memory.get(st.device, {}).get(k, 0.0))) for k in mem_keys]
            stage_rows.append(row)
        parts.append("<h2>Stages</h2>" + html_table(head, stage_rows))
    if rep.measured:
        parts.append(_measured(rep.measured))
    parts += figures
    if kind != "iteration":
        parts.append("<h2>Placement</h2>" + placement_svg(problem, plan, modules=modules))
    if rep.comparison:
        parts.append("<h2>Methods compared</h2>" + html_table(
            ("method", "status", "objective ms", "bound ms", "gap", "vs best", "seconds", "search space"),
            [(r["method"], r["status"], _num(r["objective"]), _num(r["bound"]),
              "-" if r["gap"] is None else f"{100 * r['gap']:.2f}%", r["vs_best"],
              "-" if r["seconds"] is None else f"{r['seconds']:.2f}", str(r["note"]))
             for r in rep.comparison], cls="compare"))

    return html_page(f"dnnpart plan report: {meta.get('model') or problem.name}", "".join(parts),
                     style="svg{border:1px solid #eee;margin:1em 0}")
