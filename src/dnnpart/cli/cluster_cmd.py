"""``dnnpart cluster show SPEC``: devices, links and the routed bandwidth matrix of a cluster."""

from __future__ import annotations

import argparse
from typing import Any

from dnnpart.cli.output import EXIT_OK, check_outputs, dumps
from dnnpart.cli.render import Renderer, fmt_bytes


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``cluster`` (with its action ``show``)."""
    p: argparse.ArgumentParser = subparsers.add_parser(
        "cluster", help="inspect clusters: `dnnpart cluster show SPEC`")
    csub = p.add_subparsers(dest="cluster_command", required=True, metavar="ACTION")
    q = csub.add_parser("show", help="devices, links and the routed bandwidth matrix of a SPEC")
    q.add_argument("spec", help="cluster file, NxPRESET[+Mcpu] or GENERATOR:key=value,... "
                                "(generators: two-level, dgx1, mesh2d, torus2d, mesh3d, torus3d, "
                                "random_blk_1, random_blk_2, uniform_dist)")
    q.add_argument("--plot", metavar="OUT.png", help="heat map of the bandwidth matrix (matplotlib)")
    q.add_argument("--json", action="store_true")
    q.add_argument("--quiet", "-q", action="store_true", default=argparse.SUPPRESS,
                   help="no progress output on stderr")
    p.set_defaults(handler=cmd_cluster)
    return p


#: Largest cluster whose matrices and links ``cluster show --json`` prints in full; a larger
#: one gets its devices, link count, the first links and the distinct bandwidths with their
#: pair counts (a 4,096-device matrix as JSON is about 300 MB of text).
MAX_JSON_MATRIX_DEVICES = 256
#: Links a summarised cluster lists.
SHOWN_LINKS = 64


def _value_counts(matrix: Any) -> tuple[Any, Any]:
    """Distinct off-diagonal values of a square matrix (ascending) and how often each occurs,
    a block of rows at a time (a 4,096-device matrix needs no 128 MB copies).

    Examples
    --------
    >>> import numpy as np
    >>> vals, counts = _value_counts(np.array([[0.0, 2.0], [2.0, 0.0]]))
    >>> vals.tolist(), counts.tolist()
    ([2.0], [2])
    """
    import numpy as np

    d = matrix.shape[0]
    step = max(1, (1 << 20) // max(1, d))
    parts_v, parts_c = [], []
    for r0 in range(0, d, step):
        block = matrix[r0:r0 + step]
        keep = np.ones(block.shape, dtype=bool)
        rows = np.arange(block.shape[0])
        keep[rows, r0 + rows] = False
        v, c = np.unique(block[keep], return_counts=True)
        parts_v.append(v)
        parts_c.append(c)
    if not parts_v:
        return np.zeros(0), np.zeros(0, np.int64)
    allv, allc = np.concatenate(parts_v), np.concatenate(parts_c)
    vals, inverse = np.unique(allv, return_inverse=True)
    return vals, np.bincount(inverse, weights=allc, minlength=vals.size).astype(np.int64)


def _large_summary(c: Any) -> dict[str, Any]:
    """``cluster show --json`` of a cluster above :data:`MAX_JSON_MATRIX_DEVICES` devices."""
    import numpy as np

    vals, counts = _value_counts(c.bandwidth)
    top = np.argsort(-counts, kind="stable")[:SHOWN_LINKS]
    return {
        "name": c.name,
        "devices": [{"name": d.name, "kind": d.kind, "memory_bytes": d.memory_bytes,
                     "speed": d.speed, "group": int(g)}
                    for d, g in zip(c.devices, c.group.tolist(), strict=True)],
        "n_links": len(c.links),
        "links": [{"a": c.devices[x.a].name, "b": c.devices[x.b].name, "bandwidth": x.bandwidth,
                   "latency": x.latency, "kind": x.kind} for x in c.links[:SHOWN_LINKS]],
        "routed": bool(c.links),
        "bandwidth": None,
        "latency": None,
        "bandwidth_pairs": [{"bandwidth": float(vals[i]), "pairs": int(counts[i]) // 2}
                            for i in top.tolist()],
        "summarised": f"more than {MAX_JSON_MATRIX_DEVICES} devices: matrices left out, the "
                      f"first {SHOWN_LINKS} links and the most common bandwidths shown",
    }


def cmd_cluster(args: argparse.Namespace, out: Renderer) -> int:
    from rich.table import Table

    from dnnpart.cost import resolve_cluster
    from dnnpart.workflow.summary import cluster_summary

    check_outputs(out, {"--plot": args.plot})
    c = resolve_cluster(args.spec).cluster
    if args.plot is not None:
        from dnnpart.viz.cluster import plot_bandwidth

        plot_bandwidth(c, args.plot)
    if out.json_mode:
        out.json(dumps(cluster_summary(c) if c.n_devices <= MAX_JSON_MATRIX_DEVICES
                       else _large_summary(c)))
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
        vals, counts = _value_counts(c.bandwidth)
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
