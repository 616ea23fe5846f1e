"""``dnnpart plan MODEL --parallel dp,tp,pp``: hybrid plans of a transformer, printed (a helper of
``plan_cmd``, not a command of its own)."""

from __future__ import annotations

import argparse
from typing import Any

from dnnpart.cli.args import input_shapes
from dnnpart.cli.output import EXIT_NO_PLAN, EXIT_OK, check_outputs, dumps
from dnnpart.cli.progress import command_progress
from dnnpart.cli.render import Renderer
from dnnpart.errors import UsageError

#: ``plan`` options the hybrid search chooses itself or does not take, with why
NOT_WITH_PARALLEL = {
    "method": "the hybrid search is its own method",
    "compare": "the hybrid search is its own method",
    "objective": "hybrid plans minimise the training step time",
    "schedule": "the search chooses the schedule",
    "microbatches": "the search chooses the micro-batches (give --global-batch)",
    "recompute": "the search chooses the recomputation of every stage",
    "granularity": "the search prices one block and reuses it",
    "profile": "hybrid plans are priced by the cluster's cost model",
}


def add_parallel_args(p: argparse.ArgumentParser) -> None:
    """``--parallel``, ``--global-batch`` and ``--devices`` of ``plan``."""
    p.add_argument("--parallel", metavar="DIMS",
                   help="hybrid plans of an hf: transformer over these dimensions (dp,tp,pp): "
                        "data, tensor and pipeline degrees, recomputation, ZeRO stage, micro-batch "
                        "and schedule; prints the best plan, the best launchable one and their "
                        "Megatron / torchtitan / DeepSpeed settings (docs/methods/hybrid.md)")
    p.add_argument("--global-batch", type=int, metavar="B",
                   help="with --parallel: sequences per step (default: 8 per device)")
    p.add_argument("--devices", type=int, metavar="N",
                   help="with --parallel: use the first N accelerators (default: all)")
    p.add_argument("--tensor-degree", type=int, metavar="T",
                   help="with --parallel: fix the tensor-parallel degree (a what-if)")
    p.add_argument("--pipeline-degree", type=int, metavar="P",
                   help="with --parallel: fix the number of pipeline stages (a what-if)")
    p.add_argument("--check-exports", action="store_true",
                   help="with --parallel: check the Megatron settings with megatron-core's own "
                        "rules (where installed; its import takes seconds)")


def check_parallel_args(args: argparse.Namespace) -> None:
    """Refuse the options ``--parallel`` does not take (and the hybrid options without it)."""
    if args.parallel is None:
        for name in ("global_batch", "devices", "check_exports", "tensor_degree", "pipeline_degree"):
            if getattr(args, name) not in (None, False):
                raise UsageError(f"--{name.replace('_', '-')} goes with --parallel")
        return
    for name, why in NOT_WITH_PARALLEL.items():
        value = getattr(args, name, None)
        if value not in (None, False):
            raise UsageError(f"--{name} does not go with --parallel: {why}")


def cmd_parallel(args: argparse.Namespace, out: Renderer) -> int:
    """Plan, print and write (``--out``) the hybrid plans."""
    from dnnpart.workflow import plan_parallel
    from dnnpart.workflow.parallel_planning import parse_dimensions

    check_parallel_args(args)
    dims = parse_dimensions(args.parallel)
    check_outputs(out, {"--out": args.out, "--report": args.report})
    with command_progress(out, "plan") as progress:
        planned = plan_parallel(
            args.model, cluster=args.cluster, dims=dims, global_batch=args.global_batch,
            devices=args.devices, specs=args.specs, precision=args.precision,
            optimizer=args.optimizer or "adam", input_shapes=input_shapes(args), config=args.config,
            tensor=args.tensor_degree, pipeline=args.pipeline_degree,
            check_exports=args.check_exports, notify=out.note, progress=progress)
    for note in planned.notes:
        out.note(note)
    if args.out and planned.result.launchable is not None:
        planned.write(args.out)
    data = planned.to_dict()  # the plan file's content: the page and --json show it too
    if args.report:
        from dnnpart.workflow import write_parallel_report

        write_parallel_report(data, args.report)
    if out.json_mode:
        out.json(dumps(data))
    else:
        print_parallel(planned, out)
        if args.out and planned.result.launchable is not None:
            out.note(f"plan written to {args.out} (its exports under \"exports\")")
        if args.report:
            out.note(f"report written to {args.report}")
    return EXIT_OK if planned.result.launchable is not None else EXIT_NO_PLAN


