"""Topologies: clusters from explicit link lists, and the generators of ``docs/topologies.md``.

A topology is an undirected link list (:class:`~dnnpart.devices.cluster.Link`); the cluster's
``(d, d)`` bandwidth and latency matrices are derived from it by the one routing rule of
:mod:`dnnpart.devices.routing` (widest path; ties to the least summed latency, then the fewest
hops). A disconnected topology is refused with a message naming two devices that cannot reach
each other.

Generators (``GENERATOR:key=value,...`` on the command line, :func:`generate`), each defined in
``docs/topologies.md`` with its source:

* ``two-level`` -- ``nodes`` machines of ``gpus`` accelerators; every pair inside a machine
  has an ``intra`` link, every pair across machines an ``inter`` link (paper 1, app. C.3;
  ``group`` = machine, as the hierarchy DP expects).
* ``dgx1`` -- NVIDIA DGX-1 (V100) hybrid cube-mesh: 8 GPUs, 6 NVLink-2 bricks each, 24 GB/s
  per brick and direction; pairs with two bricks get 48 GB/s, with one 24 GB/s, the others talk
  over PCIe 3 x16 / QPI (``pcie``, 15.75 GB/s). DGX-1 does not forward NVLink traffic through a
  third GPU, so its matrix is the direct-link table (given, not routed; ``routed=1`` routes it).
  ``nodes`` such machines (Parmesan's systems) are joined pairwise by ``inter`` links
  (100 Gb/s by default: its text says Ethernet, not how fast), ``group`` = machine.
* ``dgx2`` -- NVIDIA DGX-2: 16 V100 32 GB on NVSwitch, 150 GB/s between every pair (PARDNN's
  machine).
* ``mesh2d``, ``torus2d``, ``mesh3d``, ``torus3d`` -- grid links between axis neighbours
  (``x``, ``y``, ``z`` devices per axis), wrap-around links for the tori (an axis of length 2
  has one link, not two).
* ``random_blk_1``, ``random_blk_2``, ``uniform_dist`` -- the random heterogeneous topologies
  named by paper 4 (whose appendix defining them is not in our copy; our definitions):
  complete graphs over ``n`` devices; ``random_blk_1`` cuts the devices (random order) into
  ``blocks`` equal blocks, ``intra`` bandwidth inside a block and ``inter`` between blocks (2
  bandwidth values); ``random_blk_2`` draws one bandwidth per block uniformly in
  ``[intra_lo, intra_hi]`` and one per block pair in ``[inter_lo, inter_hi]``; ``uniform_dist``
  draws every link's bandwidth uniformly in ``[lo, hi]``. ``seed`` fixes the draw.
"""

from __future__ import annotations

import inspect
import itertools
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from dnnpart.devices.cluster import ACCELERATOR, Cluster, Device
from dnnpart.devices.links import Link, LinkTable
from dnnpart.devices.presets import PCIE3_X16_BANDWIDTH, two_level_cluster
from dnnpart.devices.routing import route, route_blocks, route_grid, unreachable_pair
from dnnpart.errors import UsageError

IntArray = npt.NDArray[np.int64]

#: One NVLink 2.0 brick, bytes/s per direction (V100: 25 GB/s signalling, ~24 usable).
NVLINK2_BRICK = 24e9
#: 100 Gb/s Ethernet or InfiniBand EDR, bytes/s (the links preset ``network-100g``).
NETWORK_100G = 12.5e9
#: V100 memory of the DGX-1 (V100) (16 GB; a 32 GB variant exists: ``memory=32e9``).
V100_MEMORY = 16e9

#: Bricks between GPU pairs of the DGX-1 (V100) hybrid cube-mesh (NVIDIA DGX-1 with Tesla
#: V100 system architecture white paper, WP-08437-002, fig. 5; ``nvidia-smi topo -m`` there).
DGX1_NVLINK: dict[tuple[int, int], int] = {
    (0, 1): 1, (0, 2): 1, (0, 3): 2, (0, 4): 2,
    (1, 2): 2, (1, 3): 1, (1, 5): 2,
    (2, 3): 2, (2, 6): 1,
    (3, 7): 1,
    (4, 5): 1, (4, 6): 1, (4, 7): 2,
    (5, 6): 2, (5, 7): 1,
    (6, 7): 2,
}


