"""Subcommands for real models: ``import``, ``plan``, ``export``, ``run``.

Wire them into the main parser with :func:`add_parsers`; every handler has the signature
``cmd_NAME(args, out) -> int`` like those of :mod:`dnnpart.cli.commands`.
"""

from __future__ import annotations

import argparse
import contextlib
import warnings
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dnnpart.cli.args import DEFAULT_METHODS, add_method_args, add_objective_args
from dnnpart.errors import FormatError, ProblemTooLargeError

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
    "FILE.onnx, builtin:NAME (resnet50, inception_v3, bert), torchvision:NAME, "
    "hf:ARCH[:KEY=VALUE,...] (transformers config, e.g. hf:gpt2:n_layer=2) or module:PKG.MOD:CALLABLE"
)


def _add_model_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", help=MODEL_HELP)
    add_model_spec_args(p)
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


def add_model_spec_args(p: argparse.ArgumentParser) -> None:
    """Options of every command that accepts a model spec (``hf:``, ``builtin:``, ``.onnx``...)."""
    p.add_argument(
        "--input-shape",
        action="append",
        default=[],
        metavar="D0,D1,...",
        help="model specs: shape of a model input (repeat once per input; default: the model's own)",
    )
    p.add_argument(
        "--input-dtype",
        choices=("float32", "float64", "int64", "int32"),
        help="model specs: dtype of the example inputs (default float32; int64 for text models)",
    )
    p.add_argument(
        "--training",
        action="store_true",
        help="model specs: the training graph (torch: real autograd forward+backward; ONNX: "
        "a synthesised backward, 2x forward time, colocated with its forward operator)",
    )
    p.add_argument(
        "--optimizer",
        choices=("sgd", "adam"),
        help="with --training: add one update op per parameter (adam: 3x residual bytes)",
    )
    p.add_argument(
        "--precision",
        choices=("fp32", "tf32", "bf16", "fp16"),
        default="fp32",
        help="compute precision of the cost model: tensor-core peaks of the device presets, "
        "and 2-byte tensors for bf16/fp16 (default fp32)",
    )
    p.add_argument(
        "--frontend",
        choices=("export", "fx"),
        default="export",
        help="torch capture: export (torch.export, one node per aten op; default) or fx (symbolic "
        "tracing, one node per module call)",
    )
    p.add_argument(
        "--config", metavar="FILE", help="hf: models: JSON object of config overrides (like KEY=VALUE)"
    )
    p.add_argument(
        "--granularity",
        choices=("op", "module"),
        default="op",
        help="one node per operator (default) or per run of operators called from one module",
    )


def model_options(args: argparse.Namespace) -> Any:
    """The :class:`~dnnpart.frontends.sources.ModelOptions` of parsed arguments."""
    from dnnpart.frontends.sources import ModelOptions, parse_shape

    return ModelOptions(
        input_shapes=tuple(parse_shape(s) for s in getattr(args, "input_shape", []) or []),
        input_dtype=getattr(args, "input_dtype", None),
        training=bool(getattr(args, "training", False)),
        optimizer=getattr(args, "optimizer", None),
        precision=getattr(args, "precision", "fp32"),
        frontend=getattr(args, "frontend", "export"),
        config_file=getattr(args, "config", None),
        granularity=getattr(args, "granularity", "op"),
    )


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
    add_objective_args(p, stored_in_plan=True)
    add_method_args(
        p, default=None,
        method_help="method name (default by objective: throughput dp, or dpl where dp refuses "
        "the graph as too large, or pipeline with --schedule; latency ip; makespan pardnn; "
        "pipeline parmesan; iteration optcnn; see `dnnpart methods`)",
    )
    p.add_argument("--out", "-o", metavar="PLAN.json", help="write the plan (with its model) here")
    p.add_argument("--report", metavar="FILE.html", help="also write `dnnpart report`'s HTML page here")
    p.add_argument("--compare", metavar="M1,M2,...",
                   help="also run these methods on the same problem and print a comparison "
                        "(in --report too); the plan written is --method's")

    p = subparsers.add_parser("export", help="turn a plan (from `dnnpart plan`) into runnable artifacts")
    p.add_argument("plan", help="plan file written by `dnnpart plan -o` (any plan file with --graph)")
    p.add_argument(
        "--format",
        choices=("torch", "placement", "pipelining", "deepspeed", "megatron", "placement-text"),
        default="placement",
        help="torch: per-device stage modules; placement: operator -> device; "
        "pipelining: split points for torch.distributed.pipelining; deepspeed: PipelineModule parts; "
        "megatron: --pipeline-model-parallel-layout (layer-granular plans); placement-text: "
        "`name device` lines for every node (PARDNN's output)",
    )
    p.add_argument("--graph", metavar="GRAPH",
                   help="placement-text: the plan's graph (file or zoo:NAME), for plans not "
                        "written by `dnnpart plan`")
    p.add_argument("--cluster", metavar="SPEC",
                   help="placement-text with --graph: cluster (default: the plan file's)")
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
    p.add_argument(
        "--microbatches", type=int, help="micro-batches (default: the plan's, else 4)"
    )
    p.add_argument(
        "--schedule", choices=("gpipe", "1f1b"),
        help="training plans: torch.distributed.pipelining schedule (default: the plan's, else 1f1b)",
    )
    _add_trust_args(p)
    p.add_argument("--json", action="store_true")


