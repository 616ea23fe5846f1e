"""``dnnpart map STAGES.json --cluster SPEC``: Parmesan's phase 2 on a given stage graph
(:func:`dnnpart.workflow.mapping.map_stage_graph`).

The stage file's schema is in :mod:`dnnpart.io.stages_file`; the topology is the cluster's
accelerators (routed matrices, :meth:`~dnnpart.solvers.parmesan.Topology.from_cluster`).
Options (``--set``): ``mapping=parmesan|cs|p2p-first|random``, ``instantiation=auto|p2p|
allreduce``, ``eps`` (or ``--gap``), ``deterministic``, ``node_limit``. Exit 0 with a mapping,
1 when every mapping needs a missing link (or none was found in time), 2 on bad input.
"""

from __future__ import annotations

import argparse
from typing import Any

from dnnpart.cli.args import parse_typed
from dnnpart.cli.output import EXIT_NO_PLAN, EXIT_OK, dumps
from dnnpart.cli.render import Renderer, fmt
from dnnpart.errors import UsageError


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
                                  "replicas; see docs/methods/parmesan.md)")
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
    p.set_defaults(handler=cmd_map)
    return p


def map_options() -> tuple[Any, ...]:
    """The schema of ``map --set``: Parmesan's own options (as ``solve -m parmesan --set``
    types them) plus ``node_limit``, typed by the parser ``solve --set`` uses.

    Examples
    --------
    >>> [o.name for o in map_options()]
    ['mapping', 'instantiation', 'eps', 'deterministic', 'node_limit']
    """
    from dnnpart.solvers import get_method
    from dnnpart.solvers.method import Option

    parmesan = get_method("parmesan")
    shared = tuple(parmesan.option(name) for name in ("mapping", "instantiation", "eps", "deterministic"))
    return (*shared, Option("node_limit", int, None, "search nodes per target at most", minimum=1))


def _options(args: argparse.Namespace) -> dict[str, Any]:
    from dnnpart.limits import check_seed, check_threads

    opts = parse_typed(args.options, map_options(), "map")
    opts = {k: v for k, v in opts.items() if v is not None}
    if args.gap is not None:
        opts["eps"] = args.gap
    if args.time_limit is not None:
        opts["time_limit"] = args.time_limit
    if args.threads is not None:
        opts["threads"] = check_threads(args.threads)
    if args.seed is not None:
        opts["seed"] = check_seed(args.seed)
    if "time_limit" in opts and not opts["time_limit"] > 0:
        raise UsageError(f"--time-limit must be > 0 seconds, got {opts['time_limit']}")
    eps = opts.get("eps", 1e-3)
    if not 0 < eps < 1:
        raise UsageError(f"--set eps / --gap: expected a number in (0, 1), got {eps!r}")
    return opts


def cmd_map(args: argparse.Namespace, out: Renderer) -> int:
    """Run ``dnnpart map``."""
    from rich.table import Table

    from dnnpart.workflow.mapping import map_stage_graph

    mapped = map_stage_graph(args.stages, args.cluster, **_options(args))
    payload = mapped.payload
    if out.json_mode:
        out.json(dumps(payload))
    else:
        out.print(f"{payload['mapping']} mapping, Eq. {'6' if payload['instantiation'] == 'p2p' else '7'} "
                  f"({payload['instantiation']}): {payload['status']}, max stage time "
                  f"{fmt(payload['objective'])}"
                  + ("" if payload.get("bound") is None else
                     f", bound {fmt(payload['bound'])}, gap {payload['gap']:.2%}"))
        out.print("baselines (max stage time): " + ", ".join(
            f"{k} {fmt(v)}" for k, v in mapped.baselines.items()))
        if mapped.found:
            table = Table(title="device of every stage replica (row = pipeline copy; "
                                "a column is the stage's ring order)", title_justify="left")
            table.add_column("copy")
            for s in range(len(payload["rings"])):
                table.add_column(f"s{s}")
            for r, row in enumerate(payload["device_of"]):
                table.add_row(str(r), *row)
            out.print(table)
    return EXIT_OK if mapped.found else EXIT_NO_PLAN
