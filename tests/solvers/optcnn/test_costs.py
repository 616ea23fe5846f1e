"""Cost model of paper 3 (§5.1): t_X against voxel counting, the documented t_S/t_C/t_X rules."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from dnnpart.devices.specs import DeviceSpec
from dnnpart.errors import UsageError
from dnnpart.layerwise.configs import config_space
from dnnpart.layerwise.costs import (
    BYTES_PER_ELEMENT,
    compute_time,
    sync_bytes,
    sync_time,
    transfer_costs,
    transfer_time,
)
from dnnpart.layerwise.hardware import two_level_bandwidth, uniform_bandwidth
from dnnpart.layerwise.layers import LayerSpec, NetBuilder

KINDS = ("conv", "pool_max", "pool_avg", "fc", "add", "concat", "softmax")


# -- the oracle: which device owns which element, which elements each output voxel reads ----------

def owner(shape: tuple[int, ...], degrees: np.ndarray) -> np.ndarray:
    """Device of every element: tile coordinate per dimension, row-major tile index = device."""
    idx = np.indices(shape)
    coords = [idx[d] // (shape[d] // int(degrees[d])) for d in range(4)]
    tile = coords[0]
    for d in range(1, 4):
        tile = tile * int(degrees[d]) + coords[d]
    return tile


def reads(layer: LayerSpec, k: int, voxel: tuple[int, int, int, int], in_shape: tuple[int, ...]) -> tuple:
    """Index (for np.ix_) of the input-``k`` elements that output ``voxel`` reads, or None."""
    n, c, h, w = voxel
    _, cin, hin, win = in_shape
    if layer.has_window:
        rows = [h * layer.stride[0] - layer.padding[0] + i for i in range(layer.kernel[0])]
        cols = [w * layer.stride[1] - layer.padding[1] + j for j in range(layer.kernel[1])]
        rows = [r for r in rows if 0 <= r < hin]
        cols = [q for q in cols if 0 <= q < win]
        chans = list(range(cin)) if layer.op == "conv" else [c]
        return np.ix_([n], chans, rows, cols) if rows and cols else None
    if layer.op == "fc":
        return np.ix_([n], range(cin), range(hin), range(win))
    if layer.op == "concat":
        off = sum(s[1] for s in layer.in_shapes[:k])
        if not off <= c < off + cin:
            return None
        return np.ix_([n], [c - off], [h], [w])
    return np.ix_([n], [c], [h], [w])  # add, softmax


def brute_transfer(layer: LayerSpec, k: int, pdeg: np.ndarray, cdeg: np.ndarray,
                   bw: np.ndarray, serial: bool = False) -> tuple[float, float]:
    """(t_X, bytes moved both ways) by voxel counting; ``serial``: every transfer one after
    the other instead of receivers in parallel."""
    in_shape = layer.in_shapes[k]
    own_p = owner(in_shape, pdeg)
    own_c = owner(layer.out_shape, cdeg)
    d = bw.shape[0]
    needed = np.zeros((d, *in_shape), dtype=bool)
    for voxel in itertools.product(*(range(s) for s in layer.out_shape)):
        sel = reads(layer, k, voxel, in_shape)
        if sel is not None:
            needed[own_c[voxel]][sel] = True
    vol = np.array([[np.count_nonzero(needed[dv] & (own_p == du)) for dv in range(d)] for du in range(d)])
    b = BYTES_PER_ELEMENT
    into = [sum(vol[du, dv] * b / bw[du, dv] for du in range(d) if du != dv) for dv in range(d)]
    back = [sum(vol[du, dv] * b / bw[dv, du] for dv in range(d) if du != dv) for du in range(d)]
    fwd, bwd = (sum(into), sum(back)) if serial else (max(into), max(back))
    moved = 2 * b * sum(int(vol[du, dv]) for du in range(d) for dv in range(d) if du != dv)
    return float(fwd + bwd), float(moved)


def random_case(rng: np.random.Generator) -> tuple[LayerSpec, int, list[LayerSpec]]:
    """A random consumer layer; returns it, the input index under test and its producers."""
    n = int(rng.choice([2, 4, 8]))
    c = int(rng.choice([1, 2, 4]))
    h, w = (int(v) for v in rng.integers(2, 9, size=2))
    b = NetBuilder("case", n)
    x = b.input(c, h, w, name="x")
    kind = str(rng.choice(KINDS))
    k = 0
    if kind == "conv":
        kh, kw = (int(v) for v in rng.integers(1, min(h, w, 4) + 1, size=2))
        s = (int(rng.integers(1, 3)), int(rng.integers(1, 3)))
        p = (int(rng.integers(0, kh)), int(rng.integers(0, kw)))
        b.conv("y", x, int(rng.choice([1, 2, 4])), (kh, kw), s, p)
    elif kind.startswith("pool"):
        kk = int(rng.integers(1, min(h, w, 3) + 1))
        b.pool("y", x, kk, int(rng.integers(1, 3)), int(rng.integers(0, (kk + 1) // 2)), kind=kind[5:])
    elif kind == "fc":
        b.fc("y", x, int(rng.choice([2, 4])))
    elif kind == "add":
        z = b.input(c, h, w, name="z")
        b.add("y", z, x)
        k = 1
    elif kind == "concat":
        z = b.input(int(rng.choice([1, 2, 4])), h, w, name="z")
        k = int(rng.integers(0, 2))
        b.concat("y", *((x, z) if k == 0 else (z, x)))
    else:
        b.softmax("y", x)
    g = b.build()
    return g.layers[-1], k, list(g.layers[:-1])


def random_bandwidth(rng: np.random.Generator, d: int) -> np.ndarray:
    if d >= 4 and rng.random() < 0.5:
        intra, inter = float(rng.uniform(1, 4)), float(rng.uniform(0.1, 1))
        return two_level_bandwidth(d // 4, 4, intra=intra, inter=inter)
    bw = rng.uniform(0.5, 3.0, size=(d, d))  # asymmetric on purpose
    np.fill_diagonal(bw, np.inf)
    return bw


@pytest.mark.parametrize("direct_pairs", [0, 1 << 14], ids=["compiled", "default"])
def test_transfer_equals_voxel_counting(direct_pairs: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """>= 200 random (layer, configuration pair, topology) cases; a third on two-level topologies.
    Small edges broadcast their tile boxes directly (numpy); ``direct_pairs=0`` sends every edge
    through the path of large ones, the compiled loop over tile pairs
    (:func:`dnnpart.layerwise.transfer_kernel.edge_transfer_tables`), whose plain twin is the voxel
    counting here."""
    from dnnpart.layerwise import costs

    monkeypatch.setattr(costs, "_DIRECT_PAIRS", direct_pairs)
    rng = np.random.default_rng(2018)
    cases = kinds_seen = 0
    seen: set[str] = set()
    while cases < 240:
        layer, k, producers = random_case(rng)
        d = int(rng.choice([1, 2, 4, 8]))
        bw = random_bandwidth(rng, d)
        producer = producers[layer.inputs[k]]
        pspace, cspace = config_space(producer, d), config_space(layer, d)
        table, moved = transfer_costs(pspace, layer, k, cspace, bw)
        assert np.array_equal(table, transfer_time(pspace, layer, k, cspace, bw))
        serial, moved_serial = transfer_costs(pspace, layer, k, cspace, bw, transfers="serial")
        assert np.array_equal(moved_serial, moved)  # the accounting moves no other bytes
        for _ in range(2):
            i, j = int(rng.integers(len(pspace))), int(rng.integers(len(cspace)))
            expected, expected_bytes = brute_transfer(layer, k, pspace.degrees[i], cspace.degrees[j], bw)
            assert table[i, j] == pytest.approx(expected, rel=1e-12, abs=1e-15), (layer, k, i, j)
            assert moved[i, j] == expected_bytes
            one_by_one, _ = brute_transfer(layer, k, pspace.degrees[i], cspace.degrees[j], bw, serial=True)
            assert serial[i, j] == pytest.approx(one_by_one, rel=1e-12, abs=1e-15), (layer, k, i, j)
            cases += 1
        seen.add(layer.op)
    kinds_seen = len(seen)
    assert kinds_seen == len(KINDS)


def test_identical_configurations_on_same_devices_cost_nothing() -> None:
    rng = np.random.default_rng(7)
    for _ in range(60):
        layer, k, producers = random_case(rng)
        d = int(rng.choice([2, 4, 8]))
        producer = producers[layer.inputs[k]]
        pspace, cspace = config_space(producer, d), config_space(layer, d)
        table = transfer_time(pspace, layer, k, cspace, random_bandwidth(rng, d))
        for i, deg in enumerate(pspace.degrees):
            if tuple(deg) not in {tuple(x) for x in cspace.degrees}:
                continue
            j = cspace.index(tuple(deg))
            elementwise = layer.op in ("add", "softmax") or (layer.op == "concat" and deg[1] == 1)
            samples_only = bool((deg[1:] == 1).all())
            windowless = not layer.has_window or (layer.kernel == (1, 1) and layer.padding == (0, 0)
                                                   and layer.op != "conv")
            if samples_only or (elementwise and windowless):
                assert table[i, j] == 0.0, (layer.op, deg)


def _conv_net(h: int = 4) -> LayerSpec:
    b = NetBuilder("halo", 1)
    x = b.input(1, h, 4)
    b.conv("y", x, 1, 3, 1, 1)
    return b.build().layers[-1]


def test_halo_rows_travel_both_ways() -> None:
    """Height split 2 on both sides of a 3x3/pad 1 convolution: one halo row each way."""
    conv = _conv_net()
    prod = NetBuilder("p", 1)
    prod.input(1, 4, 4)
    pspace = config_space(prod.build().layers[0], 2)
    cspace = config_space(conv, 2)
    i, j = pspace.index((1, 1, 2, 1)), cspace.index((1, 1, 2, 1))
    table = transfer_time(pspace, conv, 0, cspace, uniform_bandwidth(2, 1.0))
    # forward: each device receives one row of 4 elements; backward: its gradient goes back
    assert table[i, j] == 2 * 4 * BYTES_PER_ELEMENT


def test_backward_traffic_counted_over_reverse_link() -> None:
    """Producer on device 0, consumer split in samples over 0 and 1; bandwidth differs by direction."""
    b = NetBuilder("bw", 2)
    x = b.input(1, 2, 2)
    b.add("y", x, x)
    g = b.build()
    space = config_space(g.layers[0], 2)
    cons = config_space(g.layers[1], 2)
    bw = np.array([[np.inf, 2.0], [8.0, np.inf]])
    t = transfer_time(space, g.layers[1], 0, cons, bw)[0, cons.index((2, 1, 1, 1))]
    half = 1 * 2 * 2 * BYTES_PER_ELEMENT
    assert t == half / 2.0 + half / 8.0


def _fc(params_in: int = 8, out: int = 4, batch: int = 8) -> LayerSpec:
    b = NetBuilder("fc", batch)
    x = b.input(params_in, 1, 1)
    b.fc("fc", x, out)
    return b.build().layers[-1]


def test_sync_time_parameter_server_on_first_replica() -> None:
    """Fast links touch only device 0: the documented server (first replica) makes t_S small."""
    fc = _fc()
    space = config_space(fc, 4)
    bw = np.full((4, 4), 1e-3)
    bw[0, :] = bw[:, 0] = 1.0
    np.fill_diagonal(bw, np.inf)
    t = sync_time(fc, space, bw)
    full = fc.params * BYTES_PER_ELEMENT
    assert t[space.index((1, 1, 1, 1))] == 0.0
    assert t[space.index((1, 4, 1, 1))] == 0.0                  # model parallel: no replicas
    assert t[space.index((4, 1, 1, 1))] == pytest.approx(3 * 2 * full)  # 3 replicas, serialised
    # n=2, c=2: tiles (n0,c0)=0, (n0,c1)=1, (n1,c0)=2, (n1,c1)=3; servers 0 and 1
    half = full / 2
    expected = max(2 * half / 1.0, 2 * half / 1e-3)
    assert t[space.index((2, 2, 1, 1))] == pytest.approx(expected)
    # serial accounting: the two slices one after the other
    serial = sync_time(fc, space, bw, transfers="serial")
    assert serial[space.index((2, 2, 1, 1))] == pytest.approx(2 * half / 1.0 + 2 * half / 1e-3)
    assert serial[space.index((4, 1, 1, 1))] == t[space.index((4, 1, 1, 1))]  # one slice: the same
    moved = sync_bytes(fc, space)
    assert moved[space.index((1, 4, 1, 1))] == 0.0
    assert moved[space.index((4, 1, 1, 1))] == 3 * 2 * full
    assert moved[space.index((2, 2, 1, 1))] == 2 * (2 * half)  # one replica per slice, two slices


def test_compute_time_roofline() -> None:
    b = NetBuilder("c", 4)
    x = b.input(2, 8, 8)
    b.conv("y", x, 4, 3, 1, 1)
    conv = b.build().layers[-1]
    space = config_space(conv, 4)
    compute_bound = DeviceSpec(name="x", kind="accelerator", peak_flops=1e9, compute_efficiency=0.5,
                               memory_bandwidth=1e30)
    t = compute_time(conv, space, compute_bound)
    flops = 2 * 4 * 4 * 8 * 8 * 2 * 3 * 3
    assert t[0] == pytest.approx(3 * flops / 0.5e9)                # forward + 2x backward
    assert np.allclose(t[space.index((4, 1, 1, 1))], t[0] / 4)
    memory_bound = DeviceSpec(name="m", kind="accelerator", peak_flops=1e30, memory_bandwidth=1.0)
    t = compute_time(conv, space, memory_bound)
    weights = 4 * (2 * 9 + 1)
    assert t[0] == pytest.approx(3 * BYTES_PER_ELEMENT * (4 * 2 * 64 + 4 * 4 * 64 + weights))
    # input layers cost nothing to compute
    assert not compute_time(b.build().layers[0], config_space(b.build().layers[0], 4), compute_bound).any()


@pytest.mark.parametrize("top", [10, 1 << 20], ids=["one-integer-key", "row-wise"])
def test_distinct_rows_give_back_every_element(top: int) -> None:
    """Mixed-radix keys (small coordinates) and the row-wise fallback (keys past int64) agree."""
    from dnnpart.layerwise.costs import _distinct

    rng = np.random.default_rng(top)
    cols = [rng.integers(0, top, size=(5, 7)) for _ in range(4)]
    cols[1][2] = cols[1][0]  # repeated rows
    of, rows = _distinct(*cols)
    for c, r in zip(cols, rows, strict=True):
        assert np.array_equal(r[of], c)
    assert len(rows[0]) == len({tuple(int(c[i, j]) for c in cols) for i in range(5) for j in range(7)})


def test_unknown_transfer_accounting_is_refused() -> None:
    fc = _fc()
    with pytest.raises(UsageError, match="transfers must be one of links, serial"):
        sync_time(fc, config_space(fc, 2), np.ones((2, 2)), transfers="bus")


@pytest.mark.parametrize("model,devices", [("alexnet", 4), ("vgg16", 4), ("lenet5", 8)])
def test_serial_accounting_on_uniform_links_makes_time_a_byte_count(model: str, devices: int) -> None:
    """With every transfer one after the other over links of one bandwidth ``b`` and compute
    taken out, ``t_O`` is bytes per step over ``b``, so Algorithm 1's optimum moves no more
    bytes than data, model or OWT parallelism -- the premise of the paper's Fig. 8, which
    the default accounting (receivers in parallel) does not give (``docs/methods/optcnn.md``)."""
    import dataclasses

    from dnnpart.layerwise.hardware import P100
    from dnnpart.layerwise.models import build_model
    from dnnpart.layerwise.tables import build_tables, communication_bytes, iteration_time
    from dnnpart.solvers.optcnn.baselines import data_parallel, model_parallel, owt
    from dnnpart.solvers.optcnn.search import optimize_tables

    b = 1e10
    tables = build_tables(build_model(model, 32 * devices), devices, P100,
                          uniform_bandwidth(devices, b), transfers="serial")
    tables = dataclasses.replace(tables, t_c=tuple(np.zeros_like(c) for c in tables.t_c))
    best = optimize_tables(tables).strategy
    assert iteration_time(tables, best) == pytest.approx(communication_bytes(tables, best) / b, rel=1e-9)
    moved = communication_bytes(tables, best)
    for baseline in (data_parallel, model_parallel, owt):
        assert moved <= communication_bytes(tables, baseline(tables)) * (1 + 1e-9), baseline.__name__
