# mypy: allow-untyped-defs
"""Numba kernels of PARDNN (paper 2): levels, slicing, Fenwick trees and LFLAM mapping.

Every kernel becomes a numba dispatcher on the first call of any of them (they call each
other; :class:`dnnpart._jit.ModuleKernels`); ``.py_func`` is the plain-Python
twin used by the tests. Nodes are topologically numbered (every edge ``u -> v`` has
``u < v``), so forward and reverse index order are topological orders. The artificial source
and sink of the paper carry no weight and no communication, so they are left implicit: a
node without live predecessors has top level 0, one without live successors has bottom level
equal to its own weight.
"""

from __future__ import annotations

import numpy as np

from dnnpart._jit import ModuleKernels

# compiled together on first call (they call each other), so importing this module stays cheap
kernel = ModuleKernels(globals())


# -- levels --------------------------------------------------------------------------------
@kernel
def top_levels(succ_ptr, succ_idx, comp, comm, alive):
    """tl(v): heaviest path (comp + comm) from the source to ``v`` excluding ``v``, over live nodes."""
    n = comp.shape[0]
    tl = np.zeros(n)
    for u in range(n):
        if not alive[u]:
            continue
        base = tl[u] + comp[u]
        for e in range(succ_ptr[u], succ_ptr[u + 1]):
            v = succ_idx[e]
            if alive[v]:
                c = base + comm[e]
                if c > tl[v]:
                    tl[v] = c
    return tl


@kernel
def bottom_levels(succ_ptr, succ_idx, comp, comm, alive):
    """bl(u): heaviest path from ``u`` (included) to the sink, over live nodes; 0 for dead ones."""
    n = comp.shape[0]
    bl = np.zeros(n)
    for u in range(n - 1, -1, -1):
        if not alive[u]:
            continue
        best = 0.0
        for e in range(succ_ptr[u], succ_ptr[u + 1]):
            v = succ_idx[e]
            if alive[v]:
                c = comm[e] + bl[v]
                if c > best:
                    best = c
        bl[u] = comp[u] + best
    return bl


# -- slicing (Alg. 1) ------------------------------------------------------------------------
@kernel
def follow_path(start, succ_ptr, succ_idx, comm, bl, alive, out, pos):
    """Walk from ``start`` to the live successor maximising comm + bl until a dead end.

    Visited nodes are killed and written to ``out[pos:]``; returns the new ``pos``. With exact
    bottom levels this walk is a heaviest path from ``start`` (bl is the DP value).
    """
    cur = start
    while True:
        alive[cur] = False
        out[pos] = cur
        pos += 1
        best = -1.0
        nxt = -1
        for e in range(succ_ptr[cur], succ_ptr[cur + 1]):
            v = succ_idx[e]
            if alive[v]:
                c = comm[e] + bl[v]
                if c > best:
                    best = c
                    nxt = v
        if nxt < 0:
            return pos
        cur = nxt


@kernel
def slice_primaries(succ_ptr, succ_idx, comp, comm, alive, k, cluster, order_nodes, ptr, c0, pos):
    """K primary clusters, each a heaviest path of the live graph with levels recomputed.

    ``alive`` is updated in place; clusters ``c0..c0+k-1`` are written into ``cluster``
    (node -> cluster), ``order_nodes[pos:]`` (nodes in path order) and ``ptr`` (cluster
    boundaries). A primary is empty when the graph is exhausted first. Returns the fill
    position. (Linear clustering calls it in batches with ``c0, pos`` carried over.)
    """
    n = comp.shape[0]
    for jj in range(k):
        j = c0 + jj
        bl = bottom_levels(succ_ptr, succ_idx, comp, comm, alive)
        start = -1
        best = -1.0
        for u in range(n):
            if alive[u] and bl[u] > best:
                best = bl[u]
                start = u
        if start >= 0:
            end = follow_path(start, succ_ptr, succ_idx, comm, bl, alive, order_nodes, pos)
            for i in range(pos, end):
                cluster[order_nodes[i]] = j
            pos = end
        ptr[j + 1] = pos
    return pos


@kernel
def slice_secondaries(order, succ_ptr, succ_idx, comm, bl, alive, cluster, order_nodes, ptr, pos, c):
    """Secondary linear clusters with the stale levels: start at each live node of ``order``.

    Returns the number of clusters (primaries included).
    """
    for i in range(order.shape[0]):
        u = order[i]
        if not alive[u]:
            continue
        end = follow_path(u, succ_ptr, succ_idx, comm, bl, alive, order_nodes, pos)
        for j in range(pos, end):
            cluster[order_nodes[j]] = c
        pos = end
        c += 1
        ptr[c] = pos
    return c


@kernel
def span_bounds(succ_ptr, succ_idx, comp, tl):
    """Per node: latest finish (tl + comp) of its predecessors and earliest tl of its successors.

    A node without predecessors gets 0, one without successors ``inf``.
    """
    n = comp.shape[0]
    pred_fin = np.zeros(n)
    succ_start = np.full(n, np.inf)
    for u in range(n):
        fin = tl[u] + comp[u]
        for e in range(succ_ptr[u], succ_ptr[u + 1]):
            v = succ_idx[e]
            if fin > pred_fin[v]:
                pred_fin[v] = fin
            if tl[v] < succ_start[u]:
                succ_start[u] = tl[v]
    return pred_fin, succ_start


