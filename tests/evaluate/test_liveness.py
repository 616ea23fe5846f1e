"""The stash and working-set rules of :mod:`dnnpart.pricing.liveness`, on a graph small
enough to work by hand (numbers in the comments)."""

from __future__ import annotations

import numpy as np

from dnnpart.graph.core import NORMAL, RESIDUAL, Graph, build_graph
from dnnpart.pricing.chain import node_activation_bytes
from dnnpart.pricing.liveness import accumulations, loss_inputs, stashed, value_bytes, working_set

#: name, op type, backward, memory class, output bytes
NODES = [
    ("w", "parameter", False, RESIDUAL, 100.0),
    ("x", "matmul", False, NORMAL, 10.0),          # x = input @ w; its backward reads x (via v)
    ("v", "view", False, NORMAL, 10.0),            # a view of x: allocates nothing
    ("ln", "layernorm", False, NORMAL, 22.0),      # (out 20, mean 1, rstd 1), taken apart below
    ("o", "getitem", False, NORMAL, 20.0),
    ("r", "getitem", False, NORMAL, 1.0),          # rstd: read by the backward
    ("y", "add", False, NORMAL, 20.0),             # the output, read by the loss only
    ("loss", "mean", False, NORMAL, 4.0),
    ("seed", "fill", False, NORMAL, 4.0),          # ones_like(loss): the gradient's seed
    ("gy", "div", True, NORMAL, 20.0),
    ("gx", "layernorm_backward", True, NORMAL, 10.0),
    ("gw1", "matmul", True, NORMAL, 100.0),        # w's gradient from this use
    ("gw2", "matmul", True, NORMAL, 100.0),        # ... and from another
    ("gw", "add", True, NORMAL, 100.0),            # their sum: no reader, made in place
]
EDGES = [("w", "x"), ("x", "v"), ("v", "ln"), ("ln", "o"), ("ln", "r"), ("o", "y"), ("y", "loss"),
         ("loss", "seed"), ("seed", "gy"), ("gy", "gx"), ("r", "gx"), ("gx", "gw1"), ("v", "gw1"),
         ("gx", "gw2"), ("gw1", "gw"), ("gw2", "gw")]


def _graph() -> Graph:
    names = [n[0] for n in NODES]
    idx = {n: i for i, n in enumerate(names)}
    n = len(NODES)
    return build_graph(
        np.arange(n), [idx[a] for a, _ in EDGES], [idx[b] for _, b in EDGES],
        compute_time=np.ones((n, 2)), edge_cost=np.zeros(len(EDGES)),
        is_backward=[b for _, _, b, _, _ in NODES], names=names, op_types=[t for _, t, _, _, _ in NODES],
        memory_class=[c for _, _, _, c, _ in NODES], output_bytes=[o for *_, o in NODES],
        param_bytes=[o if c == RESIDUAL else 0.0 for _, _, _, c, o in NODES])


def test_rules_by_hand() -> None:
    g = _graph()
    name = dict(zip(g.names, range(g.n_nodes), strict=True))
    vb = value_bytes(g)
    assert vb[name["v"]] == 0 and vb[name["ln"]] == 0 and vb[name["w"]] == 0   # view, split tuple, weight
    assert vb[name["o"]] == 20 and vb[name["r"]] == 1
    st = stashed(g)
    # what the backward reads: x (through its view), rstd, the seed; not o, y, loss
    assert {g.names[i] for i in np.flatnonzero(st)} == {"x", "r", "seed"}
    assert node_activation_bytes(g).sum() == 15
    assert {g.names[i] for i in np.flatnonzero(accumulations(g))} == {"gw"}
    assert {g.names[i] for i in np.flatnonzero(loss_inputs(g))} == {"y"}


def test_working_set_by_hand() -> None:
    g = _graph()
    every = np.ones(g.n_nodes, dtype=bool)
    vb = value_bytes(g)
    # forward: x 10 | o 20, r 1 (born with ln) | y 20 | loss 4 (o freed) | seed 4 (y freed)
    # after the forward: x 10 (its backward gw1 reads it) + r 1 + seed 4 = 15
    # backward: gy 20 (loss freed) | gx 10 (seed freed) | gw1 100 (gy, r freed): x 10 + gx 10 +
    # gw1 100 = 120, the peak | gw2 100 (x, gw1 freed: added at once) | gw: in place, nothing
    ws = working_set(g, every, vb)
    assert ws == (15.0, 120.0, 0.0)  # nothing leaves: the loss reads y
    # the run's loss keeps y until the micro-batch's backward is done: 20 more from y on
    held = working_set(g, every, vb, held=loss_inputs(g))
    assert held.stash == 35 and held.peak == 140