def cluster_from_links(
    devices: Sequence[Device], links: Sequence[Link] | LinkTable, *, name: str = "",
    group: Sequence[int] | npt.ArrayLike | None = None, time_unit_s: float = 1e-3,
    reference_bandwidth: float | None = None, routing: str = "widest",
    matrices: tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]] | None = None,
) -> Cluster:
    """A cluster whose matrices are routed from ``links`` by ``routing`` (see module doc).

    ``matrices``: the ``(bandwidth, latency)`` the rule gives, when the topology's structure
    gives them without a search (:func:`~dnnpart.devices.routing.route_blocks`).

    Examples
    --------
    >>> devs = [Device(name=f"g{i}", kind="accelerator") for i in range(3)]
    >>> c = cluster_from_links(devs, [Link(a=0, b=1, bandwidth=2.0), Link(a=1, b=2, bandwidth=1.0)])
    >>> float(c.bandwidth[0, 2]), len(c.links)
    (1.0, 2)
    >>> cluster_from_links(devs, [Link(a=0, b=1, bandwidth=2.0)])
    Traceback (most recent call last):
    ...
    dnnpart.errors.UsageError: topology is disconnected: g0 cannot reach g2
    """
    d = len(devices)
    check_link_count(len(links), "links")
    table = LinkTable.of(links)  # arrays: a complete topology builds no Link objects
    if table.max_end() >= d:
        k = int(np.argmax(np.maximum(table.a, table.b) >= d))
        raise UsageError(f"link {table.a[k]}-{table.b[k]}: the topology has {d} devices")
    if matrices is None:
        bw, lat, _ = route(d, table.a, table.b, table.bandwidth, table.latency, rule=routing,
                           hops=False)
    else:
        bw, lat = matrices
    pair = unreachable_pair(bw)
    if pair is not None:
        raise UsageError(
            f"topology is disconnected: {devices[pair[0]].name} cannot reach {devices[pair[1]].name}"
        )
    bw.flags.writeable = lat.flags.writeable = False  # fresh: the cluster keeps them uncopied
    return Cluster(
        devices=tuple(devices), bandwidth=bw, latency=lat,
        group=np.zeros(d, np.int64) if group is None else np.asarray(group, np.int64),
        name=name, time_unit_s=time_unit_s, reference_bandwidth=reference_bandwidth,
        links=table, routed=True, routing=routing,
    )


def _accelerators(n: int, memory: float) -> list[Device]:
    return [Device(name=f"acc{i}", kind=ACCELERATOR, memory_bytes=memory) for i in range(n)]


# -- generators -------------------------------------------------------------------------
def two_level(*, nodes: int = 2, gpus: int = 4, intra: float = 150e9, inter: float = 12.5e9,
              latency: float = 0.0, inter_latency: float = 0.0,
              memory: float = math.inf, routing: str = "widest") -> Cluster:
    """Machines of accelerators joined pairwise (``docs/topologies.md``), routed by its
    hierarchy (:func:`~dnnpart.devices.routing.route_blocks`, a machine is a block).

    Examples
    --------
    >>> c = two_level(nodes=2, gpus=2, intra=4.0, inter=1.0)
    >>> c.bandwidth.tolist(), c.group.tolist()
    ([[inf, 4.0, 1.0, 1.0], [4.0, inf, 1.0, 1.0], [1.0, 1.0, inf, 4.0], [1.0, 1.0, 4.0, inf]], [0, 0, 1, 1])
    """
    base = two_level_cluster(n_groups=nodes, accelerators_per_group=gpus, memory_bytes=memory,
                             intra_bandwidth=intra, inter_bandwidth=inter)
    eye = np.eye(nodes, dtype=np.bool_)
    return _complete(base.group, np.where(eye, intra, inter), np.where(eye, latency, inter_latency),
                     f"two-level {nodes}x{gpus}{_suffix(routing)}", routing,
                     devices=base.devices, group=base.group, reference_bandwidth=intra,
                     kinds=("inter", "intra"))


