"""Contract runs of consecutive nodes into one node each (e.g. aten ops -> module calls).

A group is an interval of the topological order (node ids), so the contracted graph stays a
DAG: an edge ``u -> v`` (``u < v``) maps to ``group(u) <= group(v)``. What the merged node
carries (choices):

* compute time, parameter and output bytes, memory: summed over the members;
* edges: a tensor crosses into a group once, however many members read it (parallel edges
  from one source into one group are merged keeping the largest), then edges between the
  same pair of groups are summed (distinct tensors);
* memory class: the members' if they agree, else ``normal``; ``is_backward``: any member;
  colocation class and layer id: the first member's; pin: the members' if they agree;
* ``forward_of``: the group of the forward op of the first member that has one (outside the
  group);
* module path: the members' longest common dotted prefix; layer attributes: those of the
  member with the largest accelerator time (the operator that defines the group's cost);
* name: the first member's; op type: the heaviest member's.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from dnnpart.graph.core import NO_CLASS, NO_FORWARD, NO_PIN, NORMAL, Graph, build_graph

IntArray = npt.NDArray[np.int64]


def consecutive_groups(keys: Sequence[str]) -> IntArray:
    """Group id per node: a new group starts where the key changes (``""`` keys stay alone).

    Examples
    --------
    >>> consecutive_groups(["a", "a", "b", "", "", "a"]).tolist()
    [0, 0, 1, 2, 3, 4]
    """
    group = np.zeros(len(keys), np.int64)
    current = 0
    for i in range(1, len(keys)):
        if keys[i] != keys[i - 1] or not keys[i]:
            current += 1
        group[i] = current
    return group


def contract_intervals(graph: Graph, group: npt.ArrayLike) -> Graph:
    """Merge the nodes of each group (``group[v]`` non-decreasing in ``v``; ids ``0..G-1``).

    Examples
    --------
    >>> from dnnpart.testing import chain_graph
    >>> g = contract_intervals(chain_graph(4, acc_time=1.0), [0, 0, 1, 1])
    >>> g.n_nodes, g.n_edges, g.time_on("accelerator").tolist()
    (2, 1, [2.0, 2.0])
    """
    grp = np.asarray(group, dtype=np.int64).reshape(-1)
    n = graph.n_nodes
    if grp.shape != (n,) or (n and (grp[0] != 0 or np.any(np.diff(grp) < 0) or np.any(np.diff(grp) > 1))):
        raise ValueError("group must number the nodes' intervals 0, 1, ... in node order")
    g_count = int(grp[-1]) + 1 if n else 0
    first = np.searchsorted(grp, np.arange(g_count))

    def summed(values: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        out = np.zeros((g_count, *values.shape[1:]))
        np.add.at(out, grp, values)
        return out

    acc = graph.compute_time[:, -1]
    heaviest = first.copy()
    best = np.full(g_count, -np.inf)
    for v in range(n):  # groups are short; a loop keeps ties on the first member
        if acc[v] > best[grp[v]]:
            best[grp[v]], heaviest[grp[v]] = acc[v], v

    src, dst = grp[graph.edge_sources()], grp[graph.succ_idx]
    keep = src != dst
    raw_src = graph.edge_sources()[keep]
    e_dst, e_cost, e_bytes = dst[keep], graph.edge_cost[keep], graph.edge_bytes[keep]
    # one crossing per (producer, target group): keep the largest of the parallel reads
    order = np.lexsort((-e_cost, e_dst, raw_src))
    raw_src, e_dst, e_cost, e_bytes = raw_src[order], e_dst[order], e_cost[order], e_bytes[order]
    first_read = np.ones(raw_src.size, np.bool_)
    first_read[1:] = (raw_src[1:] != raw_src[:-1]) | (e_dst[1:] != e_dst[:-1])
    raw_src, e_dst, e_cost, e_bytes = (
        raw_src[first_read], e_dst[first_read], e_cost[first_read], e_bytes[first_read]
    )
    e_src = grp[raw_src]

    def agreed(arr: npt.NDArray[np.int8] | None, fallback: int) -> npt.NDArray[np.int8] | None:
        if arr is None:
            return None
        lo = np.full(g_count, 127, np.int64)
        hi = np.full(g_count, -128, np.int64)
        np.minimum.at(lo, grp, arr.astype(np.int64))
        np.maximum.at(hi, grp, arr.astype(np.int64))
        return np.where(lo == hi, lo, fallback).astype(np.int8)

    forward_of = None
    if graph.forward_of is not None:
        forward_of = np.full(g_count, NO_FORWARD, np.int64)
        for v in np.flatnonzero(graph.forward_of != NO_FORWARD)[::-1]:  # the first one wins
            target = int(grp[graph.forward_of[v]])
            if target != grp[v]:
                forward_of[grp[v]] = target
    backward = np.zeros(g_count, np.bool_)
    np.logical_or.at(backward, grp, graph.is_backward)
    paths = None
    if graph.module_paths is not None:
        paths = [common_prefix([graph.module_paths[v] for v in range(a, b)])
                 for a, b in zip(first, np.append(first[1:], n), strict=True)]
    return build_graph(
        np.arange(g_count),
        e_src,
        e_dst,
        compute_time=summed(graph.compute_time),
        edge_cost=e_cost,
        edge_bytes=e_bytes,
        memory_bytes=summed(graph.memory_bytes),
        is_backward=backward,
        color_class=np.where(graph.color_class[first] >= 0, graph.color_class[first], NO_CLASS),
        layer_id=graph.layer_id[first],
        names=[graph.names[v] for v in first],
        op_types=None if graph.op_types is None else [graph.op_types[v] for v in heaviest],
        device_kinds=graph.device_kinds,
        duplicate_edges="sum",
        memory_class=agreed(graph.memory_class, NORMAL),
        param_bytes=None if graph.param_bytes is None else summed(graph.param_bytes),
        output_bytes=None if graph.output_bytes is None else summed(graph.output_bytes),
        pin=agreed(graph.pin, NO_PIN),
        forward_of=forward_of,
        module_paths=paths,
        layer_attrs=None if graph.layer_attrs is None else graph.layer_attrs.take(heaviest),
    )


def common_prefix(paths: list[str]) -> str:
    """Longest common dotted prefix (``["h.0.attn", "h.0.mlp"]`` -> ``"h.0"``)."""
    parts = [p.split(".") if p else [] for p in paths]
    common: list[str] = []
    for items in zip(*parts, strict=False):
        if len(set(items)) != 1:
            break
        common.append(items[0])
    return ".".join(common)