def print_parallel(planned: Any, out: Renderer) -> None:
    """The two plans side by side, the bound, per-stage memory, what-if tables, exports."""
    from rich.table import Table

    from dnnpart.viz.parallel_report import gb, ms

    r = planned.result
    f = planned.facts
    out.print(f"{planned.spec}: {f.layers} layers, hidden {f.hidden}, {f.heads} heads, sequence "
              f"{f.seq}; {r.devices} devices of {planned.cluster}; global batch {r.global_batch}; "
              f"{r.choices} global choices searched")
    if r.launchable is None:
        out.print("no plan fits the devices' memory (every choice searched)")
        return
    table = Table(title="hybrid plans (exact over their spaces; step time in ms)", title_justify="left")
    for col in ("", "data", "tensor", "pipeline", "zero", "micro-batch x count", "schedule",
                "blocks per stage", "recompute", "step (ms)"):
        table.add_column(col)
    for label, cost in (("best", r.best), ("launchable", r.launchable)):
        c = cost.config
        sched = c.schedule + (f" (v={c.virtual})" if c.virtual > 1 else "")
        table.add_row(label, str(c.d), str(c.t), str(c.p), str(c.zero),
                      f"{c.micro_batch} x {c.microbatches}", sched, "/".join(map(str, c.blocks)),
                      "/".join(sorted(set(c.recompute))) if c.uniform else "/".join(c.recompute),
                      ms(cost.step_s))
    out.print(table)
    gap = r.gap
    out.print(f"bound {ms(r.bound_s)} ms (the model's compute spread perfectly over {r.devices} "
              f"devices; over every plan of the cost model): launchable plan within {gap:.1%} of it")
    mem = Table(title="launchable plan per stage (per device; GB)", title_justify="left")
    for col in ("stage", "tau (ms)", "sync (ms)", "weights", "grads", "optimizer", "activations",
                "working", "total", "capacity"):
        mem.add_column(col)
    for s, t in enumerate(r.launchable.stages):
        mem.add_row(str(s), ms(float(t.tau)), ms(float(t.sync)), gb(float(t.weights)),
                    gb(float(t.gradients)), gb(float(t.optimizer_state)), gb(float(t.activations)),
                    gb(float(t.working)), gb(float(t.memory)), gb(r.launchable.capacity))
    out.print(mem)
    what_if = Table(title="what if (best step, ms)", title_justify="left")
    what_if.add_column("fixed")
    what_if.add_column("best step (ms)")
    for k, v in sorted(r.by_tensor.items()):
        what_if.add_row(f"tensor {k}", ms(v))
    for k, v in sorted(r.by_pipeline.items()):
        what_if.add_row(f"pipeline {k}", ms(v))
    for k, v in sorted(planned.by_devices.items()):
        what_if.add_row(f"{k} devices (launchable)", ms(v))
    out.print(what_if)
    ex = planned.exports
    out.print("Megatron-LM: " + " ".join(ex["megatron"]["args"])
              + (f"  [checked by {ex['megatron']['checked_by']}]" if ex["megatron"]["checked_by"] else ""))
    titan = ex["torchtitan"]
    out.print("torchtitan: " + (" ".join(titan["args"]) if titan["args"]
                                else f"none ({titan['not_launchable']})"))
    ds = ex["deepspeed"]
    out.print("DeepSpeed: " + (dumps(ds["config"]) if ds["config"] else f"none ({ds['note']})"))
    if ds["config"] and ds["note"]:
        out.note(f"DeepSpeed: {ds['note']}")
