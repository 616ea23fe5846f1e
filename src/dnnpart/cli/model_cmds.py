"""Subcommands for real models: ``import``, ``plan``, ``export``, ``run``.

Wire them into the main parser with :func:`add_parsers`; every handler has the signature
``cmd_NAME(args, out) -> int`` like those of :mod:`dnnpart.cli.commands`.
"""

from __future__ import annotations

import argparse
import contextlib
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dnnpart.errors import FormatError

if TYPE_CHECKING:
    from dnnpart.cli.render import Renderer
    from dnnpart.cost.clusters import PricedCluster
    from dnnpart.frontends.build import ImportedModel
    from dnnpart.frontends.sources import ModelSource
    from dnnpart.plan import Plan
    from dnnpart.problem import Problem

EXIT_OK, EXIT_NO_PLAN = 0, 1
DEFAULT_CLUSTER = "4xA100"
MODEL_HELP = (
    "FILE.onnx, builtin:NAME (resnet50, inception_v3, bert), torchvision:NAME or module:PKG.MOD:CALLABLE"
)


def _add_model_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", help=MODEL_HELP)
    p.add_argument(
        "--input-shape",
        action="append",
        default=[],
        metavar="D0,D1,...",
        help="shape of a model input (repeat once per input; default: the model's own)",
    )
    p.add_argument(
        "--input-dtype",
        choices=("float32", "float64", "int64", "int32"),
        help="dtype of the example inputs of a torch model (default float32; int64 for bert)",
    )
    p.add_argument(
        "--training",
        action="store_true",
        help="add the backward pass (2x forward time, colocated with its forward operator)",
    )
    p.add_argument(
        "--cluster",
        default=DEFAULT_CLUSTER,
        metavar="SPEC",
        help=f"NxPRESET (e.g. 4xA100, 2xV100, 8xH100) or a cluster file (default {DEFAULT_CLUSTER})",
    )
    p.add_argument(
        "--specs", metavar="FILE", help="your own device/link presets (YAML/JSON), merged over ours"
    )
    p.add_argument(
        "--profile",
        action="store_true",
        help="measure operator times on this machine's CPU (medians) instead of estimating them",
    )
    p.add_argument("--repeats", type=int, default=10, help="timed runs when profiling (default 10)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of tables")


def add_parsers(subparsers: Any) -> None:
    """Add ``import``, ``plan``, ``export`` and ``run`` to the main parser's subparsers."""
    p = subparsers.add_parser("import", help="import an ONNX file or torch model into a priced graph")
    _add_model_args(p)
    p.add_argument(
        "--out",
        "-o",
        metavar="GRAPH",
        required=True,
        help="graph file: .json (dnn-partitioning format + op types, bytes) or .npz (native)",
    )

    p = subparsers.add_parser("plan", help="import a model, solve for a cluster and report (one step)")
    _add_model_args(p)
    p.add_argument("--objective", choices=("throughput", "latency"), default="throughput")
    p.add_argument("--training-form", choices=("pipedream", "gpipe"), default="pipedream")
    p.add_argument("--method", "-m", default="dp", help="method name (default: dp; see `dnnpart methods`)")
    p.add_argument("--time-limit", type=float, metavar="S", help="stop after S seconds")
    p.add_argument("--out", "-o", metavar="PLAN.json", help="write the plan (with its model) here")

    p = subparsers.add_parser("export", help="turn a plan (from `dnnpart plan`) into runnable artifacts")
    p.add_argument("plan", help="plan file written by `dnnpart plan -o`")
    p.add_argument(
        "--format",
        choices=("torch", "placement", "pipelining"),
        default="placement",
        help="torch: per-device stage modules; placement: operator -> device; "
        "pipelining: split points for torch.distributed.pipelining",
    )
    p.add_argument(
        "--out",
        "-o",
        metavar="PATH",
        required=True,
        help="output file (placement, pipelining) or directory (torch)",
    )
    _add_trust_args(p)
    p.add_argument("--json", action="store_true")

    p = subparsers.add_parser("run", help="run a plan across local processes (torch.distributed, gloo)")
    p.add_argument("plan", help="plan file written by `dnnpart plan -o` for a torch model")
    p.add_argument("--nproc", type=int, help="processes (default: one per device the plan uses)")
    p.add_argument("--microbatches", type=int, default=4, help="micro-batches to stream (default 4)")
    _add_trust_args(p)
    p.add_argument("--json", action="store_true")


