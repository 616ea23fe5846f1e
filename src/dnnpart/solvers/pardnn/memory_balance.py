"""Memory heuristic II (paper 2, §3.2.2): residual balancing and critical-path splitting.

**Memory of a node** (``mem(n)`` of Eq. 2, as the op emulator reads it): residual nodes
(``memory_class == residual``) hold ``param_bytes``; normal nodes hold their
``output_bytes``; reference (in-place) and control nodes hold nothing.

**Residual balancing.** With ``r_pe`` / ``n_pe`` the device's share of all residual / normal
memory, Eq. 5 asks ``K/2 (r_pe + n_pe) >= 1`` on every device. While it fails, a residual
node (with the reference ops that follow it) moves from the device of largest share to the
device of smallest share, provided the move lowers the larger of the two (so moves only go
"from the most loaded to the least loaded" and each node moves at most once). Candidates on a
device are taken latest-needed first: largest top level of their first consumer (the paper:
residuals of the first layers are critical, the rest can be communicated in time), then
larger memory, then lower id. A candidate that would overshoot is dropped. Stops when Eq. 5
holds (to 1e-9) or the most loaded device has no candidate left.

**Critical-path split.** The paper gives no threshold. We split when the largest primary's
memory exceeds ``threshold`` x the mean primary memory (default 2.0: one device would hold
more than twice its share). The deficit devices (memory below the mean, smallest first)
each receive one contiguous chunk taken from the tail of the largest primary, sized to bring
the receiver up to the mean, while the largest stays at or above the mean.
"""

from __future__ import annotations

import numpy as np

from dnnpart.graph import NORMAL, RESIDUAL, Graph
from dnnpart.solvers.pardnn.inputs import FloatArray, IntArray
from dnnpart.solvers.pardnn.slicing import Slicing

#: Default of ``cp_split_threshold``: largest primary memory / mean primary memory.
CP_SPLIT_THRESHOLD = 2.0


def node_memory(graph: Graph) -> tuple[FloatArray, FloatArray]:
    """``(residual, normal)`` bytes per node as described in the module docstring."""
    cls = graph.memory_classes()
    param, out = graph.node_param_bytes(), graph.node_output_bytes()
    res = np.where(cls == RESIDUAL, param, 0.0)
    nor = np.where(cls == NORMAL, out, 0.0)
    return res.astype(np.float64), nor.astype(np.float64)


def shares(device: IntArray, res: FloatArray, nor: FloatArray, k: int) -> FloatArray:
    """``r_pe + n_pe`` per device (a zero total contributes 0)."""
    out = np.zeros(k)
    for mem in (res, nor):
        total = float(mem.sum())
        if total > 0:
            out += np.bincount(device, weights=mem, minlength=k)[:k] / total
    return out


def eq5_holds(device: IntArray, res: FloatArray, nor: FloatArray, k: int, tol: float = 1e-9) -> bool:
    """Eq. 5 on every device: ``K / terms * (r_pe + n_pe) >= 1`` (terms = totals that are > 0)."""
    terms = int(res.sum() > 0) + int(nor.sum() > 0)
    if terms == 0:
        return True
    return bool(np.all(k / terms * shares(device, res, nor, k) >= 1 - tol))