def dgx1(*, memory: float = V100_MEMORY, nvlink: float = NVLINK2_BRICK,
         pcie: float = PCIE3_X16_BANDWIDTH, latency: float = 0.0, routed: int = 0,
         routing: str = "", nodes: int = 1, inter: float = NETWORK_100G,
         inter_latency: float = 0.0) -> Cluster:
    """DGX-1 (V100) hybrid cube-mesh: 8 GPUs, NVLink where wired, PCIe elsewhere; ``nodes``
    such machines joined pairwise by a network of ``inter`` bytes/s (Parmesan's systems: DGX-1
    V100 machines over Ethernet, whose speed its text does not give; 100 Gb/s is our
    assumption).

    By default the matrices are the links as given (DGX-1 does not forward NVLink traffic);
    ``routing=RULE`` routes them by that rule, ``routed=1`` by ``widest``.

    Examples
    --------
    >>> c = dgx1()
    >>> (c.bandwidth[[0, 0, 0], [3, 1, 5]] / 1e9).tolist()
    [48.0, 24.0, 15.75]
    >>> dgx1(routing="store-and-forward").routing
    'store-and-forward'
    >>> two = dgx1(nodes=2, inter=1e9)
    >>> two.n_devices, (two.bandwidth[[0, 0, 8], [3, 8, 11]] / 1e9).tolist(), two.group.tolist()[6:10]
    (16, [48.0, 1.0, 48.0], [0, 0, 1, 1])
    """
    if routed not in (0, 1):
        raise UsageError(f"dgx1: routed must be 0 or 1, got {routed}")
    n = 8 * nodes
    devices = _accelerators(n, memory)
    links: list[Link] = []
    bw = np.full((n, n), inter)
    lat = np.full((n, n), inter_latency)
    for base in range(0, n, 8):
        bw[base:base + 8, base:base + 8] = pcie
        lat[base:base + 8, base:base + 8] = latency
        for (i, j), bricks in DGX1_NVLINK.items():
            links.append(Link(a=base + i, b=base + j, bandwidth=bricks * nvlink, latency=latency,
                              kind=f"nvlink x{bricks}"))
            bw[base + i, base + j] = bw[base + j, base + i] = bricks * nvlink
        for i, j in itertools.combinations(range(8), 2):
            if (i, j) not in DGX1_NVLINK:
                links.append(Link(a=base + i, b=base + j, bandwidth=pcie, latency=latency, kind="pcie"))
    group: IntArray = np.arange(n, dtype=np.int64) // 8
    for i, j in itertools.combinations(range(n), 2):
        if group[i] != group[j]:
            links.append(Link(a=i, b=j, bandwidth=inter, latency=inter_latency, kind="network"))
    name = "dgx1" if nodes == 1 else f"dgx1 nodes={nodes}"
    if nodes == 1:  # one machine: a flat cluster, as before
        group = np.zeros(0, np.int64)
    if routing or routed:
        rule = routing or "widest"
        return cluster_from_links(devices, links, name=f"{name} (routed, {rule})", routing=rule,
                                  group=group if nodes > 1 else None)
    np.fill_diagonal(bw, math.inf)
    np.fill_diagonal(lat, 0.0)
    return Cluster(devices=tuple(devices), bandwidth=bw, latency=lat, name=name,
                   links=tuple(links), group=group)


def dgx2(*, memory: float = 32e9, nvswitch: float = 6 * 25e9, latency: float = 0.0,
         routing: str = "") -> Cluster:
    """DGX-2: 16 V100 (SXM3, 32 GB) on NVSwitch, each GPU's six NVLink-2 links (25 GB/s per
    direction each) into the switch fabric, so every pair talks at ``nvswitch`` bytes/s --
    PARDNN's machine (paper 2, §5: "a NVIDIA DGX-2 with 16 Tesla V100 SXM3 32 GB GPUs connected
    via NVSwitch"). Pairwise links: a GPU sending to several peers at once gets the full rate to
    each here, where the switch port would share it. ``routing=RULE`` routes the (complete)
    link list by that rule; by default the matrices are the links as given.

    Examples
    --------
    >>> c = dgx2()
    >>> c.n_devices, float(c.bandwidth[0, 15] / 1e9), float(c.devices[3].memory_bytes / 1e9)
    (16, 150.0, 32.0)
    """
    n = 16
    bw = np.full((n, n), nvswitch)
    np.fill_diagonal(bw, math.inf)
    lat = np.full((n, n), latency)
    np.fill_diagonal(lat, 0.0)
    links = tuple(Link(a=i, b=j, bandwidth=nvswitch, latency=latency, kind="nvswitch")
                  for i, j in itertools.combinations(range(n), 2))
    if routing:
        return cluster_from_links(_accelerators(n, memory), links, name=f"dgx2 (routed, {routing})",
                                  routing=routing)
    return Cluster(devices=tuple(_accelerators(n, memory)), bandwidth=bw, latency=lat,
                   name="dgx2", links=links)


