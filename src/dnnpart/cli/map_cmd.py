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

from dnnpart.cli.args import parse_options
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


def _options(args: argparse.Namespace) -> dict[str, Any]:
    opts = parse_options(args.options)
    allowed = {"mapping", "instantiation", "eps", "deterministic", "node_limit"}
    unknown = sorted(set(opts) - allowed)
    if unknown:
        raise UsageError(f"--set {unknown[0]}: unknown option for map (expected one of "
                         f"{sorted(allowed)})")
    opts = {k: _typed(k, v) if k in _TYPES else v for k, v in opts.items()}
    if args.gap is not None:
        opts["eps"] = args.gap
    for name, value in (("time_limit", args.time_limit), ("threads", args.threads),
                        ("seed", args.seed)):
        if value is not None:
            opts[name] = value
    if "time_limit" in opts and not opts["time_limit"] > 0:
        raise UsageError(f"--time-limit must be > 0 seconds, got {opts['time_limit']}")
    if "threads" in opts and opts["threads"] < 1:
        raise UsageError(f"--threads must be >= 1, got {opts['threads']}")
    eps = opts.get("eps", 1e-3)
    if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not 0 < eps < 1:
        raise UsageError(f"--set eps / --gap: expected a number in (0, 1), got {eps!r}")
    if not isinstance(opts.get("deterministic", False), bool):
        raise UsageError(f"--set deterministic: expected true or false, got {opts['deterministic']!r}")
    nl = opts.get("node_limit")
    if nl is not None and (isinstance(nl, bool) or not isinstance(nl, int) or nl < 1):
        raise UsageError(f"--set node_limit: expected an integer >= 1, got {nl!r}")
    return opts


#: The types of map's numeric and boolean ``--set`` options (the rest are words).
_TYPES: dict[str, type] = {"eps": float, "deterministic": bool, "node_limit": int}


def _typed(key: str, text: str) -> Any:
    """``--set KEY=TEXT`` as the option's type; text that is not one is kept, and refused by
    the checks of :func:`_options`, which name the option.

    Examples
    --------
    >>> _typed("eps", "0.01"), _typed("deterministic", "true"), _typed("node_limit", "7")
    (0.01, True, 7)
    >>> _typed("eps", "small")
    'small'
    """
    kind = _TYPES[key]
    low = text.strip().lower()
    if kind is bool:
        return {"true": True, "1": True, "yes": True, "false": False, "0": False,
                "no": False}.get(low, text)
    try:
        return kind(low)
    except ValueError:
        return text


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
