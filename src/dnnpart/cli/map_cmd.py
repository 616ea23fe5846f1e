"""``dnnpart map STAGES.json --cluster SPEC``: Parmesan's phase 2 on a given stage graph.

The stage file's schema is in :mod:`dnnpart.io.stages_file`; the topology is the cluster's
accelerators (routed matrices, :meth:`~dnnpart.solvers.parmesan.Topology.from_cluster`).
Options (``--set``): ``mapping=parmesan|cs|p2p-first|random``, ``instantiation=auto|p2p|
allreduce``, ``eps`` (or ``--gap``), ``deterministic``, ``node_limit``. Exit 0 with a mapping,
1 when every mapping needs a missing link (or none was found in time), 2 on bad input.
"""

from __future__ import annotations

import argparse
import math
from typing import Any


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``map`` subcommand.

    Examples
    --------
    >>> parser = argparse.ArgumentParser()
    >>> p = add_parser(parser.add_subparsers(dest="command"))
    >>> parser.parse_args(["map", "st.json", "--cluster", "mesh2d:x=2,y=2"]).cluster
    'mesh2d:x=2,y=2'
    """
    p: argparse.ArgumentParser = subparsers.add_parser(
        "map", help="map a stage graph's pipeline copies onto a topology (paper 4, phase 2)")
    p.add_argument("stages", help="stage-graph JSON (per-stage compute, param_bytes, comm_bytes, "
                                  "replicas; see docs/parmesan.md)")
    p.add_argument("--cluster", metavar="SPEC", required=True,
                   help="cluster file, NxPRESET or GENERATOR:key=value,... (its accelerators)")
    p.add_argument("--set", dest="options", action="append", default=[], metavar="KEY=VALUE",
                   help="mapping=parmesan|cs|p2p-first|random, instantiation=auto|p2p|allreduce, "
                        "eps=1e-3, deterministic=true, node_limit=N")
    p.add_argument("--time-limit", type=float, metavar="S", help="stop the search after S seconds")
    p.add_argument("--threads", type=int, metavar="N", help="worker processes (default 1)")
    p.add_argument("--seed", type=int, metavar="N", help="seed of the random mapping (default 0)")
    p.add_argument("--gap", type=float, metavar="G", help="relative gap to stop at (default 1e-3)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    return p


def _options(args: argparse.Namespace) -> dict[str, Any]:
    from dnnpart.cli.commands import parse_options

    opts = parse_options(args.options)
    allowed = {"mapping", "instantiation", "eps", "deterministic", "node_limit"}
    unknown = sorted(set(opts) - allowed)
    if unknown:
        raise ValueError(f"--set {unknown[0]}: unknown option for map (expected one of "
                         f"{sorted(allowed)})")
    if args.gap is not None:
        opts["eps"] = args.gap
    for name, value in (("time_limit", args.time_limit), ("threads", args.threads),
                        ("seed", args.seed)):
        if value is not None:
            opts[name] = value
    if "time_limit" in opts and not opts["time_limit"] > 0:
        raise ValueError(f"--time-limit must be > 0 seconds, got {opts['time_limit']}")
    if "threads" in opts and opts["threads"] < 1:
        raise ValueError(f"--threads must be >= 1, got {opts['threads']}")
    eps = opts.get("eps", 1e-3)
    if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not 0 < eps < 1:
        raise ValueError(f"--set eps / --gap: expected a number in (0, 1), got {eps!r}")
    if not isinstance(opts.get("deterministic", False), bool):
        raise ValueError(f"--set deterministic: expected true or false, got {opts['deterministic']!r}")
    nl = opts.get("node_limit")
    if nl is not None and (isinstance(nl, bool) or not isinstance(nl, int) or nl < 1):
        raise ValueError(f"--set node_limit: expected an integer >= 1, got {nl!r}")
    return opts


def cmd_map(args: argparse.Namespace, out: Any) -> int:
    """Run ``dnnpart map``."""
    from rich.table import Table

    from dnnpart.cli.main import EXIT_NO_PLAN, EXIT_OK, dumps
    from dnnpart.cli.render import fmt
    from dnnpart.cost import resolve_cluster
    from dnnpart.io.stages_file import read_stages
    from dnnpart.pricing.stages import max_stage_time
    from dnnpart.solvers.parmesan import Topology, map_stages
    from dnnpart.solvers.parmesan.baselines import cs_mapping, p2p_first_mapping, random_mapping
    from dnnpart.solvers.parmesan.cost import choose_instantiation

    opts = _options(args)
    stages = read_stages(args.stages)
    cluster = resolve_cluster(args.cluster).cluster
    topo = Topology.from_cluster(cluster)
    if topo.n_devices != stages.n_devices:
        raise ValueError(f"--cluster: the stage graph needs S * R = {stages.n_stages} * "
                         f"{stages.replicas} = {stages.n_devices} accelerators, the cluster has "
                         f"{topo.n_devices}")
    mapping = opts.pop("mapping", "parmesan")
    inst = opts.pop("instantiation", "auto")
    if mapping not in ("parmesan", "cs", "p2p-first", "random"):
        raise ValueError(f"--set mapping: expected parmesan, cs, p2p-first or random, got {mapping!r}")
    if inst not in ("auto", "p2p", "allreduce"):
        raise ValueError(f"--set instantiation: expected auto, p2p or allreduce, got {inst!r}")
    kind = choose_instantiation(stages) if inst == "auto" else inst
    seed = opts.get("seed", 0)
    baselines = {"cs": cs_mapping(stages), "p2p-first": p2p_first_mapping(stages),
                 "random": random_mapping(stages, seed)}
    base_obj = {k: max_stage_time(stages, topo, m, kind) for k, m in baselines.items()}
    if mapping == "parmesan":
        res = map_stages(stages, topo, instantiation=kind, eps=opts.get("eps", 1e-3),
                         time_limit=opts.get("time_limit"), threads=opts.get("threads", 1),
                         deterministic=opts.get("deterministic", False),
                         node_limit=opts.get("node_limit"), seed=seed)
        device_of = res.device_of
        payload: dict[str, Any] = {
            "mapping": mapping, "status": res.status.value, "instantiation": res.instantiation,
            "objective": res.objective if math.isfinite(res.objective) else None,
            "bound": res.bound if math.isfinite(res.bound) else None,
            "gap": res.gap if math.isfinite(res.gap) else None,
            "wall_time_s": res.wall_time_s, "search_nodes": res.n_nodes}
    else:
        device_of = baselines[mapping]
        value = base_obj[mapping]
        payload = {"mapping": mapping, "status": "heuristic", "instantiation": kind,
                   "objective": value if math.isfinite(value) else None, "bound": None,
                   "gap": None}
    names = [cluster.devices[a].name for a in cluster.accelerators]
    payload["baselines"] = {k: (v if math.isfinite(v) else None) for k, v in base_obj.items()}
    if device_of is not None:
        payload["device_of"] = [[names[int(d)] for d in row] for row in device_of]
        payload["rings"] = [[names[int(d)] for d in device_of[:, s]]
                            for s in range(stages.n_stages)]
    if out.json_mode:
        out.json(dumps(payload))
    else:
        out.print(f"{mapping} mapping, Eq. {'6' if payload['instantiation'] == 'p2p' else '7'} "
                  f"({payload['instantiation']}): {payload['status']}, max stage time "
                  f"{fmt(payload['objective'])}"
                  + ("" if payload.get("bound") is None else
                     f", bound {fmt(payload['bound'])}, gap {payload['gap']:.2%}"))
        out.print("baselines (max stage time): " + ", ".join(
            f"{k} {fmt(v)}" for k, v in base_obj.items()))
        if device_of is not None:
            table = Table(title="device of every stage replica (row = pipeline copy; "
                                "a column is the stage's ring order)", title_justify="left")
            table.add_column("copy")
            for s in range(stages.n_stages):
                table.add_column(f"s{s}")
            for r, row in enumerate(payload["device_of"]):
                table.add_row(str(r), *row)
            out.print(table)
    return EXIT_OK if device_of is not None else EXIT_NO_PLAN