def _grid(dims: Sequence[int], wrap: bool, bw: float, latency: float, memory: float,
          name: str, routing: str = "widest") -> Cluster:
    if any(k < 1 for k in dims):
        raise UsageError(f"{name}: every axis needs >= 1 device, got {list(dims)}")
    n = int(np.prod(dims))
    index = np.arange(n).reshape(tuple(dims))
    parts: list[tuple[IntArray, IntArray, IntArray]] = []
    for axis, k in enumerate(dims):
        if k < 2:
            continue
        dst = np.roll(index, -1, axis=axis)
        # the link from each device to its successor on this axis; the last device wraps
        # round (torus) unless the axis has 2 devices (that link is already there)
        keep = np.ones(index.shape, np.bool_)
        if not wrap or k == 2:
            keep[(slice(None),) * axis + (k - 1,)] = False
        src_k, dst_k = index[keep], dst[keep]  # row-major: the order of a plain loop
        parts.append((src_k, dst_k, np.full(src_k.size, axis, np.int64)))
    a, b, kind = (np.concatenate([p[i] for p in parts]) if parts else np.zeros(0, np.int64)
                  for i in range(3))
    links = LinkTable(a, b, np.full(a.size, bw), np.full(a.size, latency), kind=kind,
                      labels=tuple(f"axis{i}" for i in range(len(dims))))
    # equal links: the matrices follow from the grid distance (no search, no numba)
    matrices = route_grid(dims, wrap, bw, latency, rule=routing) if n > 1 and \
        routing != "direct" else None
    return cluster_from_links(_accelerators(n, memory), links,
                              name=f"{name} {'x'.join(map(str, dims))}{_suffix(routing)}",
                              routing=routing, matrices=matrices)


def mesh2d(*, x: int = 4, y: int = 4, bw: float = 25e9, latency: float = 0.0,
           memory: float = math.inf, routing: str = "widest") -> Cluster:
    """2-D mesh; degrees 2 (corners), 3 (edges), 4 (inside).

    Examples
    --------
    >>> len(mesh2d(x=3, y=3).links)
    12
    """
    return _grid((x, y), False, bw, latency, memory, "mesh2d", routing)


def torus2d(*, x: int = 4, y: int = 4, bw: float = 25e9, latency: float = 0.0,
            memory: float = math.inf, routing: str = "widest") -> Cluster:
    """2-D torus; degree 4 when both axes have >= 3 devices.

    Examples
    --------
    >>> len(torus2d(x=3, y=3).links)
    18
    """
    return _grid((x, y), True, bw, latency, memory, "torus2d", routing)


def mesh3d(*, x: int = 4, y: int = 4, z: int = 4, bw: float = 25e9, latency: float = 0.0,
           memory: float = math.inf, routing: str = "widest") -> Cluster:
    """3-D mesh.

    Examples
    --------
    >>> len(mesh3d(x=2, y=2, z=2).links)
    12
    """
    return _grid((x, y, z), False, bw, latency, memory, "mesh3d", routing)


def torus3d(*, x: int = 4, y: int = 4, z: int = 4, bw: float = 25e9, latency: float = 0.0,
            memory: float = math.inf, routing: str = "widest") -> Cluster:
    """3-D torus; degree 6 when every axis has >= 3 devices.

    Examples
    --------
    >>> len(torus3d(x=3, y=3, z=3).links)
    81
    """
    return _grid((x, y, z), True, bw, latency, memory, "torus3d", routing)