#: Model specs a plan file may name and have followed: built-in and torchvision models and
#: ONNX files are data. Anything else (``module:`` imports and calls the user's code; kinds
#: added later are refused until listed here) needs ``--model SPEC`` or ``--trust-plan``.
SAFE_SPECS = ("builtin:", "torchvision:")


def _add_trust_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", metavar="SPEC",
                   help="the model the plan was made for (default: the plan's own if it is "
                        "builtin:, torchvision: or an .onnx file; module: specs import code)")
    p.add_argument("--trust-plan", action="store_true",
                   help="follow the plan's model spec even if it imports code (module:...)")


def plan_model_spec(block: dict[str, Any], path: str | Path, *, model: str | None,
                    trust: bool) -> str:
    """The model spec to resolve for a plan: ``model`` if given, else the plan's own.

    A plan file is data: its spec is refused when it would import and run code, unless
    ``trust`` (``--trust-plan``).

    Examples
    --------
    >>> plan_model_spec({"spec": "module:os:getcwd"}, "p.json", model=None, trust=False)
    ... # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    dnnpart.errors.FormatError: p.json: model.spec: 'module:os:getcwd' would import and run code; ...
    >>> plan_model_spec({"spec": "builtin:bert"}, "p.json", model=None, trust=False)
    'builtin:bert'
    """
    if model is not None:
        return model
    spec = block.get("spec")
    if not isinstance(spec, str):
        raise FormatError(f"{path}: model.spec: expected a string, got {type(spec).__name__}")
    text = spec.strip()
    safe = text.startswith(SAFE_SPECS) or (text.lower().endswith(".onnx")
                                            and ":" not in text.split("/")[-1])
    if not safe and not trust:
        raise FormatError(f"{path}: model.spec: {spec[:80]!r} would import and run code; name the "
                          "model yourself (--model SPEC) or pass --trust-plan")
    return spec


# -- shared steps -----------------------------------------------------------------------
def _priced_cluster(spec: str, specs_file: str | None) -> PricedCluster:
    from dnnpart.cost import load_catalog, resolve_cluster

    return resolve_cluster(spec, catalog=load_catalog(specs_file) if specs_file else None)


def _source(args: argparse.Namespace) -> ModelSource:
    from dnnpart.frontends.sources import parse_shape, resolve_model

    shapes = [parse_shape(s) for s in args.input_shape]
    return resolve_model(args.model, input_shapes=shapes or None, input_dtype=args.input_dtype)


def _import(args: argparse.Namespace, out: Renderer) -> tuple[ModelSource, ImportedModel, PricedCluster]:
    from dnnpart.frontends.sources import import_source

    priced = _priced_cluster(args.cluster, getattr(args, "specs", None))
    source = _source(args)
    if args.repeats < 1:
        raise FormatError(f"--repeats {args.repeats}: expected >= 1")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        imported = import_source(
            source,
            cost_model=priced.cost_model,
            training=args.training,
            profile=args.profile,
            profile_repeats=args.repeats,
        )
    for w in caught:
        out.note(f"warning: {w.message}")
    return source, imported, priced


