"""One self-contained HTML report of a plan: summary, stages in the model's language, figures.

No network resources: figures are matplotlib PNGs embedded as ``data:`` URIs, styles inline.
Content (choices, also in docs/report.md):

* summary: model, method, status, objective with what it means, bound (and what it bounds:
  the method's search space), devices used;
* stages in pipeline order: device, operators, module-path range (first and last operator's
  module), parameter bytes, predicted forward/backward time, and the memory split (weights,
  gradients, optimizer state, activations) from the pipeline simulator for the plan's
  schedule and micro-batch count (defaults 1F1B, 4);
* a pipeline Gantt (stages x time, F/B blocks per micro-batch) and memory over time per
  device, from :func:`dnnpart.simulate.pipeline.simulate_pipeline`; plans that are not
  pipelines get the per-device table only, with the reason.
"""

from __future__ import annotations

import base64
import html
import io
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dnnpart.evaluate import evaluate
from dnnpart.frontends.build import ImportedModel
from dnnpart.plan import Plan
from dnnpart.problem import Problem


@dataclass(slots=True, kw_only=True)
class ReportInput:
    """What a report shows: the planned problem, its plan and where it came from."""

    problem: Problem
    plan: Plan
    imported: ImportedModel | None = None
    meta: dict[str, Any] = field(default_factory=dict)  # plan file fields: method, status, bound...
    schedule: str = "1f1b"
    microbatches: int = 4


def _fmt_bytes(x: float) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if x >= scale:
            return f"{x / scale:.3g} {unit}"
    return f"{x:.0f} B"


def _png(fig: Any) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def _module_range(rep: ReportInput, device: int) -> str:
    if rep.imported is None:
        return ""
    g = rep.problem.graph
    index = {n: i for i, n in enumerate(g.names)}
    paths = [
        op.module_path.replace("/", ".") or "(top level)"
        for op in rep.imported.ir.ops
        if op.name in index and int(rep.plan.assignment[index[op.name]]) == device
        and not g.is_backward[index[op.name]]
    ]
    if not paths:
        return ""
    return paths[0] if paths[0] == paths[-1] else f"{paths[0]} … {paths[-1]}"


def build_report(rep: ReportInput) -> str:
    """The HTML text.

    Examples
    --------
    >>> from dnnpart.testing import chain_problem
    >>> p = chain_problem([1.0, 2.0, 3.0], n_accelerators=2)
    >>> text = build_report(ReportInput(problem=p, plan=Plan(assignment=[0, 0, 1])))
    >>> "<html" in text and "step time" in text
    True
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from dnnpart.simulate.pipeline import Stage, simulate_pipeline
    from dnnpart.simulate.stages import stages_from_plan

    problem, plan = rep.problem, rep.plan
    ev = evaluate(problem, plan)
    names = [d.name for d in problem.cluster.devices]
    training = bool(problem.graph.is_training)
    parts: list[str] = []
    meta = rep.meta
    bound = meta.get("bound")
    space = meta.get("search_space") or "the method's search space"
    summary = [
        ("model", str(meta.get("model") or problem.name)),
        ("method", str(meta.get("method", "?"))),
        ("status", str(meta.get("status", "?"))),
        ("objective", f"{ev.objective:.4g} ms — {problem.objective.describe()}"),
        ("bound", f"{bound:.4g} ms (a lower bound among {space})" if isinstance(bound, (int, float))
         else "none (the method proves nothing)"),
        ("feasible", "yes" if ev.feasible else "no: " + "; ".join(ev.violations)),
    ]
    sim = None
    why_no_sim = ""
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
                                schedule=rep.schedule, training=training)
        summary.append(("simulated from", source))
        summary += [
            (f"step time ({rep.schedule}, {rep.microbatches} micro-batches)", f"{sim.step_time:.4g} ms"),
            ("bubble", f"{100 * sim.bubble_fraction:.1f} % of the step"),
            ("throughput", f"{1000.0 * rep.microbatches / sim.step_time:.4g} micro-batches/s"
             if sim.step_time > 0 else "-"),
        ]
    except ValueError as exc:
        why_no_sim = str(exc)
        summary.append(("step time", f"not simulated: {why_no_sim}"))
    parts.append("<h2>Summary</h2><table>" + "".join(
        f"<tr><th>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>" for k, v in summary) + "</table>")

    order = list(dict.fromkeys(int(d) for d in plan.assignment))
    n_nodes = np.bincount(plan.assignment, minlength=len(names))
    params = np.zeros(len(names))
    if problem.graph.param_bytes is not None:
        np.add.at(params, plan.assignment, problem.graph.param_bytes)
    head = ["stage", "device", "operators", "modules", "parameters", "forward ms", "backward ms", "load ms"]
    mem_keys: list[str] = []
    if sim is not None and sim.memory:
        mem_keys = sorted({k for m in sim.memory.values() for k in m})
        head += [f"{k}" for k in mem_keys]
    rows = []
    for s, d in enumerate(order):
        row = [str(s), names[d], str(int(n_nodes[d])), _module_range(rep, d), _fmt_bytes(float(params[d])),
               f"{ev.forward_load[d]:.4g}", f"{ev.backward_load[d]:.4g}", f"{ev.load[d]:.4g}"]
        if mem_keys and sim is not None:
            row += [_fmt_bytes(float(sim.memory.get(d, {}).get(k, 0.0))) for k in mem_keys]
        rows.append(row)
    parts.append("<h2>Stages</h2><table><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in head) + "</tr>"
                 + "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in rows)
                 + "</table>")

    if sim is not None:
        tl = sim.timeline
        fig, ax = plt.subplots(figsize=(9, 0.5 + 0.45 * len(tl.resources)))
        for k in range(len(tl.start)):
            label = tl.what[k]
            color = "#4C78A8" if label.startswith("F") else "#F58518" if label.startswith("B") else "#999999"
            ax.barh(int(tl.resource[k]), tl.end[k] - tl.start[k], left=tl.start[k], color=color,
                    edgecolor="white", height=0.8)
        ax.set_yticks(range(len(tl.resources)), labels=list(tl.resources))
        ax.invert_yaxis()
        ax.set_xlabel("ms")
        ax.set_title(f"pipeline schedule {rep.schedule}, {rep.microbatches} micro-batches (F blue, B orange)")
        parts.append(f'<h2>Pipeline</h2><img alt="pipeline Gantt" src="{_png(fig)}">')
        plt.close(fig)
        if tl.memory:
            fig, ax = plt.subplots(figsize=(9, 3))
            for dev, curve in tl.memory.items():
                ax.step(curve.times, np.asarray(curve.after) / 1e6, where="post", label=dev)
            ax.set_xlabel("ms")
            ax.set_ylabel("MB")
            ax.legend(fontsize="small")
            ax.set_title("memory over the step")
            parts.append(f'<h2>Memory</h2><img alt="memory over time" src="{_png(fig)}">')
            plt.close(fig)
    elif why_no_sim:
        parts.append(f"<p>No pipeline figure: {html.escape(why_no_sim)}</p>")

    style = ("body{font-family:sans-serif;margin:2em;color:#222}table{border-collapse:collapse;margin:1em 0}"
             "th,td{border:1px solid #ccc;padding:3px 8px;text-align:left}th{background:#f3f3f3}"
             "img{max-width:100%}")
    title = f"dnnpart plan report: {html.escape(str(meta.get('model') or problem.name))}"
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{title}</title><style>{style}</style>"
            f"</head><body><h1>{title}</h1>{''.join(parts)}</body></html>")