def _complete(block: npt.ArrayLike, bandwidth: npt.ArrayLike, latency: npt.ArrayLike,
              name: str, routing: str, *, memory: float = math.inf,
              devices: Sequence[Device] | None = None, group: npt.ArrayLike | None = None,
              reference_bandwidth: float | None = None,
              kinds: tuple[str, str] = ("", "")) -> Cluster:
    """A complete topology whose links depend on the devices' blocks only: link ``i-j`` has
    ``bandwidth[block[i], block[j]]``; routed by :func:`route_blocks` (no all-pairs search).
    ``kinds``: the links' labels between blocks and inside one."""
    blk = np.asarray(block, dtype=np.int64)
    n = blk.size
    check_link_count(n * (n - 1) // 2, f"{name}: a complete topology of {n} devices")
    bw = np.asarray(bandwidth, dtype=np.float64)
    la = np.asarray(latency, dtype=np.float64)
    ii, jj = np.triu_indices(n, 1)
    bi, bj = blk[ii], blk[jj]
    links = LinkTable(ii, jj, bw[bi, bj], la[bi, bj], kind=(bi == bj).astype(np.int64),
                      labels=kinds)
    del ii, jj, bi, bj
    band, late, _ = route_blocks(blk, bw, la, rule=routing)
    return cluster_from_links(_accelerators(n, memory) if devices is None else devices, links,
                              name=name, group=group, reference_bandwidth=reference_bandwidth,
                              routing=routing, matrices=(band, late))


def _suffix(routing: str) -> str:
    return "" if routing == "widest" else f" ({routing})"


def _blocks(n: int, blocks: int, rng: np.random.Generator, name: str) -> np.ndarray:
    if blocks < 1 or n % blocks:
        raise UsageError(f"{name}: blocks must be >= 1 and divide n={n}, got {blocks}")
    block = np.empty(n, np.int64)
    block[rng.permutation(n)] = np.repeat(np.arange(blocks), n // blocks)
    return block


def random_blk_1(*, n: int = 16, blocks: int = 4, intra: float = 100e9, inter: float = 10e9,
                 latency: float = 0.0, seed: int = 0, memory: float = math.inf,
                 routing: str = "widest") -> Cluster:
    """Complete graph, random equal blocks: ``intra`` inside a block, ``inter`` between.

    Examples
    --------
    >>> c = random_blk_1(n=4, blocks=2, intra=2.0, inter=1.0)
    >>> sorted({x.bandwidth for x in c.links}), sum(x.bandwidth == 2.0 for x in c.links)
    ([1.0, 2.0], 2)
    """
    block = _blocks(n, blocks, np.random.default_rng(seed), "random_blk_1")
    eye = np.eye(blocks, dtype=np.bool_)
    return _complete(block, np.where(eye, intra, inter), np.full((blocks, blocks), latency),
                     f"random_blk_1 n={n}{_suffix(routing)}", routing, memory=memory)


def random_blk_2(*, n: int = 16, blocks: int = 4, intra_lo: float = 50e9,
                 intra_hi: float = 150e9, inter_lo: float = 5e9, inter_hi: float = 25e9,
                 latency: float = 0.0, seed: int = 0, memory: float = math.inf,
                 routing: str = "widest") -> Cluster:
    """Complete graph, random equal blocks; one random bandwidth per block and per block pair.

    Examples
    --------
    >>> c = random_blk_2(n=6, blocks=3)
    >>> len({x.bandwidth for x in c.links}) <= 3 + 3
    True
    """
    rng = np.random.default_rng(seed)
    block = _blocks(n, blocks, rng, "random_blk_2")
    for lo, hi, what in ((intra_lo, intra_hi, "intra"), (inter_lo, inter_hi, "inter")):
        if not (0 < lo <= hi < math.inf):
            raise UsageError(f"random_blk_2: need 0 < {what}_lo <= {what}_hi < inf")
    level = rng.uniform(inter_lo, inter_hi, size=(blocks, blocks))
    level = np.triu(level) + np.triu(level, 1).T
    level[np.diag_indices(blocks)] = rng.uniform(intra_lo, intra_hi, size=blocks)
    return _complete(block, level, np.full((blocks, blocks), latency),
                     f"random_blk_2 n={n}{_suffix(routing)}", routing, memory=memory)


def uniform_dist(*, n: int = 16, lo: float = 5e9, hi: float = 150e9, latency: float = 0.0,
                 seed: int = 0, memory: float = math.inf, routing: str = "widest") -> Cluster:
    """Complete graph, every link's bandwidth uniform in ``[lo, hi]``.

    Examples
    --------
    >>> len(uniform_dist(n=5).links)
    10
    """
    if not (0 < lo <= hi < math.inf):
        raise UsageError("uniform_dist: need 0 < lo <= hi < inf")
    if n < 1:
        raise UsageError(f"uniform_dist: n must be >= 1, got {n}")
    check_link_count(n * (n - 1) // 2, f"uniform_dist: a complete topology of {n} devices")
    draws = np.random.default_rng(seed).uniform(lo, hi, size=(n, n))
    ii, jj = np.triu_indices(n, 1)
    links = LinkTable(ii, jj, draws[ii, jj], np.full(ii.size, latency))
    del draws, ii, jj
    return cluster_from_links(_accelerators(n, memory), links,
                              name=f"uniform_dist n={n}{_suffix(routing)}", routing=routing)


GENERATORS: dict[str, Callable[..., Cluster]] = {
    "two-level": two_level,
    "dgx1": dgx1,
    "dgx2": dgx2,
    "mesh2d": mesh2d,
    "torus2d": torus2d,
    "mesh3d": mesh3d,
    "torus3d": torus3d,
    "random_blk_1": random_blk_1,
    "random_blk_2": random_blk_2,
    "uniform_dist": uniform_dist,
}
#: Largest device count a generator may build (dense d x d matrices; 4096^2 floats = 128 MiB).
MAX_GENERATED_DEVICES = 4096
#: Most links a topology may have: kept as arrays (40 bytes a link), but each is written out
#: in plan and cluster files and crossed by link contention as a ``Link`` object (about 150
#: bytes); a complete graph of 1,448 devices has 1,047,628.
MAX_LINKS = 1 << 20
#: Integer parameters and their least value (``routed`` is 0 or 1, ``seed`` < 2**63).
_INT_PARAMS = {"nodes": 1, "gpus": 1, "x": 1, "y": 1, "z": 1, "n": 1, "blocks": 1, "seed": 0,
               "routed": 0}
_INT_MAX = {"routed": 1, "seed": 2**63 - 1}
#: Parameters that are a latency (finite, >= 0) or a memory (>= 0, ``inf``: unbounded); every
#: other number is a bandwidth (finite, > 0).
_LATENCY_PARAMS = {"latency", "inter_latency"}
_MEMORY_PARAMS = {"memory"}


def check_link_count(n: int, where: str) -> int:
    """Refuse a topology of more than :data:`MAX_LINKS` links before building it.

    Examples
    --------
    >>> check_link_count(8_386_560, "uniform_dist n=4096")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    dnnpart.errors.UsageError: uniform_dist n=4096: 8,386,560 links, more than the 1,048,576 ...
    """
    if n > MAX_LINKS:
        raise UsageError(f"{where}: {n:,} links, more than the {MAX_LINKS:,} dnnpart routes; use "
                         "fewer devices, or a cluster file with a `bandwidth` matrix (used as given)")
    return n


def excerpt(value: Any, limit: int = 40) -> str:
    """A bounded rendering of a bad value for a message (containers are cut, not expanded).

    Examples
    --------
    >>> excerpt("x" * 1000)[:12], len(excerpt([[1] * 10**6] * 10**6)) <= 120
    ("'xxxxxxxxxxx", True)
    """
    import reprlib

    r = reprlib.Repr()
    r.maxlevel, r.maxlist, r.maxtuple, r.maxdict, r.maxstring, r.maxother = 3, 6, 6, 4, limit, limit
    r.maxlong = limit
    text = r.repr(value)
    return text if len(text) <= 3 * limit else text[:3 * limit - 3] + "..."


def generator_parameters(name: str) -> dict[str, Any]:
    """A generator's parameters and their defaults.

    Examples
    --------
    >>> sorted(generator_parameters("mesh2d"))
    ['bw', 'latency', 'memory', 'routing', 'x', 'y']
    """
    return {k: p.default for k, p in inspect.signature(GENERATORS[name]).parameters.items()}


def generate(name: str, params: dict[str, Any] | None = None) -> Cluster:
    """Build a generator's cluster; ``params`` are its keyword arguments (text or numbers).

    Every parameter is checked against its range before anything is built, and a message
    names it: counts ``>= 1`` (``seed >= 0``, ``routed`` 0 or 1), bandwidths finite ``> 0``,
    latencies finite ``>= 0``, memory ``>= 0``, ``routing`` one of the rules; the planned
    devices and links are bounded by :data:`MAX_GENERATED_DEVICES` and :data:`MAX_LINKS`.

    Examples
    --------
    >>> generate("torus3d", {"x": "2", "y": "2", "z": "2"}).n_devices
    8
    >>> generate("dgx1", {"routed": "-1"})
    Traceback (most recent call last):
    ...
    dnnpart.errors.UsageError: dgx1: parameter routed must be an integer in [0, 1], got '-1'
    """
    if name not in GENERATORS:
        raise UsageError(f"unknown topology generator {excerpt(name)}; known: {', '.join(GENERATORS)}")
    defaults = generator_parameters(name)
    kwargs: dict[str, Any] = {}
    for key, raw in (params or {}).items():
        key = str(key).strip().replace("-", "_")
        if key not in defaults:
            raise UsageError(f"{name}: unknown parameter {excerpt(key)}; parameters: "
                             f"{', '.join(sorted(defaults))}")
        kwargs[key] = _parameter(name, key, raw)
    size = _planned_size(name, {**defaults, **kwargs})
    if size > MAX_GENERATED_DEVICES:
        raise UsageError(f"{name}: {size:,} devices exceed the limit of {MAX_GENERATED_DEVICES:,}")
    if name in ("two-level", "random_blk_1", "random_blk_2", "uniform_dist") or (
            name == "dgx1" and size > 8):  # complete (dgx1: across its machines)
        check_link_count(size * (size - 1) // 2, f"{name}: a complete topology of {size:,} devices")
    return GENERATORS[name](**kwargs)


def _parameter(name: str, key: str, raw: Any) -> Any:
    """One parameter's value, checked against its range (module constants)."""
    from dnnpart.devices.routing import ROUTING_RULES

    if key == "routing":  # the one text parameter: the cluster's routing rule
        if not isinstance(raw, str) or raw.strip() not in ROUTING_RULES:
            raise UsageError(f"{name}: routing must be one of {list(ROUTING_RULES)}, "
                             f"got {excerpt(raw)}")
        return raw.strip()
    if isinstance(raw, bool) or not isinstance(raw, (str, int, float)):
        raise UsageError(f"{name}: parameter {key} must be a number, got {excerpt(raw)}")
    try:
        value = float(raw)
    except ValueError:
        raise UsageError(f"{name}: parameter {key}={excerpt(raw)} is not a number") from None
    except OverflowError:
        raise UsageError(f"{name}: parameter {key}={excerpt(raw)} is out of range") from None
    if key in _INT_PARAMS:
        low, high = _INT_PARAMS[key], _INT_MAX.get(key, MAX_GENERATED_DEVICES)
        if not (value.is_integer() and low <= value <= high):
            raise UsageError(f"{name}: parameter {key} must be an integer in [{low}, {high}], "
                             f"got {excerpt(raw)}")
        return int(raw) if isinstance(raw, int) else int(value)
    if key in _LATENCY_PARAMS:
        ok, what = math.isfinite(value) and value >= 0, "a finite number >= 0 (seconds)"
    elif key in _MEMORY_PARAMS:
        ok, what = not math.isnan(value) and value >= 0, "a number >= 0 (bytes; inf: unbounded)"
    else:
        ok, what = math.isfinite(value) and value > 0, "a finite number > 0 (bytes/s)"
    if not ok:
        raise UsageError(f"{name}: parameter {key} must be {what}, got {excerpt(raw)}")
    return value


def _planned_size(name: str, values: dict[str, Any]) -> int:
    if name == "two-level":
        return int(values["nodes"]) * int(values["gpus"])
    if name == "dgx1":
        return 8 * int(values["nodes"])
    if name == "dgx2":
        return 16
    if name in ("mesh2d", "torus2d"):
        return int(values["x"]) * int(values["y"])
    if name in ("mesh3d", "torus3d"):
        return int(values["x"]) * int(values["y"]) * int(values["z"])
    return int(values["n"])


def parse_generator_spec(spec: str) -> tuple[str, dict[str, str]]:
    """``"torus3d:x=8,y=8,z=8"`` -> ``("torus3d", {"x": "8", ...})``.

    Examples
    --------
    >>> parse_generator_spec("mesh2d:x=2,y=3")
    ('mesh2d', {'x': '2', 'y': '3'})
    """
    name, _, rest = spec.partition(":")
    params: dict[str, str] = {}
    for item in filter(None, (p.strip() for p in rest.split(","))):
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--cluster {spec!r}: expected GENERATOR:key=value,..., got {item!r}")
        if key.strip() in params:
            raise UsageError(f"--cluster {spec!r}: parameter {key.strip()!r} given twice")
        params[key.strip()] = value.strip()
    return name.strip(), params
