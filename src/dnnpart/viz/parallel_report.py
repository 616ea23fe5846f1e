"""One self-contained HTML page about a hybrid data x tensor x pipeline plan (``dnnpart report
hybrid.json``, ``dnnpart plan --parallel ... --report page.html``).

The plan file (``format: dnnpart.parallel-plan``, written by ``plan --parallel -o``) is data:
:func:`read_parallel_plan` checks every field it shows (one error naming the field) and the page
never runs anything the file names. Content (choices, also in docs/report.md):

* summary: model, cluster, devices, global batch, the bound and what it bounds, the launchable
  plan's gap to it, how many global choices were priced and skipped;
* the best and the launchable plan side by side (d, t, p, ZeRO, micro-batches, schedule, blocks
  per stage, recomputation, predicted step);
* per stage of the launchable plan: blocks, recomputation, per micro-batch time (its forward
  part), the data-parallel reduction, memory by part against the capacity, micro-batches in
  flight; and a stacked bar chart of that memory per device;
* the schedule's Gantt: the stages' forward and backward times per micro-batch (the cost
  model's ``tau_s`` split into its forward part and the rest) run by the pipeline simulator
  (:func:`dnnpart.simulate.pipeline.simulate_pipeline`, GPipe or 1F1B as planned; its messages
  are inside ``tau_s`` already, so the simulator's links cost nothing), then each stage's
  reduction ``G_s``. The simulated step is shown beside the formula's
  ``max_s [(m + p - 1) tau_s + G_s]`` and their difference: equal for equal stages; with
  unequal ones the simulated schedule may be shorter (a fast stage does not wait for the
  slowest's time in every slot) or longer (a stage with a large reduction whose last backward
  comes late). The simulator has no interleaved schedule: for one, the page says so and draws
  no Gantt;
* the what-if tables (best launchable step per device count; best step per tensor degree and
  per pipeline depth);
* the exports as text (Megatron-LM arguments, torchtitan overrides, DeepSpeed config) and the
  plan's notes.
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dnnpart.errors import FormatError
from dnnpart.io import fields as f
from dnnpart.pricing.parallel import RECOMPUTE, SCHEDULES, ParallelConfig
from dnnpart.viz.page import gantt_png, html_page, html_table, png

__all__ = ["FORMAT", "ParallelPlanFile", "build_parallel_report", "gb", "ms", "read_parallel_plan"]

FORMAT = "dnnpart.parallel-plan"
#: the memory parts of a stage, in the order the tables and bars show them
MEMORY_PARTS = ("weights", "gradients", "optimizer_state", "activations", "working")
#: a Gantt of more micro-batch operations than this is not drawn (the page says so)
GANTT_LIMIT = 20_000


@dataclass(frozen=True, slots=True)
class StageRow:
    """One stage of a plan as the file gives it (seconds, bytes)."""

    blocks: int
    recompute: str
    tau_s: float
    forward_s: float
    sync_s: float
    memory_bytes: float
    parts: dict[str, float]
    in_flight: int


@dataclass(frozen=True, slots=True)
class PlanRow:
    """A plan of the file: its configuration, predicted step and stages."""

    config: ParallelConfig
    step_s: float
    fits: bool
    capacity_bytes: float
    stages: tuple[StageRow, ...]


@dataclass(frozen=True, slots=True)
class ParallelPlanFile:
    """The checked content of a hybrid plan file."""

    model: str
    cluster: str
    devices: int
    global_batch: int
    bound_s: float
    choices: int
    pruned: int
    best: PlanRow | None
    launchable: PlanRow | None
    by_tensor: dict[int, float]
    by_pipeline: dict[int, float]
    by_devices: dict[int, float]
    exports: dict[str, Any]
    notes: tuple[str, ...]


def _seconds(value: Any, where: str) -> float:
    # plan files hold finite numbers only (written with allow_nan=False; "none" is null)
    return f.number(value, where, minimum=0.0)


def _stage(raw: Any, where: str, blocks: int, recompute: str) -> StageRow:
    s = f.require_mapping(raw, where)
    parts = {k: f.number(s.get(k, f.MISSING), f"{where}.{k}", minimum=0.0) for k in MEMORY_PARTS}
    tau = _seconds(s.get("tau_s", f.MISSING), f"{where}.tau_s")
    forward = _seconds(s.get("forward_s", 0.0), f"{where}.forward_s")
    if forward > tau:
        raise FormatError(f"{where}.forward_s: expected at most the stage's tau_s ({tau:g} s), "
                          f"got {forward:g}")
    return StageRow(blocks=blocks, recompute=recompute, tau_s=tau, forward_s=forward,
                    sync_s=_seconds(s.get("sync_s", f.MISSING), f"{where}.sync_s"),
                    memory_bytes=f.number(s.get("memory_bytes", f.MISSING), f"{where}.memory_bytes"),
                    parts=parts, in_flight=f.integer(s.get("in_flight", f.MISSING),
                                                     f"{where}.in_flight", minimum=0))


def _plan(raw: Any, where: str) -> PlanRow | None:
    if raw is None:
        return None
    plan = f.require_mapping(raw, where)
    c = f.require_mapping(plan.get("config", f.MISSING), f"{where}.config")

    def whole(key: str, minimum: int = 1) -> int:
        return f.integer(c.get(key, f.MISSING), f"{where}.config.{key}", minimum=minimum)

    d, t, p = whole("data"), whole("tensor"), whole("pipeline")
    zero = whole("zero", 0)
    if zero > 3:
        raise FormatError(f"{where}.config.zero: expected a ZeRO stage 0-3, got {zero}")
    schedule = f.text(c.get("schedule", f.MISSING), f"{where}.config.schedule")
    if schedule not in SCHEDULES:
        raise FormatError(f"{where}.config.schedule: expected one of {', '.join(SCHEDULES)}, "
                          f"got {f.describe(schedule)}")
    blocks = [f.integer(x, f"{where}.config.blocks[{i}]", minimum=1)
              for i, x in enumerate(f.require_list(c.get("blocks", f.MISSING), f"{where}.config.blocks"))]
    recompute = [f.text(x, f"{where}.config.recompute[{i}]") for i, x in
                 enumerate(f.require_list(c.get("recompute", f.MISSING), f"{where}.config.recompute"))]
    for i, r in enumerate(recompute):
        if r not in RECOMPUTE:
            raise FormatError(f"{where}.config.recompute[{i}]: expected one of "
                              f"{', '.join(RECOMPUTE)}, got {f.describe(r)}")
    stages = f.require_list(plan.get("stages", f.MISSING), f"{where}.stages")
    if not len(blocks) == len(recompute) == len(stages) == p:
        raise FormatError(f"{where}: {p} pipeline stages but {len(blocks)} block counts, "
                          f"{len(recompute)} recomputations and {len(stages)} stages")
    virtual = whole("virtual")
    if (schedule == "interleaved") != (virtual > 1):
        raise FormatError(f"{where}.config.virtual: expected >= 2 with an interleaved schedule, "
                          f"else 1, got {virtual} with {schedule}")
    config = ParallelConfig(d=d, t=t, p=p, zero=zero, micro_batch=whole("micro_batch"),
                            microbatches=whole("microbatches"), schedule=schedule,
                            blocks=tuple(blocks), recompute=tuple(recompute), virtual=virtual)
    return PlanRow(
        config=config,
        step_s=_seconds(plan.get("step_s", f.MISSING), f"{where}.step_s"),
        fits=f.flag(plan.get("fits", True), f"{where}.fits"),
        capacity_bytes=math.inf if plan.get("capacity_bytes") is None else
        f.number(plan["capacity_bytes"], f"{where}.capacity_bytes"),  # null: unbounded
        stages=tuple(_stage(s, f"{where}.stages[{i}]", blocks[i], recompute[i])
                     for i, s in enumerate(stages)))


def _table_of(raw: Any, where: str) -> dict[int, float]:
    out: dict[int, float] = {}
    for key, value in f.require_mapping(raw if raw is not None else {}, where).items():
        try:
            k = int(key)
        except ValueError:
            raise FormatError(f"{where}: expected whole numbers as keys, got {f.describe(key)}") from None
        if k < 1:
            raise FormatError(f"{where}: expected keys >= 1, got {k}")
        out[k] = math.inf if value is None else _seconds(value, f"{where}.{key}")
    return out


def read_parallel_plan(data: Mapping[str, Any], where: str) -> ParallelPlanFile:
    """The checked content of a hybrid plan file's JSON (``where``: the file, for messages).

    Raises
    ------
    FormatError
        Not a hybrid plan file, or a field of the wrong type or range (named).

    Examples
    --------
    >>> read_parallel_plan({"format": "dnnpart.plan"}, "p.json")
    Traceback (most recent call last):
    ...
    dnnpart.errors.FormatError: p.json.format: expected 'dnnpart.parallel-plan' (a plan of ...
    """
    if data.get("format") != FORMAT:
        raise FormatError(f"{where}.format: expected {FORMAT!r} (a plan of `plan --parallel -o`), "
                          f"got {f.describe(data.get('format'))}")
    notes = f.require_list(data.get("notes", []), f"{where}.notes")
    exports = data.get("exports", {})
    return ParallelPlanFile(
        model=f.text(data.get("model", f.MISSING), f"{where}.model"),
        cluster=f.text(data.get("cluster", ""), f"{where}.cluster"),
        devices=f.integer(data.get("devices", f.MISSING), f"{where}.devices", minimum=1),
        global_batch=f.integer(data.get("global_batch", f.MISSING), f"{where}.global_batch", minimum=1),
        bound_s=_seconds(data.get("bound_s", f.MISSING), f"{where}.bound_s"),
        choices=f.integer(data.get("choices", 0), f"{where}.choices", minimum=0),
        pruned=f.integer(data.get("pruned", 0), f"{where}.pruned", minimum=0),
        best=_plan(data.get("best"), f"{where}.best"),
        launchable=_plan(data.get("launchable"), f"{where}.launchable"),
        by_tensor=_table_of(data.get("by_tensor"), f"{where}.by_tensor"),
        by_pipeline=_table_of(data.get("by_pipeline"), f"{where}.by_pipeline"),
        by_devices=_table_of(data.get("by_devices"), f"{where}.by_devices"),
        exports=f.require_mapping(exports, f"{where}.exports"),
        notes=tuple(f.text(n, f"{where}.notes[{i}]") for i, n in enumerate(notes)))


def ms(seconds: float) -> str:
    """Seconds as milliseconds for a table (``-`` for no value), as the CLI prints them.

    >>> ms(3.5554), ms(float("inf"))
    ('3,555.4', '-')
    """
    return f"{seconds * 1e3:,.1f}" if math.isfinite(seconds) else "-"


def gb(nbytes: float) -> str:
    """Bytes as GB for a table (``-`` for no value).

    >>> gb(26.52e9)
    '26.52'
    """
    return f"{nbytes / 1e9:,.2f}" if math.isfinite(nbytes) else "-"


def _describe(plan: PlanRow) -> list[str]:
    c = plan.config
    sched = c.schedule + (f" (v={c.virtual})" if c.virtual > 1 else "")
    rec = [s.recompute for s in plan.stages]
    return [str(c.d), str(c.t), str(c.p), str(c.zero), f"{c.micro_batch} x {c.microbatches}", sched,
            "/".join(str(s.blocks) for s in plan.stages),
            rec[0] if len(set(rec)) == 1 else "/".join(rec), ms(plan.step_s)]


def formula_step(plan: PlanRow) -> float:
    """The cost model's step, ``max_s [span tau_s + G_s]`` (:mod:`dnnpart.pricing.parallel`)."""
    from dnnpart.pricing.parallel import step_time

    return step_time(plan.config, [s.tau_s for s in plan.stages], [s.sync_s for s in plan.stages])


def schedule_timeline(plan: PlanRow) -> tuple[Any, float]:
    """The simulated schedule of ``plan`` (a :class:`~dnnpart.simulate.timeline.Timeline`,
    milliseconds; each stage's reduction after its last backward) and its step in seconds.

    Raises
    ------
    FormatError
        An interleaved schedule (the simulator runs GPipe and 1F1B).
    """
    import numpy as np

    from dnnpart.devices.topology import two_level
    from dnnpart.simulate.pipeline import simulate_pipeline
    from dnnpart.simulate.timeline import ALLREDUCE, Timeline
    from dnnpart.stages import Stage

    c = plan.config
    if c.schedule not in ("gpipe", "1f1b"):
        raise FormatError(f"the pipeline simulator runs GPipe and 1F1B, not {c.schedule}")
    # the messages are inside tau_s: the stages send no bytes, over links without latency
    free = two_level(nodes=1, gpus=c.p, latency=0.0, memory=math.inf)
    stages = [Stage(devices=(s,), forward=1e3 * st.forward_s, backward=1e3 * (st.tau_s - st.forward_s),
                    name=f"stage {s}") for s, st in enumerate(plan.stages)]
    sim = simulate_pipeline(stages, free, microbatches=c.microbatches, schedule=c.schedule)
    tl = sim.timeline
    ends = np.zeros(c.p)
    for r, e in zip(tl.resource, tl.end, strict=True):
        if r < c.p:
            ends[r] = max(ends[r], e)
    sync = np.array([1e3 * st.sync_s for st in plan.stages])
    keep = np.flatnonzero(np.asarray(tl.resource) < c.p)  # the stages' operations only
    timeline = Timeline(
        resources=tuple(f"stage {s}" for s in range(c.p)),
        resource=np.concatenate([np.asarray(tl.resource)[keep], np.arange(c.p)]),
        start=np.concatenate([np.asarray(tl.start)[keep], ends]),
        end=np.concatenate([np.asarray(tl.end)[keep], ends + sync]),
        kind=tuple(tl.kind[k] for k in keep) + (ALLREDUCE,) * c.p,
        what=tuple(tl.what[k] for k in keep) + ("G",) * c.p)
    return timeline, float((ends + sync).max()) / 1e3


def _memory_figure(plt: Any, plan: PlanRow) -> str:
    import numpy as np

    p = plan.config.p
    fig, ax = plt.subplots(figsize=(7, 3))
    x = np.arange(p)
    bottom = np.zeros(p)
    for part in MEMORY_PARTS:
        values = np.array([s.parts[part] / 1e9 for s in plan.stages])
        ax.bar(x, values, bottom=bottom, label=part.replace("_", " "))
        bottom += values
    if math.isfinite(plan.capacity_bytes):
        ax.axhline(plan.capacity_bytes / 1e9, color="black", linestyle="--", label="capacity")
    ax.set_xticks(x, labels=[f"stage {s}" for s in range(p)])
    ax.set_ylabel("GB per device")
    ax.legend(fontsize="small", ncols=3)
    ax.set_title("memory per device of each stage (launchable plan)")
    out = png(fig)
    plt.close(fig)
    return out


def _gantt(plt: Any, plan: PlanRow) -> str:

    c = plan.config
    if c.schedule not in ("gpipe", "1f1b"):
        return (f"<h2>Schedule</h2><p>No Gantt: the pipeline simulator runs GPipe and 1F1B, not "
                f"{html.escape(c.schedule)} (v={c.virtual}); the step is the formula's "
                f"{ms(formula_step(plan))} ms.</p>")
    if 2 * c.p * c.microbatches > GANTT_LIMIT:
        return (f"<h2>Schedule</h2><p>No Gantt: {c.p} stages x {c.microbatches} micro-batches "
                f"is more than {GANTT_LIMIT:,} operations to draw.</p>")
    tl, step = schedule_timeline(plan)
    img = gantt_png(plt, tl, title=f"{c.schedule}, {c.microbatches} micro-batches per replica "
                                   "(F blue, B orange, data-parallel reduction grey)", phases=True)
    formula = formula_step(plan)
    return (f"<h2>Schedule</h2><p>One pipeline replica simulated with the stages' times per "
            f"micro-batch: step {ms(step)} ms; the cost model's formula (what the search "
            f"minimises, a per-stage maximum) {ms(formula)} ms, "
            f"{(formula - step) / step:+.1%} from it (they agree when the stages are equal).</p>"
            f'<img alt="schedule Gantt" src="{img}">')


def build_parallel_report(plan: ParallelPlanFile) -> str:
    """The HTML page of a hybrid plan (module docstring).

    Examples
    --------
    >>> from dnnpart.workflow import plan_parallel
    >>> r = plan_parallel("hf:gpt2:n_layer=4,n_embd=64,n_head=4", cluster="4xA100",
    ...                   input_shapes=[(1, 32)], global_batch=8)
    >>> text = build_parallel_report(read_parallel_plan(r.to_dict(), "plan"))
    >>> "<html" in text and "launchable" in text and "Megatron" in text
    True
    """
    import matplotlib

    matplotlib.use("Agg")
    with matplotlib.rc_context({"text.parse_math": False}):  # names come from files
        return _build(plan)


def _build(plan: ParallelPlanFile) -> str:
    import matplotlib.pyplot as plt

    best, launch = plan.best, plan.launchable
    gap = ("-" if launch is None or not math.isfinite(launch.step_s) or launch.step_s <= 0
           else f"{(launch.step_s - plan.bound_s) / launch.step_s:.1%}")
    summary = [
        ("model", plan.model), ("cluster", plan.cluster), ("devices", str(plan.devices)),
        ("global batch", f"{plan.global_batch} samples per step"),
        ("launchable step", f"{ms(launch.step_s)} ms" if launch else "no plan fits"),
        ("bound", f"{ms(plan.bound_s)} ms: the model's compute for the global batch spread "
                  f"perfectly over {plan.devices} devices (over every plan of the cost model)"),
        ("launchable plan's gap to the bound", gap),
        ("global choices", f"{plan.choices} priced, {plan.pruned} skipped by their floor "
                           "(exactly: a floor no better than every answer it could change)"),
    ]
    parts = ["<h2>Summary</h2><table>" + "".join(
        f"<tr><th>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>" for k, v in summary) + "</table>"]
    head: tuple[str, ...] = ("plan", "data", "tensor", "pipeline", "ZeRO", "micro-batch x count", "schedule",
            "blocks per stage", "recompute", "step (ms)")
    parts.append("<h2>Plans</h2><p>The best plan may recompute differently per stage; the "
                 "launchable one is what Megatron-LM, torchtitan and DeepSpeed take (one "
                 "recomputation, no ZeRO-2/3 with pipeline stages) and what the exports carry.</p>"
                 + html_table(head, [[label, *_describe(p)] for label, p in
                                (("best", best), ("launchable", launch)) if p is not None]))
    if launch is not None:
        head = ("stage", "blocks", "recompute", "per micro-batch (ms)", "of it forward (ms)",
                "reduction (ms)", *(k.replace("_", " ") + " (GB)" for k in MEMORY_PARTS),
                "total (GB)", "capacity (GB)", "in flight")
        rows = [[str(i), str(s.blocks), s.recompute, ms(s.tau_s), ms(s.forward_s), ms(s.sync_s),
                 *(gb(s.parts[k]) for k in MEMORY_PARTS), gb(s.memory_bytes),
                 gb(launch.capacity_bytes), str(s.in_flight)] for i, s in enumerate(launch.stages)]
        parts.append("<h2>Stages of the launchable plan (per device)</h2>" + html_table(head, rows))
        parts.append(f'<img alt="memory per device" src="{_memory_figure(plt, launch)}">')
        parts.append(_gantt(plt, launch))
    what_if = [[f"{k} devices", ms(v)] for k, v in sorted(plan.by_devices.items())]
    what_if += [[f"tensor degree {k}", ms(v)] for k, v in sorted(plan.by_tensor.items())]
    what_if += [[f"pipeline depth {k}", ms(v)] for k, v in sorted(plan.by_pipeline.items())]
    if what_if:
        parts.append("<h2>What if</h2><p>The best launchable step per device count (the search "
                     "again on fewer devices, the same global batch); the best step with the "
                     "tensor degree or pipeline depth fixed.</p>"
                     + html_table(("fixed", "step (ms)"), what_if))
    exports = []
    for name, label in (("megatron", "Megatron-LM arguments"), ("torchtitan", "torchtitan overrides"),
                        ("deepspeed", "DeepSpeed config")):
        if name in plan.exports:
            exports.append(f"<h3>{label}</h3><pre>"
                           f"{html.escape(json.dumps(plan.exports[name], indent=1, default=str))}</pre>")
    if exports:
        parts.append("<h2>Exports (the launchable plan)</h2>" + "".join(exports))
    if plan.notes:
        parts.append("<h2>Notes</h2>" + "".join(f"<p>{html.escape(n)}</p>" for n in plan.notes))
    return html_page(f"dnnpart hybrid plan report: {plan.model}", "".join(parts),
                     style="pre{background:#f7f7f7;padding:.5em;white-space:pre-wrap}")