# -- Fenwick trees ---------------------------------------------------------------------------
@kernel
def fw_add(tree, i, delta):
    """Add ``delta`` at position ``i`` (0-based) of a Fenwick tree of size ``len(tree) - 1``."""
    i += 1
    m = tree.shape[0]
    while i < m:
        tree[i] += delta
        i += i & (-i)


@kernel
def fw_prefix(tree, i):
    """Sum of positions ``[0, i)``."""
    s = 0.0
    while i > 0:
        s += tree[i]
        i -= i & (-i)
    return s


@kernel
def fw_range(tree, lo, hi):
    """Sum of positions ``[lo, hi)``; 0 when empty."""
    if hi <= lo:
        return 0.0
    return fw_prefix(tree, hi) - fw_prefix(tree, lo)


# -- LFLAM (Alg. 2) --------------------------------------------------------------------------
@kernel
def cluster_comm(c, cl_ptr, cl_nodes, cluster, device, succ_ptr, succ_idx, pred_ptr, pred_idx,
                 pred_edge, comm, out):
    """Communication of cluster ``c`` with each device (into ``out``).

    Devices at or beyond ``len(out)`` (pinned nodes on devices outside the K mapped onto)
    count in the total only. Returns (total external communication, communication with still unmapped nodes).
    """
    out[:] = 0.0
    total = 0.0
    unmapped = 0.0
    for i in range(cl_ptr[c], cl_ptr[c + 1]):
        u = cl_nodes[i]
        for e in range(succ_ptr[u], succ_ptr[u + 1]):
            v = succ_idx[e]
            if cluster[v] != c:
                w = comm[e]
                total += w
                d = device[v]
                if d < 0:
                    unmapped += w
                elif d < out.shape[0]:
                    out[d] += w
        for j in range(pred_ptr[u], pred_ptr[u + 1]):
            v = pred_idx[j]
            if cluster[v] != c:
                w = comm[pred_edge[j]]
                total += w
                d = device[v]
                if d < 0:
                    unmapped += w
                elif d < out.shape[0]:
                    out[d] += w
    return total, unmapped


@kernel
def overlap_work(trees, lo, hi):
    """Work of the nodes whose run ``[tl, tl + comp)`` meets a span, from a pair of trees.

    ``trees[0]`` holds the work by start rank, ``trees[1]`` by finish rank; ``hi`` counts the
    levels below the span's end and ``lo`` those at or below its start, so the nodes that
    start before the end minus those that finish by the start are exactly the overlapping
    ones (an empty span has ``lo = hi = 0``).
    """
    return fw_prefix(trees[0], hi) - fw_prefix(trees[1], lo)


@kernel
def span_loads(dev_tree, lo, hi, loads):
    """Work in span of every device (see :func:`overlap_work`)."""
    for q in range(dev_tree.shape[0]):
        loads[q] = overlap_work(dev_tree[q], lo, hi)


@kernel
def eq1_choice(loads, comm_with):
    """Eq. 1: argmin over devices of span work + communication with the *other* devices.

    Ties go to the device the cluster communicates with most, then to the lowest index.
    """
    total = 0.0
    for q in range(loads.shape[0]):
        total += comm_with[q]
    best = -1
    best_score = 0.0
    for q in range(loads.shape[0]):
        score = loads[q] + (total - comm_with[q])
        if best < 0 or score < best_score or (score == best_score and comm_with[q] > comm_with[best]):
            best = q
            best_score = score
    return best


@kernel
def map_cluster(c, p, cl_ptr, cl_nodes, device, cl_device, rank, comp, dev_tree, unm_tree):
    """Assign cluster ``c`` to device ``p`` and move its work between the Fenwick trees.

    ``rank[u]`` is (start rank, finish rank); every tree set is indexed ``[0]`` by start and
    ``[1]`` by finish.
    """
    for i in range(cl_ptr[c], cl_ptr[c + 1]):
        u = cl_nodes[i]
        device[u] = p
        for side in range(2):
            fw_add(dev_tree[p, side], rank[u, side], comp[u])
            fw_add(unm_tree[side], rank[u, side], -comp[u])
    cl_device[c] = p


