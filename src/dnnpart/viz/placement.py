"""The placement drawn on the graph, coloured by device: an inline SVG for the HTML report.

Choices (also in docs/report.md):

* training graphs are drawn by their forward part: a backward node runs where its forward
  partner runs (colocation), so it adds nothing to the picture;
* up to ``max_units`` (default 120) nodes are drawn one by one (a dot each, the name in its
  tooltip); bigger graphs are contracted to modules -- one box per (module path prefix,
  device), the deepest prefix that gives at most ``max_units`` boxes -- or, without module
  paths, to runs of consecutive operators on one device;
* layout: units in topological order (node ids are one; a unit sits at its median node) fill a grid of
  24 cells a row, alternate rows running right to left so that a chain stays connected; edges
  are straight lines between units (skip connections cross rows).

No matplotlib and no network: plain SVG text.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence

import numpy as np

from dnnpart.plan import Plan
from dnnpart.problem import Problem

#: Colours of devices 0, 1, ... (Tableau 10; repeats after ten devices).
PALETTE = ("#4C78A8", "#F58518", "#54A24B", "#E45756", "#72B7B2", "#EECA3B", "#B279A2",
           "#FF9DA6", "#9D755D", "#BAB0AC")
COLUMNS_PER_ROW = 24


def _units(problem: Problem, plan: Plan, modules: Sequence[str] | None,
           max_units: int) -> tuple[np.ndarray, list[str], str]:
    """``(unit of every drawn node (-1: not drawn), unit labels, how it was contracted)``."""
    g = problem.graph
    drawn = ~np.asarray(g.is_backward, dtype=bool)
    nodes = np.flatnonzero(drawn)
    unit = np.full(g.n_nodes, -1, dtype=np.int64)
    device = np.asarray(plan.assignment, dtype=np.int64)
    if nodes.size <= max_units:
        unit[nodes] = np.arange(nodes.size)
        return unit, [g.names[int(v)] for v in nodes], "one dot per operator"
    if modules is not None and any(modules[int(v)] for v in nodes):
        depth = max(len(m.split(".")) for m in modules)
        best: tuple[np.ndarray, list[str]] | None = None
        for d in range(1, depth + 1):
            keys: dict[tuple[str, int], int] = {}
            trial = unit.copy()
            for v in nodes:
                path = ".".join(modules[int(v)].split(".")[:d]) or "(top level)"
                trial[v] = keys.setdefault((path, int(device[v])), len(keys))
            if len(keys) > max_units and best is not None:
                break
            best = (trial, [k[0] for k in keys])
            if len(keys) > max_units:
                break
        assert best is not None
        return best[0], best[1], "contracted to modules (one box per module and device)"
    # runs of consecutive forward operators on one device, cut into at most max_units pieces
    size = math.ceil(nodes.size / max_units)
    labels: list[str] = []
    run_start = 0
    for i, v in enumerate(nodes):
        if i == 0 or device[v] != device[nodes[i - 1]] or i - run_start >= size:
            run_start = i
            labels.append(g.names[int(v)])
        unit[v] = len(labels) - 1
    return unit, labels, "contracted to runs of consecutive operators on one device"


def placement_svg(problem: Problem, plan: Plan, *, modules: Sequence[str] | None = None,
                  max_units: int = 120, width: int = 1000) -> str:
    """An ``<svg>`` element: the graph's (forward) nodes coloured by their device.

    ``modules``: the module path of every node (``""`` where unknown), used to contract big
    graphs.

    Examples
    --------
    >>> from dnnpart.testing import chain_problem
    >>> p = chain_problem([1.0, 2.0, 3.0], n_accelerators=2)
    >>> svg = placement_svg(p, Plan(assignment=[0, 0, 1]))
    >>> svg.startswith("<svg") and svg.count("<circle") == 3 and "acc1" in svg
    True
    """
    g, c = problem.graph, problem.cluster
    device = np.asarray(plan.assignment, dtype=np.int64)
    unit, labels, how = _units(problem, plan, modules, max_units)
    n_units = len(labels)
    unit_device = np.zeros(n_units, dtype=np.int64)
    members = np.zeros(n_units, dtype=np.int64)
    for v in np.flatnonzero(unit >= 0):
        u = int(unit[v])
        unit_device[u] = device[v]
        members[u] += 1
    # one cell per unit, in topological order, along a serpentine of rows
    # a unit sits at its median node: node ids are a topological order, and a module's weight
    # preparation (transposes a training graph hoists to the start) should not drag it there
    placed = np.flatnonzero(unit >= 0)
    by_unit = placed[np.argsort(unit[placed], kind="stable")]
    bounds = np.searchsorted(unit[by_unit], np.arange(n_units + 1))
    first = np.array([int(np.median(by_unit[bounds[u]:bounds[u + 1]])) for u in range(n_units)],
                     dtype=np.int64)
    rank = np.empty(n_units, dtype=np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(n_units)
    row, k = rank // COLUMNS_PER_ROW, rank % COLUMNS_PER_ROW
    k = np.where(row % 2 == 1, COLUMNS_PER_ROW - 1 - k, k)  # a chain stays connected across rows
    n_rows = int(row.max()) + 1 if n_units else 1
    boxes = n_units < g.n_nodes - int(np.asarray(g.is_backward).sum())  # contracted: labelled boxes
    dx = (width - 40) / COLUMNS_PER_ROW
    dy = 44.0 if boxes else 30.0
    x = 20 + (k + 0.5) * dx
    y = 40 + (row + 0.5) * dy
    height = 40 + n_rows * dy
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height:.0f}" '
             f'width="100%" role="img" aria-label="placement on the graph">']
    # legend: the devices the plan uses
    used = sorted(set(device.tolist()))
    for i, d in enumerate(used):
        lx = 20 + i * 110
        parts.append(f'<rect x="{lx}" y="8" width="14" height="14" fill="{PALETTE[d % len(PALETTE)]}"/>'
                     f'<text x="{lx + 18}" y="20" font-size="12">{html.escape(c.devices[d].name)}</text>')
    # edges between units
    # the CSR predecessor lists as (source, target) pairs
    dst = np.repeat(np.arange(g.n_nodes), np.diff(g.pred_ptr))
    src = np.asarray(g.pred_idx, dtype=np.int64)
    pairs = {(int(unit[a]), int(unit[b])) for a, b in zip(src.tolist(), dst.tolist(), strict=True)
             if unit[a] >= 0 and unit[b] >= 0 and unit[a] != unit[b]}
    for a, b in sorted(pairs):
        parts.append(f'<line x1="{x[a]:.1f}" y1="{y[a]:.1f}" x2="{x[b]:.1f}" y2="{y[b]:.1f}" '
                     'stroke="#999" stroke-opacity="0.5" stroke-width="1"/>')
    for u in range(n_units):
        d = int(unit_device[u])
        colour = PALETTE[d % len(PALETTE)]
        tip = html.escape(f"{labels[u]} on {c.devices[d].name}"
                          + (f" ({members[u]} operators)" if boxes else ""))
        if boxes:
            w, h = dx - 4, dy - 6
            short = html.escape(".".join(labels[u].split(".")[-2:])[-11:])
            parts.append(f'<g><title>{tip}</title><rect x="{x[u] - w / 2:.1f}" y="{y[u] - h / 2:.1f}" '
                         f'width="{w:.1f}" height="{h:.1f}" rx="4" fill="{colour}"/>'
                         f'<text x="{x[u]:.1f}" y="{y[u] + 4:.1f}" font-size="9" text-anchor="middle" '
                         f'fill="white">{short}</text></g>')
        else:
            parts.append(f'<circle cx="{x[u]:.1f}" cy="{y[u]:.1f}" r="6" fill="{colour}">'
                         f"<title>{tip}</title></circle>")
    parts.append(f'<text x="{width - 20}" y="20" font-size="11" text-anchor="end" fill="#666">'
                 f"{html.escape(how)}; {n_units} drawn</text>")
    parts.append("</svg>")
    return "".join(parts)