#: Model specs a plan file may name and have followed: built-in, torchvision and hf: models
#: (no remote code) and ONNX files are data. Anything else (``module:`` imports and calls the
#: user's code; kinds added later are refused until listed here) needs ``--model SPEC`` or
#: ``--trust-plan``.
SAFE_SPECS = ("builtin:", "torchvision:", "hf:")  # hf: never sets trust_remote_code


def _add_trust_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", metavar="SPEC",
                   help="the model the plan was made for (default: the plan's own if it is "
                        "builtin:, torchvision:, hf: or an .onnx file; module: specs import code)")
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
    return resolve_model(
        args.model,
        input_shapes=shapes or None,
        input_dtype=args.input_dtype,
        frontend=getattr(args, "frontend", "export"),
        config_file=getattr(args, "config", None),
    )


def _import(args: argparse.Namespace, out: Renderer) -> tuple[ModelSource, ImportedModel, PricedCluster]:
    from dnnpart.frontends.sources import import_source

    priced = _priced_cluster(args.cluster, getattr(args, "specs", None))
    priced = replace(priced, cost_model=priced.cost_model.with_precision(args.precision))
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
            optimizer=getattr(args, "optimizer", None),
            granularity=args.granularity,
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
        "training_graph": "autograd" if imported.autograd else ("synthesised" if g.is_training else None),
        "orphan_backward_nodes": list(imported.orphans),
        "parameter_bytes": float(g.node_param_bytes().sum()),
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
    else:
        out.print("every operator has a cost formula")
    if s["orphan_backward_nodes"]:
        orphans = s["orphan_backward_nodes"]
        out.print(f"{len(orphans)} backward node(s) with no identified forward op (orphans): "
                  f"{', '.join(orphans[:5])}{' ...' if len(orphans) > 5 else ''}")


def _graph_dict(problem: Problem, imported: ImportedModel) -> dict[str, Any]:
    from dnnpart.io.dnn_partitioning import problem_to_dict

    data = problem_to_dict(problem)
    g = imported.graph
    ops = imported.ir.ops
    for v, node in enumerate(data["nodes"]):
        if imported.autograd:
            node["flops"] = float(imported.flops[v])
            continue
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


#: Fields of a plan's model block that may name local files (kept as absolute path + hash).
FILE_FIELDS = ("spec", "config", "specs", "cluster")


def _model_block(args: argparse.Namespace, source: ModelSource) -> dict[str, Any]:
    from dnnpart.io.file_refs import file_ref, is_file_spec

    block = _model_fields(args, source)
    files = {k: file_ref(block[k]) for k in FILE_FIELDS if is_file_spec(block.get(k))}
    for key, ref in files.items():  # the plan is usable from any directory
        block[key] = ref["path"]
    if files:
        block["files"] = files
    return block


