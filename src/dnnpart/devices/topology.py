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

import itertools
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from dnnpart.devices.cluster import ACCELERATOR, Cluster, Device, Link
from dnnpart.devices.presets import PCIE3_X16_BANDWIDTH, two_level_cluster
from dnnpart.devices.routing import route, unreachable_pair
from dnnpart.errors import UsageError

#: One NVLink 2.0 brick, bytes/s per direction (V100: 25 GB/s signalling, ~24 usable).
NVLINK2_BRICK = 24e9
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
    devices: Sequence[Device], links: Sequence[Link], *, name: str = "",
    group: Sequence[int] | npt.ArrayLike | None = None, time_unit_s: float = 1e-3,
    reference_bandwidth: float | None = None, routing: str = "widest",
) -> Cluster:
    """A cluster whose matrices are routed from ``links`` by ``routing`` (see module doc).

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
    for link in links:
        if max(link.a, link.b) >= d:
            raise UsageError(f"link {link.a}-{link.b}: the topology has {d} devices")
    bw, lat, _ = route(d, [x.a for x in links], [x.b for x in links],
                       [x.bandwidth for x in links], [x.latency for x in links], rule=routing)
    pair = unreachable_pair(bw)
    if pair is not None:
        raise UsageError(
            f"topology is disconnected: {devices[pair[0]].name} cannot reach {devices[pair[1]].name}"
        )
    return Cluster(
        devices=tuple(devices), bandwidth=bw, latency=lat,
        group=np.zeros(d, np.int64) if group is None else np.asarray(group, np.int64),
        name=name, time_unit_s=time_unit_s, reference_bandwidth=reference_bandwidth,
        links=tuple(links), routed=True, routing=routing,
    )


def _accelerators(n: int, memory: float) -> list[Device]:
    return [Device(name=f"acc{i}", kind=ACCELERATOR, memory_bytes=memory) for i in range(n)]


# -- generators -------------------------------------------------------------------------
def two_level(*, nodes: int = 2, gpus: int = 4, intra: float = 150e9, inter: float = 12.5e9,
              latency: float = 0.0, inter_latency: float = 0.0,
              memory: float = math.inf) -> Cluster:
    """Machines of accelerators joined pairwise (``docs/topologies.md``).

    Examples
    --------
    >>> c = two_level(nodes=2, gpus=2, intra=4.0, inter=1.0)
    >>> c.bandwidth.tolist(), c.group.tolist()
    ([[inf, 4.0, 1.0, 1.0], [4.0, inf, 1.0, 1.0], [1.0, 1.0, inf, 4.0], [1.0, 1.0, 4.0, inf]], [0, 0, 1, 1])
    """
    base = two_level_cluster(n_groups=nodes, accelerators_per_group=gpus, memory_bytes=memory,
                             intra_bandwidth=intra, inter_bandwidth=inter)
    g = base.group
    links = [
        Link(a=i, b=j, bandwidth=intra if g[i] == g[j] else inter,
             latency=latency if g[i] == g[j] else inter_latency,
             kind="intra" if g[i] == g[j] else "inter")
        for i, j in itertools.combinations(range(base.n_devices), 2)
    ]
    return cluster_from_links(base.devices, links, name=f"two-level {nodes}x{gpus}", group=g,
                              reference_bandwidth=intra)


def dgx1(*, memory: float = V100_MEMORY, nvlink: float = NVLINK2_BRICK,
         pcie: float = PCIE3_X16_BANDWIDTH, latency: float = 0.0, routed: int = 0) -> Cluster:
    """DGX-1 (V100) hybrid cube-mesh: 8 GPUs, NVLink where wired, PCIe elsewhere.

    Examples
    --------
    >>> c = dgx1()
    >>> (c.bandwidth[[0, 0, 0], [3, 1, 5]] / 1e9).tolist()
    [48.0, 24.0, 15.75]
    """
    devices = _accelerators(8, memory)
    links: list[Link] = []
    bw = np.full((8, 8), pcie)
    for (i, j), bricks in DGX1_NVLINK.items():
        links.append(Link(a=i, b=j, bandwidth=bricks * nvlink, latency=latency,
                          kind=f"nvlink x{bricks}"))
        bw[i, j] = bw[j, i] = bricks * nvlink
    for i, j in itertools.combinations(range(8), 2):
        if (i, j) not in DGX1_NVLINK:
            links.append(Link(a=i, b=j, bandwidth=pcie, latency=latency, kind="pcie"))
    if routed:
        return cluster_from_links(devices, links, name="dgx1 (routed)")
    np.fill_diagonal(bw, math.inf)
    lat = np.full((8, 8), latency)
    np.fill_diagonal(lat, 0.0)
    return Cluster(devices=tuple(devices), bandwidth=bw, latency=lat, name="dgx1",
                   links=tuple(links))


def _grid(dims: Sequence[int], wrap: bool, bw: float, latency: float, memory: float,
          name: str, routing: str = "widest") -> Cluster:
    if any(k < 1 for k in dims):
        raise UsageError(f"{name}: every axis needs >= 1 device, got {list(dims)}")
    n = int(np.prod(dims))
    index = np.arange(n).reshape(tuple(dims))
    links: list[Link] = []
    for axis, k in enumerate(dims):
        if k < 2:
            continue
        src = index
        dst = np.roll(index, -1, axis=axis)
        pairs = zip(src.reshape(-1).tolist(), dst.reshape(-1).tolist(), strict=True)
        coord = np.indices(tuple(dims))[axis].reshape(-1)
        for (u, v), c in zip(pairs, coord.tolist(), strict=True):
            last = c == k - 1
            if last and (not wrap or k == 2):  # mesh: no wrap; torus of 2: link already there
                continue
            links.append(Link(a=u, b=v, bandwidth=bw, latency=latency, kind=f"axis{axis}"))
    suffix = "" if routing == "widest" else f" ({routing})"
    return cluster_from_links(_accelerators(n, memory), links,
                              name=f"{name} {'x'.join(map(str, dims))}{suffix}", routing=routing)


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


def _complete(n: int, bandwidth: Callable[[int, int], float], latency: float, memory: float,
              name: str, routing: str = "widest") -> Cluster:
    if n < 1:
        raise UsageError(f"{name}: n must be >= 1, got {n}")
    links = [Link(a=i, b=j, bandwidth=bandwidth(i, j), latency=latency)
             for i, j in itertools.combinations(range(n), 2)]
    suffix = "" if routing == "widest" else f" ({routing})"
    return cluster_from_links(_accelerators(n, memory), links, name=f"{name} n={n}{suffix}",
                              routing=routing)


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
    return _complete(n, lambda i, j: intra if block[i] == block[j] else inter, latency, memory,
                     "random_blk_1", routing)


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
    return _complete(n, lambda i, j: float(level[block[i], block[j]]), latency, memory,
                     "random_blk_2", routing)


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
    draws = np.random.default_rng(seed).uniform(lo, hi, size=(n, n))
    return _complete(n, lambda i, j: float(draws[i, j]), latency, memory, "uniform_dist",
                     routing)


GENERATORS: dict[str, Callable[..., Cluster]] = {
    "two-level": two_level,
    "dgx1": dgx1,
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
_INT_PARAMS = {"nodes", "gpus", "x", "y", "z", "n", "blocks", "seed", "routed"}


def generate(name: str, params: dict[str, Any] | None = None) -> Cluster:
    """Build a generator's cluster; ``params`` are its keyword arguments (text or numbers).

    Examples
    --------
    >>> generate("torus3d", {"x": "2", "y": "2", "z": "2"}).n_devices
    8
    """
    try:
        func = GENERATORS[name]
    except KeyError:
        raise UsageError(f"unknown topology generator {name!r}; known: {', '.join(GENERATORS)}") from None
    import inspect

    allowed = set(inspect.signature(func).parameters)
    kwargs: dict[str, Any] = {}
    for key, raw in (params or {}).items():
        key = key.strip().replace("-", "_")
        if key not in allowed:
            raise UsageError(f"{name}: unknown parameter {key!r}; parameters: {', '.join(sorted(allowed))}")
        if key == "routing":  # the one text parameter: the cluster's routing rule
            from dnnpart.devices.routing import check_rule

            try:
                kwargs[key] = check_rule(str(raw).strip())
            except ValueError as exc:
                raise UsageError(f"{name}: {exc}") from None
            continue
        try:
            value = float(raw)
        except (TypeError, ValueError):
            raise UsageError(f"{name}: parameter {key}={raw!r} is not a number") from None
        if key in _INT_PARAMS:
            if not value.is_integer():
                raise UsageError(f"{name}: parameter {key} must be an integer, got {raw!r}")
            kwargs[key] = int(value)
        else:
            if math.isnan(value) or value < 0:
                raise UsageError(f"{name}: parameter {key} must be >= 0, got {raw!r}")
            kwargs[key] = value
    size = _planned_size(name, kwargs, inspect.signature(func).parameters)
    if size > MAX_GENERATED_DEVICES:
        raise UsageError(f"{name}: {size} devices exceed the limit of {MAX_GENERATED_DEVICES}")
    if name not in ("dgx1",) and size < 1:
        raise UsageError(f"{name}: needs at least one device, got {size}")
    return func(**kwargs)


def _planned_size(name: str, kwargs: dict[str, Any], sig: Any) -> int:
    def get(key: str) -> int:
        return int(kwargs.get(key, sig[key].default))

    if name == "two-level":
        return get("nodes") * get("gpus")
    if name == "dgx1":
        return 8
    if name in ("mesh2d", "torus2d"):
        return get("x") * get("y")
    if name in ("mesh3d", "torus3d"):
        return get("x") * get("y") * get("z")
    return get("n")


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