def _summary(imported: ImportedModel, priced: PricedCluster) -> dict[str, Any]:
    g = imported.graph
    return {
        "model": imported.ir.name,
        "frontend": imported.ir.source,
        "operators": imported.n_operators,
        "nodes": g.n_nodes,
        "edges": g.n_edges,
        "backward_nodes": int(g.is_backward.sum()),
        "gflops": imported.total_flops / 1e9,
        "cpu_time_ms": float(g.time_on("cpu").sum()),
        "cpu_time_source": "measured" if imported.measured else "estimated",
        "accelerator_time_ms": float(g.time_on("accelerator").sum()),
        "memory_bytes": float(g.memory_bytes.sum()),
        "unknown_operator_types": imported.unknown_ops,
        "pricing": imported.cost_model.describe(),
        "cluster": priced.cluster.name,
    }


def _print_summary(s: dict[str, Any], out: Renderer) -> None:
    from dnnpart.cli.render import fmt, fmt_bytes

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


def _graph_dict(problem: Problem, imported: ImportedModel) -> dict[str, Any]:
    from dnnpart.io.dnn_partitioning import problem_to_dict

    data = problem_to_dict(problem)
    g = imported.graph
    ops = imported.ir.ops
    for v, node in enumerate(data["nodes"]):
        oid = int(g.original_ids[v]) % len(ops) if g.is_backward[v] else int(g.original_ids[v])
        if not g.is_backward[v] and oid < len(ops):
            node["opType"] = ops[oid].op_type
            node["modulePath"] = ops[oid].module_path
            node["flops"] = float(imported.flops[oid])
    for e, edge in enumerate(data["edges"]):
        b = float(g.edge_bytes[e])
        if b == b:  # not nan
            edge["bytes"] = b
    data["timeUnit"] = "ms"
    return data


def _model_block(args: argparse.Namespace, source: ModelSource) -> dict[str, Any]:
    return {
        "spec": args.model,
        "input_shapes": [list(s) for s in source.input_shapes],
        "input_dtype": source.input_dtype,
        "training": bool(args.training),
        "cluster": args.cluster,
        "specs": getattr(args, "specs", None),
    }


# -- import -----------------------------------------------------------------------------
def cmd_import(args: argparse.Namespace, out: Renderer) -> int:
    from dnnpart.cli.main import dumps
    from dnnpart.io.dnn_partitioning import write_json_atomic
    from dnnpart.limits import check_output_path
    from dnnpart.problem import Problem

    target = check_output_path(args.out)
    _, imported, priced = _import(args, out)
    problem = Problem(graph=imported.graph, cluster=priced.cluster, name=imported.ir.name)
    if target.suffix == ".npz":
        from dnnpart.io.native import save_graph

        save_graph(imported.graph, target)
    else:
        write_json_atomic(_graph_dict(problem, imported), target)
    summary = _summary(imported, priced) | {"out": str(target)}
    if out.json_mode:
        out.json(dumps(summary))
    else:
        _print_summary(summary, out)
        out.note(f"graph written to {target}")
    return EXIT_OK