def balance_residuals(
    device: IntArray,
    res: FloatArray,
    nor: FloatArray,
    k: int,
    *,
    need_time: FloatArray,
    variable: IntArray | None = None,
) -> int:
    """Move residual nodes until Eq. 5 holds (in place); returns the number of nodes moved.

    A node with ``variable >= 0`` follows its leader and never moves alone.

    Examples
    --------
    >>> import numpy as np
    >>> device = np.array([0, 0, 0, 1])
    >>> res = np.array([4.0, 4.0, 0.0, 0.0]); nor = np.array([0.0, 0.0, 1.0, 1.0])
    >>> balance_residuals(device, res, nor, 2, need_time=np.zeros(4)), device.tolist()
    (1, [1, 0, 0, 1])
    """
    tot_r, tot_n = float(res.sum()), float(nor.sum())
    if tot_r <= 0:
        return 0
    followers: dict[int, list[int]] = {}
    if variable is not None:
        for r in np.flatnonzero(variable >= 0).tolist():
            followers.setdefault(int(variable[r]), []).append(r)
    unit_res = res.copy()
    unit_nor = nor.copy()
    for owner, refs in followers.items():
        unit_res[owner] += res[refs].sum()
        unit_nor[owner] += nor[refs].sum()
    frac = unit_res / tot_r + (unit_nor / tot_n if tot_n > 0 else 0.0)
    cand = np.flatnonzero((res > 0) & (variable < 0)) if variable is not None else np.flatnonzero(res > 0)
    cand = cand[np.lexsort((cand, -res[cand], -need_time[cand]))]
    queues = [list(cand[device[cand] == d][::-1]) for d in range(k)]  # pop() = best first
    s = list(shares(device, res, nor, k))
    terms = 1 + int(tot_n > 0)
    goal = terms / k * (1 - 1e-9)  # Eq. 5: each device's share must reach terms / K
    moved = 0
    while True:
        a = max(range(k), key=lambda d: (s[d], -d))
        b = min(range(k), key=lambda d: (s[d], d))
        if s[b] >= goal or a == b:
            break
        queue = queues[a]
        while queue:
            node = int(queue.pop())
            if device[node] != a:
                continue
            f = float(frac[node])
            if s[b] + f < s[a]:
                device[node] = b
                for ref in followers.get(node, []):
                    device[ref] = b
                s[a] -= f
                s[b] += f
                moved += 1 + len(followers.get(node, []))
                break
        else:
            break
    return moved


def split_critical_path(slicing: Slicing, mem: FloatArray, threshold: float | None) -> tuple[Slicing, int]:
    """Give contiguous tail chunks of the largest primary to the primaries below the mean.

    Returns the new slicing and the number of nodes reassigned (0 = no split).

    Examples
    --------
    >>> import numpy as np
    >>> s = Slicing(cluster=np.array([0, 0, 0, 0, 1]), cl_ptr=np.array([0, 4, 5]),
    ...             cl_nodes=np.array([0, 1, 2, 3, 4]), k=2)
    >>> new, moved = split_critical_path(s, np.array([1.0, 1.0, 1.0, 1.0, 0.0]), 1.5)
    >>> moved, new.cluster.tolist()
    (2, [0, 0, 1, 1, 1])
    """
    k = slicing.k
    if threshold is None or threshold <= 0 or k < 2:
        return slicing, 0
    pm = np.array([float(mem[slicing.members(j)].sum()) for j in range(k)])
    mean = float(pm.mean())
    big = int(np.argmax(pm))
    if mean <= 0 or pm[big] <= threshold * mean:
        return slicing, 0
    cluster = slicing.cluster.copy()
    path = list(slicing.members(big))
    remaining = pm[big]
    moved = 0
    for j in (int(x) for x in np.argsort(pm, kind="stable")):
        if j == big or pm[j] >= mean or remaining <= mean or len(path) <= 1:
            continue
        want = min(mean - pm[j], remaining - mean)
        got = 0.0
        while len(path) > 1 and got < want:
            v = path.pop()
            cluster[v] = j
            got += float(mem[v])
            moved += 1
        remaining -= got
    order = np.argsort(cluster[slicing.cl_nodes], kind="stable")
    cl_nodes = slicing.cl_nodes[order]
    counts = np.bincount(cluster[cl_nodes], minlength=slicing.n_clusters)
    cl_ptr = np.zeros(slicing.n_clusters + 1, np.int64)
    np.cumsum(counts, out=cl_ptr[1:])
    return Slicing(cluster=cluster, cl_ptr=cl_ptr, cl_nodes=cl_nodes, k=k), moved
