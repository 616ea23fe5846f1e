"""Subcommands ``simulate`` (a plan through the simulators) and ``cluster show`` (a topology)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dnnpart.cli.render import Renderer
    from dnnpart.devices.cluster import Cluster

EXIT_OK, EXIT_NO_PLAN = 0, 1


def add_parsers(sub: Any, add_problem_args: Callable[[argparse.ArgumentParser], None]) -> None:
    p = sub.add_parser("simulate", help="simulate a plan: pipeline step (GPipe/1F1B) or op-level "
                                        "schedule, with memory; --trace writes a Chrome trace")
    add_problem_args(p)
    p.add_argument("plan", help="plan file")
    p.add_argument("--level", choices=("auto", "pipeline", "ops", "layerwise"), default="auto",
                   help="pipeline: stages (contiguous plans); ops: op-level emulation (paper 2); "
                        "layerwise: replay of a layer-wise strategy beside Eq. 1 (paper 3, "
                        "--objective iteration); auto: layerwise for plans with layer "
                        "configurations, pipeline when the plan is contiguous, else ops")
    p.add_argument("--contention", action="store_true",
                   help="ops: every physical link of a transfer's routed path carries one "
                        "transfer at a time (a device pair, where the matrices are given)")
    p.add_argument("--sync", choices=("after-backward", "eager"), default="after-backward",
                   help="layerwise: parameter sync leaves after the whole backward pass (Eq. 1's "
                        "step, default) or as soon as each layer's backward ends")
    p.add_argument("--trace", metavar="OUT.json",
                   help="write a Chrome trace (open in ui.perfetto.dev or chrome://tracing)")

    p = sub.add_parser("cluster", help="inspect clusters: `dnnpart cluster show SPEC`")
    csub = p.add_subparsers(dest="cluster_command", required=True, metavar="ACTION")
    q = csub.add_parser("show", help="devices, links and the routed bandwidth matrix of a SPEC")
    q.add_argument("spec", help="cluster file, NxPRESET[+Mcpu] or GENERATOR:key=value,... "
                                "(generators: two-level, dgx1, mesh2d, torus2d, mesh3d, torus3d, "
                                "random_blk_1, random_blk_2, uniform_dist)")
    q.add_argument("--plot", metavar="OUT.png", help="heat map of the bandwidth matrix (matplotlib)")
    q.add_argument("--json", action="store_true")
    q.add_argument("--quiet", "-q", action="store_true", default=argparse.SUPPRESS,
                   help="no progress output on stderr")


def cmd_simulate(args: argparse.Namespace, out: Renderer) -> int:
    from dnnpart import simulate
    from dnnpart.cli.commands import _problem
    from dnnpart.cli.main import dumps
    from dnnpart.cli.render import fmt, fmt_bytes
    from dnnpart.io import read_plan

    problem = _problem(args)
    plan = read_plan(args.plan, problem)
    level = args.level
    if level == "layerwise" or (level == "auto" and plan.layer_configs is not None):
        return _replay(args, out, problem, plan)
    stages = None
    if level in ("auto", "pipeline"):
        try:
            stages = simulate.stages_from_plan(problem, plan)
            level = "pipeline"
        except ValueError:
            if level == "pipeline":
                raise
            level = "ops"
    c = problem.cluster
    names = [d.name for d in c.devices]
    if level == "pipeline":
        assert stages is not None
        r = simulate.simulate_pipeline(
            stages[0], c, edges=stages[1], microbatches=args.microbatches, schedule=args.schedule,
            recompute=args.recompute, training=problem.graph.is_training)
        summary: dict[str, Any] = {"level": "pipeline", **r.to_dict(c)}
        timeline = r.timeline
        lines = [
            f"pipeline {args.schedule}, {args.microbatches} micro-batches: step time "
            f"[bold]{fmt(r.step_time)}[/], time per sample {fmt(r.time_per_sample)}, "
            f"bubble {r.bubble_fraction:.1%}, max stage time (paper 4 Eq. 5) {fmt(r.max_stage_time)}",
        ]
        lines += [f"  {names[d]}: " + ", ".join(f"{k} {fmt_bytes(v)}" for k, v in parts.items())
                  + f" ({r.peak_inflight[d]} micro-batches in flight at peak)"
                  for d, parts in sorted(r.memory.items())]
    else:
        if plan.is_replicated:
            raise ValueError("--level ops emulates one execution; the plan replicates stages")
        s = simulate.emulate_ops(problem.graph, c, plan.assignment, contention=args.contention)
        summary = {"level": "ops", "makespan": s.makespan,
                   "peak_memory_bytes": dict(zip(names, s.peak_memory.tolist(), strict=True)),
                   "transfers": int(s.transfers[0].shape[0])}
        timeline = s.timeline()
        lines = [f"op-level emulation: makespan [bold]{fmt(s.makespan)}[/], "
                 f"{summary['transfers']} transfers"]
        lines += [f"  {n}: peak memory {fmt_bytes(p)}" for n, p in zip(names, s.peak_memory, strict=True)]
    if args.trace:
        simulate.write_chrome_trace(timeline, args.trace)
        summary["trace"] = args.trace
    if out.json_mode:
        out.json(dumps(summary))
    else:
        for line in lines:
            out.print(line)
        if args.trace:
            out.note(f"trace written to {args.trace} (open it in ui.perfetto.dev)")
    return EXIT_OK


def _replay(args: argparse.Namespace, out: Renderer, problem: Any, plan: Any) -> int:
    """Paper 3: replay a layer-wise strategy task by task, beside its additive t_O."""
    from dnnpart.cli.main import dumps
    from dnnpart.evaluate.iteration import iteration_configs, iteration_setting
    from dnnpart.simulate import replay_strategy, write_chrome_trace

    if problem.objective.kind != "iteration":
        raise ValueError("--level layerwise replays layer-wise strategies: pass --objective iteration")
    layers, device, bandwidth = iteration_setting(problem)
    r = replay_strategy(layers, iteration_configs(problem, plan), device, bandwidth, sync=args.sync)
    summary = {"level": "layerwise", "sync": args.sync, "replay_s": r.makespan, "t_o_s": r.additive,
               "ratio": r.ratio,
               "bytes_per_step": r.moved_bytes, "tasks": len(r.timeline)}
    if args.trace:
        write_chrome_trace(r.timeline, args.trace)
        summary["trace"] = args.trace
    if out.json_mode:
        out.json(dumps(summary))
    else:
        out.print(f"layer-wise replay: step [bold]{1e3 * r.makespan:.3f} ms[/] beside t_O (Eq. 1) "
                  f"{1e3 * r.additive:.3f} ms (ratio {r.ratio:.3f}), {len(r.timeline)} tasks, "
                  f"sync {args.sync}")
        if args.trace:
            out.note(f"trace written to {args.trace} (open it in ui.perfetto.dev)")
    return EXIT_OK


def cluster_summary(cluster: Cluster) -> dict[str, Any]:
    """Devices, links and matrices of a cluster, JSON-ready (what `cluster show` prints)."""
    return {
        "name": cluster.name,
        "devices": [{"name": d.name, "kind": d.kind, "memory_bytes": d.memory_bytes,
                     "speed": d.speed, "group": int(g)}
                    for d, g in zip(cluster.devices, cluster.group.tolist(), strict=True)],
        "links": [{"a": cluster.devices[x.a].name, "b": cluster.devices[x.b].name,
                   "bandwidth": x.bandwidth, "latency": x.latency, "kind": x.kind}
                  for x in cluster.links],
        "routed": bool(cluster.links),
        "bandwidth": cluster.bandwidth.tolist(),
        "latency": cluster.latency.tolist(),
    }


def cmd_cluster(args: argparse.Namespace, out: Renderer) -> int:
    from rich.table import Table

    from dnnpart.cli.main import dumps
    from dnnpart.cli.render import fmt_bytes
    from dnnpart.cost import resolve_cluster

    c = resolve_cluster(args.spec).cluster
    s = cluster_summary(c)
    if args.plot:
        _plot(c, args.plot)
    if out.json_mode:
        out.json(dumps(s))
        return EXIT_OK
    out.print(f"[bold]{c.name}[/]: {c.n_devices} devices, {len(c.links)} links"
              + ("" if c.links else " (matrices given, not routed)"))
    d = c.n_devices
    if d <= 16:
        how = "routed by widest path" if c.links and "routed" not in c.name and c.name != "dgx1" \
            else "as given"
        if c.name == "dgx1 (routed)":
            how = "routed by widest path"
        t = Table(title=f"bandwidth (GB/s, {how})", title_justify="left")
        t.add_column("")
        for dev in c.devices:
            t.add_column(dev.name, justify="right")
        for i, dev in enumerate(c.devices):
            t.add_row(f"{dev.name} ({dev.kind}, {fmt_bytes(dev.memory_bytes)})",
                      *("-" if i == j else f"{c.bandwidth[i, j] / 1e9:.4g}" for j in range(d)))
        out.print(t)
    else:
        import numpy as np

        off = c.bandwidth[~np.eye(d, dtype=bool)]
        vals, counts = np.unique(off, return_counts=True)
        out.print("bandwidth values (GB/s: pairs): "
                  + ", ".join(f"{v / 1e9:.4g}: {n // 2}"
                              for v, n in zip(vals[:12], counts[:12], strict=False)))
    if c.links and len(c.links) <= 64:
        lt = Table(title="links", title_justify="left")
        for col in ("a", "b", "GB/s", "latency s", "kind"):
            lt.add_column(col)
        for x in c.links:
            lt.add_row(c.devices[x.a].name, c.devices[x.b].name, f"{x.bandwidth / 1e9:.4g}",
                       f"{x.latency:.3g}", x.kind)
        out.print(lt)
    if args.plot:
        out.note(f"heat map written to {args.plot}")
    return EXIT_OK


def _plot(cluster: Cluster, path: str) -> None:
    from dnnpart.errors import MissingDependencyError

    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise MissingDependencyError("--plot needs matplotlib (pip install 'dnnpart[viz]')") from None
    import numpy as np

    bw = cluster.bandwidth.copy()
    np.fill_diagonal(bw, np.nan)
    fig, ax = plt.subplots(figsize=(6, 5))
    im = ax.imshow(bw / 1e9, cmap="viridis")
    fig.colorbar(im, ax=ax, label="routed bandwidth (GB/s)")
    ax.set_title(f"{cluster.name}: widest-path bandwidth")
    ax.set_xlabel("device")
    ax.set_ylabel("device")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