# -- plan -------------------------------------------------------------------------------
def cmd_plan(args: argparse.Namespace, out: Renderer) -> int:
    from dnnpart.cli.main import dumps
    from dnnpart.evaluate import evaluate
    from dnnpart.io.dnn_partitioning import write_json_atomic
    from dnnpart.io.plan_files import plan_to_dict
    from dnnpart.plan import Status
    from dnnpart.problem import Objective, Problem
    from dnnpart.solvers import get_method, solve

    get_method(args.method)  # fail fast on an unknown method
    if args.out is not None:
        from dnnpart.limits import check_output_path

        check_output_path(args.out)
    source, imported, priced = _import(args, out)
    problem = Problem(
        graph=imported.graph,
        cluster=priced.cluster,
        name=imported.ir.name,
        objective=Objective(kind=args.objective, training=args.training_form),
    )
    progress = out.progress()
    with progress if progress is not None else contextlib.nullcontext():
        result = solve(problem, args.method, time_limit=args.time_limit, progress=progress)
    if result.plan is not None and args.out:
        data = plan_to_dict(problem, result.plan, result)
        data["model"] = _model_block(args, source)
        write_json_atomic(data, args.out)
    from dnnpart.cli.commands import report_stop

    stopped = report_stop(out, result, args.out)
    if stopped is not None:
        return stopped
    summary = _summary(imported, priced)
    if out.json_mode:
        payload: dict[str, Any] = {"import": summary, **result.to_dict()}
        if result.plan is not None:
            payload["evaluation"] = evaluate(problem, result.plan).to_dict(problem)
        out.json(dumps(payload))
    else:
        _print_summary(summary, out)
        out.print(out.result_line(result))
        if result.plan is not None:
            ev = evaluate(problem, result.plan)
            out.print(
                out.device_table(
                    problem, result.plan, ev, title=f"{problem.objective.describe()} (ms): {ev.objective:.4g}"
                )
            )
        if args.out and result.plan is not None:
            out.note(f"plan written to {args.out}; next: dnnpart run {args.out} / dnnpart export {args.out}")
    ok = result.plan is not None and result.status is not Status.UNKNOWN
    return EXIT_OK if ok else EXIT_NO_PLAN


# -- export / run -------------------------------------------------------------------------
def load_planned_model(
    path: str | Path, *, model: str | None = None, trust: bool = False,
) -> tuple[ModelSource, ImportedModel, Problem, Plan, Any]:
    """Re-import the model a plan file was made for; returns the traced module too (torch).

    ``model`` replaces the plan's model spec; without it a spec that imports code is
    refused unless ``trust`` (see :func:`plan_model_spec`).
    """
    from dnnpart.frontends.build import price_model
    from dnnpart.frontends.sources import import_source, resolve_model
    from dnnpart.io import fields as f
    from dnnpart.io.plan_files import parse_plan
    from dnnpart.problem import Problem

    data = f.read_json(path)
    block = f.require_mapping(data, str(path)).get("model")
    if not isinstance(block, dict) or "spec" not in block:
        raise FormatError(f"{path}: model: missing; export and run need a plan written by `dnnpart plan -o`")
    spec = plan_model_spec(block, path, model=model, trust=trust)
    priced = _priced_cluster(str(block.get("cluster", DEFAULT_CLUSTER)), block.get("specs"))
    source = resolve_model(
        spec,
        input_shapes=block.get("input_shapes") or None,
        input_dtype=block.get("input_dtype"),
    )
    gm = None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # already reported at import time
        if source.is_torch:
            from dnnpart.frontends.fx_import import module_ir, trace

            gm = trace(source.module, source.example_inputs, name=source.name)
            imported = price_model(
                module_ir(gm, name=source.name), priced.cost_model, training=bool(block.get("training"))
            )
        else:
            imported = import_source(
                source, cost_model=priced.cost_model, training=bool(block.get("training"))
            )
    problem = Problem(graph=imported.graph, cluster=priced.cluster, name=imported.ir.name)
    plan = parse_plan(data, problem, str(path))
    return source, imported, problem, plan, gm