def checked_block(block: dict[str, Any], path: str | Path, *, model: str | None = None) -> dict[str, Any]:
    """A plan's model block with its files found and verified (see :mod:`dnnpart.io.file_refs`).

    ``model`` (``--model``) replaces the plan's model spec, whose file is then not checked.
    """
    files = block.get("files")
    if files is None:
        return block
    if not isinstance(files, dict):
        raise FormatError(f"{path}: model.files: expected an object")
    from dnnpart.io.file_refs import resolve_ref

    out = dict(block)
    for key in FILE_FIELDS:
        if key in files and not (key == "spec" and model is not None):
            out[key] = str(resolve_ref(files[key], f"model.{key}", path))
    return out


def _model_fields(args: argparse.Namespace, source: ModelSource) -> dict[str, Any]:
    return {
        "spec": args.model,
        "input_shapes": [list(s) for s in source.input_shapes],
        "input_dtype": source.input_dtype,
        "training": bool(args.training),
        "optimizer": getattr(args, "optimizer", None),
        "precision": getattr(args, "precision", "fp32"),
        "granularity": getattr(args, "granularity", "op"),
        "frontend": source.frontend,
        "config": getattr(args, "config", None),
        "cluster": args.cluster,
        "specs": getattr(args, "specs", None),
        "schedule": getattr(args, "schedule", None),
        "microbatches": getattr(args, "microbatches", None),
        "objective": getattr(args, "objective", "throughput"),
        "training_form": getattr(args, "training_form", "pipedream"),
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
def _plan_method(args: argparse.Namespace, out: Renderer) -> bool:
    """Set ``args.method`` when none was named; whether DPL may stand in for a refusing DP."""
    if args.method is not None:
        return False
    if args.objective == "throughput" and args.schedule:
        args.method = "pipeline"
        out.note("method: pipeline (--schedule given: one range of operators per device, "
                 "backward with its forward, what the schedule runs)")
        return False
    args.method = DEFAULT_METHODS[args.objective]
    # the exact DP where its lattice fits, else DPL (said so); not when options were set for dp
    return args.method == "dp" and not args.options


def _plan_problem(args: argparse.Namespace, out: Renderer) -> tuple[Any, Any, PricedCluster, Problem]:
    """``(source, imported, priced cluster, problem)`` of ``plan``'s arguments.

    The iteration objective plans paper 3's layer graphs (``builtin:NAME``), not an imported
    operator graph: source and imported are ``None`` then.
    """
    from dnnpart.cli.args import objective_from_args
    from dnnpart.problem import Problem

    if args.objective == "iteration":
        from dnnpart.workflow import load_problem

        priced = _priced_cluster(args.cluster, getattr(args, "specs", None))
        objective = objective_from_args(args)
        problem = load_problem(args.model, cluster=priced.cluster, objective=objective,
                               model=model_options(args))
        return None, None, priced, problem
    source, imported, priced = _import(args, out)
    objective = objective_from_args(args)
    problem = Problem(graph=imported.graph, cluster=priced.cluster, name=imported.ir.name,
                      objective=objective)
    return source, imported, priced, problem


def cmd_plan(args: argparse.Namespace, out: Renderer) -> int:
    from dnnpart.cli.commands import print_plan, report_stop, solve_options
    from dnnpart.cli.main import dumps
    from dnnpart.evaluate import evaluate
    from dnnpart.io.dnn_partitioning import write_json_atomic
    from dnnpart.io.plan_files import plan_to_dict
    from dnnpart.plan import Status
    from dnnpart.solvers import get_method, solve

    auto = _plan_method(args, out)
    get_method(args.method)  # fail fast on an unknown method
    options = solve_options(args)  # typed by the method's schema, before any work
    compare = [m.strip() for m in (args.compare or "").split(",") if m.strip()]
    for name in compare:
        get_method(name)  # an unknown name fails before any work
    if args.out is not None:
        from dnnpart.limits import check_output_path

        check_output_path(args.out)
    source, imported, priced, problem = _plan_problem(args, out)
    progress = out.progress(args.method)
    with progress if progress is not None else contextlib.nullcontext():
        try:
            result = solve(problem, args.method, time_limit=args.time_limit, progress=progress,
                           deterministic=args.deterministic, **options)
        except ProblemTooLargeError as exc:
            if not auto:
                raise
            out.note(f"method: dpl (the default dp refused this graph: {exc}; dpl splits along "
                     "a linearization, no optimality guarantee; -m NAME picks another method)")
            args.method = "dpl"
            result = solve(problem, "dpl", time_limit=args.time_limit, progress=progress,
                           deterministic=args.deterministic)
    comparison = _compare(args, problem, result, compare, out) if compare else []
    if result.plan is not None and args.out:
        from dnnpart.cli.main import jsonable

        data = plan_to_dict(problem, result.plan, result)
        if source is not None:  # export, run and report re-import the model from this block
            data["model"] = _model_block(args, source)
        if comparison:  # `dnnpart report` shows it again
            data["comparison"] = jsonable(comparison)
        write_json_atomic(data, args.out)
    if result.plan is not None and args.report:
        from dnnpart.viz.report import ReportInput, build_report

        meta = {"method": result.method, "status": result.status.value, "bound": result.bound,
                "search_space": result.search_space, "model": args.model}
        Path(args.report).write_text(build_report(ReportInput(
            problem=problem, plan=result.plan, imported=imported, meta=meta,
            schedule=args.schedule or "1f1b", microbatches=args.microbatches or 4,
            comparison=comparison)), encoding="utf-8")
        out.note(f"report written to {args.report}")
    stopped = report_stop(out, result, args.out)
    if stopped is not None:
        return stopped
    summary = _summary(imported, priced) if imported is not None else {"model": args.model}
    if out.json_mode:
        payload: dict[str, Any] = {"import": summary, **result.to_dict()}
        if comparison:
            payload["comparison"] = comparison
        if result.plan is not None:
            payload["evaluation"] = evaluate(problem, result.plan).to_dict(problem)
        out.json(dumps(payload))
    else:
        if imported is not None:
            _print_summary(summary, out)
        out.print(out.result_line(result))
        print_plan(problem, result, out, unit="ms", labels=node_labels(imported))
        if comparison:
            out.print(comparison_table(comparison))
        if args.out and result.plan is not None:
            nxt = (f"; next: dnnpart run {args.out} / dnnpart export {args.out}" if source is not None
                   else f"; score it with dnnpart evaluate {args.model} {args.out} --objective iteration")
            out.note(f"plan written to {args.out}{nxt}")
    ok = result.plan is not None and result.status is not Status.UNKNOWN
    return EXIT_OK if ok else EXIT_NO_PLAN


def _compare(args: argparse.Namespace, problem: Problem, result: Any, names: list[str],
             out: Renderer) -> list[dict[str, Any]]:
    """Run the methods of ``--compare`` on the same problem: rows of the comparison table.

    A method that refuses the problem (too large, another objective) gets a row with its
    reason; the plan written is the main method's.
    """
    from dnnpart.cli.main import _one_line
    from dnnpart.errors import DnnpartError
    from dnnpart.solvers import solve
    from dnnpart.viz.report import comparison_rows

    entries: list[tuple[str, Any]] = [(result.method, result)]
    for name in names:
        if name == result.method:
            continue
        progress = out.progress(name)
        with progress if progress is not None else contextlib.nullcontext():
            try:
                other = solve(problem, name, time_limit=args.time_limit, progress=progress,
                              deterministic=args.deterministic)
            except (DnnpartError, ValueError) as exc:  # refused: say why in its row
                entries.append((name, _one_line(str(exc))))
                continue
        entries.append((name, other))
    return comparison_rows(entries)


def comparison_table(rows: list[dict[str, Any]]) -> Any:
    """The comparison of ``plan --compare`` as a rich table (the report shows the same rows)."""
    from rich.table import Table

    from dnnpart.cli.render import fmt, safe

    table = Table(title="Methods compared", title_justify="left")
    for col in ("method", "status", "objective", "bound", "gap", "vs best", "seconds", "note"):
        table.add_column(col, justify="left" if col in ("method", "status", "note") else "right")
    for r in rows:
        table.add_row(r["method"], r["status"], fmt(r["objective"]), fmt(r["bound"]),
                      "-" if r["gap"] is None else f"{r['gap']:.2%}", r["vs_best"],
                      "-" if r["seconds"] is None else f"{r['seconds']:.2f}", safe(str(r["note"])))
    return table


def node_labels(imported: ImportedModel | None) -> dict[str, str]:
    """Readable names of an imported model's nodes: ``module.path (node)`` where known."""
    if imported is None:
        return {}
    return {op.name: f"{op.module_path.replace('/', '.')} ({op.name})" for op in imported.ir.ops
            if op.module_path}


# -- export / run -------------------------------------------------------------------------
def load_planned_model(
    path: str | Path, *, model: str | None = None, trust: bool = False,
) -> tuple[ModelSource, ImportedModel, Problem, Plan, Any, dict[str, int]]:
    """Re-import the model a plan file was made for.

    Returns the source (with real weights), the imported model the plan refers to, the
    problem, the plan, the graph module to run (torch; ``None`` otherwise) and the device of
    every operator of that module.

    A model planned on the meta device (``hf:``) is captured twice: once as planned, to read
    the plan, and once with its seeded weights, to run. The two captures can differ in a few
    layout-only nodes (``contiguous`` after a transpose whose strides the meta kernels report
    differently); such a node runs where its producer runs (:func:`complete_placement`).

    ``model`` replaces the plan's model spec; without it a spec that would import code is
    refused unless ``trust`` (see :func:`plan_model_spec`).
    """
    from dnnpart.export import operator_devices
    from dnnpart.frontends.build import price_model
    from dnnpart.frontends.sources import capture, import_source, resolve_model
    from dnnpart.io import fields as f
    from dnnpart.io.plan_files import parse_plan
    from dnnpart.problem import Problem

    data = f.read_json(path)
    block = f.require_mapping(data, str(path)).get("model")
    if not isinstance(block, dict) or "spec" not in block:
        raise FormatError(f"{path}: model: missing; export and run need a plan written by `dnnpart plan -o`")
    block = checked_block(block, path, model=model)
    spec = plan_model_spec(block, path, model=model, trust=trust)
    priced = _priced_cluster(str(block.get("cluster", DEFAULT_CLUSTER)), block.get("specs"))
    priced = replace(priced, cost_model=priced.cost_model.with_precision(str(block.get("precision", "fp32"))))
    options: dict[str, Any] = {
        "input_shapes": block.get("input_shapes") or None,
        "input_dtype": block.get("input_dtype"),
        "frontend": str(block.get("frontend", "fx")),  # plans written before export was default
        "config_file": block.get("config"),
    }
    training = bool(block.get("training"))
    planned = resolve_model(spec, **options)
    gm = None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # already reported at import time
        if planned.is_torch and training and planned.frontend == "export":
            gm, _ = capture(planned)
            imported = import_source(
                planned, cost_model=priced.cost_model, training=True, optimizer=block.get("optimizer")
            )
        elif planned.is_torch:
            gm, ir = capture(planned)
            imported = price_model(ir, priced.cost_model, training=training)
        else:
            imported = import_source(planned, cost_model=priced.cost_model, training=training)
        if block.get("granularity") == "module":
            from dnnpart.frontends.build import by_module

            imported = by_module(imported)
    problem = Problem(graph=imported.graph, cluster=priced.cluster, name=imported.ir.name,
                      objective=_plan_objective(block, path))
    plan = parse_plan(data, problem, str(path))
    device_of = operator_devices(imported, plan)
    source = planned
    if planned.is_torch and spec.startswith("hf:"):
        # running needs weights: one seeded init, the same in every process
        source = resolve_model(spec, materialize=True, **options)
        gm, _ = capture(source)
    if gm is not None and training and planned.frontend == "export":
        from dnnpart.export.placement import align_forward

        fwd = [(op.name, op.source_type) for op in imported.ir.ops if op.name in device_of]
        renamed = align_forward(gm, fwd)
        device_of = {renamed[k]: d for k, d in device_of.items() if k in renamed}
    if gm is not None:
        device_of = complete_placement(gm, device_of)
    return source, imported, problem, plan, gm, device_of


def _plan_objective(block: dict[str, Any], path: str | Path) -> Any:
    """The objective a plan was made for (plans written before it was stored: throughput)."""
    from dnnpart.problem import Objective

    try:
        return Objective(kind=str(block.get("objective") or "throughput"),
                         training=str(block.get("training_form") or "pipedream"),
                         schedule=str(block.get("schedule") or "gpipe"),
                         microbatches=block.get("microbatches") or 4)
    except ValueError as exc:
        raise FormatError(f"{path}: model: {exc}") from None


def complete_placement(gm: Any, device_of: dict[str, int]) -> dict[str, int]:
    """Give every operator of ``gm`` missing from ``device_of`` its producer's device.

    An operator without placed producers takes its first placed consumer's device (device 0
    if it has none).
    """
    ops = [n for n in gm.graph.nodes if n.op in ("call_module", "call_function", "call_method")]
    placed = dict(device_of)
    missing = []
    for n in ops:
        if n.name in placed:
            continue
        dev = next((placed[a.name] for a in n.all_input_nodes if a.name in placed), None)
        if dev is None:
            missing.append(n)
        else:
            placed[n.name] = dev
    for n in reversed(missing):
        placed[n.name] = next((placed[u.name] for u in n.users if u.name in placed), 0)
    return {n.name: placed[n.name] for n in ops}


def cmd_export(args: argparse.Namespace, out: Renderer) -> int:
    from dnnpart.cli.main import dumps
    from dnnpart.export import pipelining_dict, placement_dict
    from dnnpart.io.dnn_partitioning import write_json_atomic

    if args.format == "placement-text":
        return _export_placement_text(args, out)
    if args.graph or args.cluster:
        raise FormatError("--graph/--cluster: only for --format placement-text")
    source, imported, problem, plan, gm, device_of = load_planned_model(
        args.plan, model=args.model, trust=args.trust_plan)
    names = [d.name for d in problem.cluster.devices]
    target = Path(args.out)
    info: dict[str, Any] = {"format": args.format, "out": str(target)}
    if args.format == "placement":
        write_json_atomic(placement_dict(problem, imported, plan), target)
    elif args.format in ("deepspeed", "megatron"):
        from dnnpart.export.layers import deepspeed_dict, megatron_dict

        layer_export = deepspeed_dict if args.format == "deepspeed" else megatron_dict
        data = layer_export(imported.ir, device_of, names)
        write_json_atomic(data, target)
        info["parts" if args.format == "deepspeed" else "layout"] = data.get(
            "parts", data.get("pipeline_model_parallel_layout")
        )
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


def _export_placement_text(args: argparse.Namespace, out: Renderer) -> int:
    """``name device`` lines from any plan file: with ``--graph``, else its embedded model."""
    from dnnpart.io.plan_files import plan_cluster, read_plan

    if args.graph:
        from dnnpart.cost import resolve_cluster
        from dnnpart.workflow import load_problem

        cluster = resolve_cluster(args.cluster).cluster if args.cluster else plan_cluster(args.plan)
        problem = load_problem(args.graph, cluster=cluster)
        plan = read_plan(args.plan, problem)
    else:
        if args.cluster:
            raise FormatError("--cluster: needs --graph")
        from dnnpart.io import fields as f

        data = f.require_mapping(f.read_json(args.plan), str(args.plan))
        block = data.get("model")
        if (not isinstance(block, dict) or "spec" not in block) and "graph" in data:
            # a plan of `dnnpart solve GRAPH -o`: its graph, a file found and checked by hash
            from dnnpart.cli.commands import solved_problem

            return _write_placement_text(args, out, *solved_problem(str(args.plan), data))
        if not isinstance(block, dict) or "spec" not in block:
            raise FormatError(f"{args.plan}: model: missing; give the plan's graph with --graph GRAPH")
        _, _, problem, plan, _, _ = load_planned_model(args.plan, model=args.model,
                                                       trust=args.trust_plan)
    return _write_placement_text(args, out, problem, plan)


def _write_placement_text(args: argparse.Namespace, out: Renderer, problem: Problem, plan: Plan) -> int:
    from dnnpart.cli.main import dumps
    from dnnpart.export.placement import placement_lines

    lines = placement_lines(problem, plan)
    target = Path(args.out)
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_text("".join(line + "\n" for line in lines))
    tmp.replace(target)
    if out.json_mode:
        out.json(dumps({"format": "placement-text", "out": str(target), "nodes": len(lines)}))
    else:
        out.print(f"exported placement-text to {target} ({len(lines)} nodes)")
    return EXIT_OK


def _op_level_method(data: Any) -> str | None:
    """The plan's method if it places single operators for the makespan objective (paper 2)."""
    method = data.get("method") if isinstance(data, dict) else None
    if not isinstance(method, str):
        return None
    from dnnpart.solvers.registry import available_methods

    for info in available_methods():
        if info.name == method and "makespan" in info.objectives:
            return method
    return None


def cmd_run(args: argparse.Namespace, out: Renderer) -> int:
    from dnnpart.cli.main import dumps
    from dnnpart.io import fields as f

    data = f.read_json(args.plan)
    method = _op_level_method(data)
    if method is not None:
        raise FormatError(
            f"{args.plan}: method {method} made an op-level placement for the makespan objective "
            "(paper 2); `dnnpart run` executes pipeline-stage plans of a torch model only -- "
            "score it with `dnnpart evaluate --objective makespan` or `dnnpart simulate`"
        )
    block = f.require_mapping(data, str(args.plan)).get("model")
    if isinstance(block, dict) and block.get("training"):
        from dnnpart.cli.train_cmd import run_training

        return run_training(args, out, block)
    if args.microbatches is None:
        args.microbatches = 4
    source, _, problem, _, gm, device_of = load_planned_model(
        args.plan, model=args.model, trust=args.trust_plan)
    if gm is None:
        raise FormatError(f"{args.plan}: `dnnpart run` needs a torch model, not {source.spec}")
    if args.microbatches < 1:
        raise FormatError(f"--microbatches {args.microbatches}: expected >= 1")
    import torch

    from dnnpart.export.runtime import run_distributed
    from dnnpart.export.stages import split_module
    from dnnpart.frontends.sources import example_inputs

    program = split_module(gm, device_of)
    if args.nproc is not None and args.nproc < len(program.devices):
        raise FormatError(f"--nproc {args.nproc}: the plan uses {len(program.devices)} devices")
    batches = [
        example_inputs(source.input_shapes, source.input_dtype, seed=i + 1, module=source.module)
        for i in range(args.microbatches)
    ]
    outputs = run_distributed(program, batches, nproc=args.nproc)
    torch.set_num_threads(1)
    with torch.no_grad():
        references = [source.module(*mb) for mb in batches]
    diffs = [_max_abs_diff(o, r) for o, r in zip(outputs, references, strict=True)]
    scale = max(_max_abs(r) for r in references)
    used = [problem.cluster.devices[d].name for d in program.devices]
    info = {
        "model": source.spec,
        "processes": args.nproc or len(program.devices),
        "devices_used": used,
        "stages": len(program.stages),
        "microbatches": len(batches),
        "max_abs_diff": max(diffs),
        "max_abs_reference": scale,
        "relative_diff": max(diffs) / scale if scale > 0 else max(diffs),
    }
    if out.json_mode:
        out.json(dumps(info))
    else:
        out.print(
            f"ran {info['stages']} stages on {len(program.devices)} devices "
            f"({', '.join(used)}) in {info['processes']} gloo processes, "
            f"{len(batches)} micro-batches; max |distributed - unpartitioned| = {info['max_abs_diff']:.3g} "
            f"({info['relative_diff']:.3g} x max |unpartitioned|)"
        )
    return EXIT_OK


def _max_abs(a: Any) -> float:
    import torch

    if isinstance(a, torch.Tensor):
        return float(a.double().abs().max()) if a.numel() and a.is_floating_point() else 0.0
    if isinstance(a, (list, tuple)):
        return max((_max_abs(x) for x in a), default=0.0)
    if isinstance(a, dict):
        return max((_max_abs(x) for x in a.values()), default=0.0)
    return 0.0


def _max_abs_diff(a: Any, b: Any) -> float:
    import torch

    if isinstance(a, torch.Tensor):
        return float((a.double() - b.double()).abs().max()) if a.numel() else 0.0
    if isinstance(a, (list, tuple)):
        return max((_max_abs_diff(x, y) for x, y in zip(a, b, strict=True)), default=0.0)
    if isinstance(a, dict):
        return max((_max_abs_diff(a[k], b[k]) for k in a), default=0.0)
    return 0.0 if a == b else float("inf")