@kernel
def lookahead_pass(order, cl_ptr, cl_nodes, cluster, device, cl_device, cl_weight, lo_rank, hi_rank,
                   rank, comp, succ_ptr, succ_idx, pred_ptr, pred_idx, pred_edge, comm, dev_tree,
                   unm_tree, ccr_high):
    """One locality-first lookahead pass over the unmapped secondaries; returns how many it mapped.

    An eligible cluster (totally communicating with one device; or, when ``ccr_high``,
    maximally communicating: more than its total communication / K with that device) joins
    its most communicating device p when one of:

    (a) the unmapped work in its span (its own excluded) covers the imbalance it causes,
        sum over q != p of max(0, load_p + W - load_q);
    (b) p stays at or below the most loaded other device: load_p + W <= max_q!=p load_q;
    (c) its communication with p exceeds W + load_p + unmapped work in span (the sum).
    """
    k = dev_tree.shape[0]
    out = np.zeros(k)
    loads = np.zeros(k)
    mapped = 0
    for i in range(order.shape[0]):
        c = order[i]
        if cl_device[c] >= 0:
            continue
        total, unm = cluster_comm(c, cl_ptr, cl_nodes, cluster, device, succ_ptr, succ_idx, pred_ptr,
                                  pred_idx, pred_edge, comm, out)
        p = 0
        for q in range(1, k):
            if out[q] > out[p]:
                p = q
        cp = out[p]
        if cp <= 0.0:
            continue
        totally = unm == 0.0 and cp == total
        if not totally and not (ccr_high and cp > total / k):
            continue
        lo = lo_rank[c]
        hi = hi_rank[c]
        span_loads(dev_tree, lo, hi, loads)
        own = 0.0
        for j in range(cl_ptr[c], cl_ptr[c + 1]):
            u = cl_nodes[j]
            if rank[u, 0] < hi and rank[u, 1] >= lo:
                own += comp[u]
        free_work = overlap_work(unm_tree, lo, hi) - own
        if free_work < 0.0:
            free_work = 0.0
        w = cl_weight[c]
        after = loads[p] + w
        need = 0.0
        other_max = -1.0
        for q in range(k):
            if q != p:
                if after > loads[q]:
                    need += after - loads[q]
                if loads[q] > other_max:
                    other_max = loads[q]
        cond_a = free_work >= need
        cond_b = after <= other_max
        cond_c = cp > w + loads[p] + free_work
        if cond_a or cond_b or cond_c:
            map_cluster(c, p, cl_ptr, cl_nodes, device, cl_device, rank, comp, dev_tree, unm_tree)
            mapped += 1
    return mapped


@kernel
def level_aware_pass(order, cl_ptr, cl_nodes, cluster, device, cl_device, lo_rank, hi_rank, rank, comp,
                     succ_ptr, succ_idx, pred_ptr, pred_idx, pred_edge, comm, dev_tree, unm_tree):
    """Map every still unmapped cluster of ``order`` by Eq. 1 (:func:`eq1_choice`)."""
    k = dev_tree.shape[0]
    out = np.zeros(k)
    loads = np.zeros(k)
    for i in range(order.shape[0]):
        c = order[i]
        if cl_device[c] >= 0:
            continue
        cluster_comm(c, cl_ptr, cl_nodes, cluster, device, succ_ptr, succ_idx, pred_ptr, pred_idx,
                     pred_edge, comm, out)
        span_loads(dev_tree, lo_rank[c], hi_rank[c], loads)
        p = eq1_choice(loads, out)
        map_cluster(c, p, cl_ptr, cl_nodes, device, cl_device, rank, comp, dev_tree, unm_tree)


@kernel
def fw_build(values):
    """Fenwick tree holding ``values`` (position i = values[i]) in O(len) time."""
    m = values.shape[0] + 1
    tree = np.zeros(m)
    for i in range(1, m):
        tree[i] += values[i - 1]
        j = i + (i & (-i))
        if j < m:
            tree[j] += tree[i]
    return tree


# -- memory heuristic I --------------------------------------------------------------------
@kernel
def memory_potentials_kernel(succ_ptr, succ_idx, device, mem, residual, start, finish, pe, t):
    """``M_pot(n, t)`` of heuristic I for every node, 0 off ``pe`` (see ``overflow.py``).

    A node on ``pe`` counts its own bytes when residual or alive at ``t`` (``st <= t <=``
    max(finish, last start of its consumers on its own device)); an input ``u`` finished by
    ``t``, not residual, whose only edge into ``pe`` starting at or after ``t`` goes to ``v``,
    adds its bytes to ``v``. One pass over the edges instead of ``np.maximum.at`` /
    ``np.add.at`` (heuristic I calls this twice per overflowing device per round).
    """
    n = device.shape[0]
    pot = np.zeros(n)
    into = np.zeros(n, np.int64)
    for u in range(n):
        du = device[u]
        last = -np.inf
        for e in range(succ_ptr[u], succ_ptr[u + 1]):
            v = succ_idx[e]
            if device[v] == du and start[v] > last:
                last = start[v]
            if device[v] == pe and start[v] >= t:
                into[u] += 1
        if du == pe:
            end = finish[u] if finish[u] > last else last
            if residual[u] or (start[u] <= t and t <= end):
                pot[u] = mem[u]
    for u in range(n):
        if into[u] == 1 and finish[u] <= t and not residual[u] and mem[u] > 0:
            for e in range(succ_ptr[u], succ_ptr[u + 1]):
                v = succ_idx[e]
                if device[v] == pe and start[v] >= t:
                    pot[v] += mem[u]
    return pot