def cmd_export(args: argparse.Namespace, out: Renderer) -> int:
    from dnnpart.cli.main import dumps
    from dnnpart.export import operator_devices, pipelining_dict, placement_dict
    from dnnpart.io.dnn_partitioning import write_json_atomic

    source, imported, problem, plan, gm = load_planned_model(
        args.plan, model=args.model, trust=args.trust_plan)
    names = [d.name for d in problem.cluster.devices]
    device_of = operator_devices(imported, plan)
    target = Path(args.out)
    info: dict[str, Any] = {"format": args.format, "out": str(target)}
    if args.format == "placement":
        write_json_atomic(placement_dict(problem, imported, plan), target)
    elif args.format == "pipelining":
        data = pipelining_dict(imported.ir, device_of, names)
        write_json_atomic(data, target)
        info["split_spec"] = list(data["split_spec"])
    else:
        if gm is None:
            raise FormatError(f"{args.plan}: --format torch needs a torch model, not {source.spec}")
        import torch

        from dnnpart.export.stages import split_module

        program = split_module(gm, device_of)
        target.mkdir(parents=True, exist_ok=True)
        manifest = []
        for stage in program.stages:
            stem = f"stage{stage.index}_{names[stage.device]}"
            (target / f"{stem}.py").write_text(stage.module.code)
            torch.save(stage.module, target / f"{stem}.pt")
            manifest.append(
                {
                    "index": stage.index,
                    "device": names[stage.device],
                    "level": stage.level,
                    "inputs": list(stage.inputs),
                    "outputs": list(stage.outputs),
                    "module": f"{stem}.pt",
                    "code": f"{stem}.py",
                    "n_operators": len(stage.nodes),
                }
            )
        write_json_atomic(
            {
                "format": "dnnpart.stages",
                "version": 1,
                "model": source.spec,
                "inputs": list(program.input_names),
                "outputs": list(program.output_values),
                "stages": manifest,
            },
            target / "stages.json",
        )
        info["stages"] = len(manifest)
    if out.json_mode:
        out.json(dumps(info))
    else:
        out.print(
            f"exported {args.format} to {target}"
            + (f" ({info['stages']} stages)" if "stages" in info else "")
        )
    return EXIT_OK


def cmd_run(args: argparse.Namespace, out: Renderer) -> int:
    from dnnpart.cli.main import dumps
    from dnnpart.export import operator_devices

    source, imported, problem, plan, gm = load_planned_model(
        args.plan, model=args.model, trust=args.trust_plan)
    if gm is None:
        raise FormatError(f"{args.plan}: `dnnpart run` needs a torch model, not {source.spec}")
    if args.microbatches < 1:
        raise FormatError(f"--microbatches {args.microbatches}: expected >= 1")
    import torch

    from dnnpart.export.runtime import run_distributed
    from dnnpart.export.stages import split_module
    from dnnpart.frontends.sources import example_inputs

    program = split_module(gm, operator_devices(imported, plan))
    if args.nproc is not None and args.nproc < len(program.devices):
        raise FormatError(f"--nproc {args.nproc}: the plan uses {len(program.devices)} devices")
    batches = [
        example_inputs(source.input_shapes, source.input_dtype, seed=i + 1, module=source.module)
        for i in range(args.microbatches)
    ]
    outputs = run_distributed(program, batches, nproc=args.nproc)
    torch.set_num_threads(1)
    with torch.no_grad():
        diffs = [_max_abs_diff(o, source.module(*mb)) for o, mb in zip(outputs, batches, strict=True)]
    used = [problem.cluster.devices[d].name for d in program.devices]
    info = {
        "model": source.spec,
        "processes": args.nproc or len(program.devices),
        "devices_used": used,
        "stages": len(program.stages),
        "microbatches": len(batches),
        "max_abs_diff": max(diffs),
    }
    if out.json_mode:
        out.json(dumps(info))
    else:
        out.print(
            f"ran {info['stages']} stages on {len(program.devices)} devices "
            f"({', '.join(used)}) in {info['processes']} gloo processes, "
            f"{len(batches)} micro-batches; max |distributed - unpartitioned| = {info['max_abs_diff']:.3g}"
        )
    return EXIT_OK


def _max_abs_diff(a: Any, b: Any) -> float:
    import torch

    if isinstance(a, torch.Tensor):
        return float((a.double() - b.double()).abs().max()) if a.numel() else 0.0
    if isinstance(a, (list, tuple)):
        return max((_max_abs_diff(x, y) for x, y in zip(a, b, strict=True)), default=0.0)
    if isinstance(a, dict):
        return max((_max_abs_diff(a[k], b[k]) for k in a), default=0.0)
    return 0.0 if a == b else float("inf")
