"""The three cost functions of paper 3, §5.1: t_C, t_X, t_S, each over whole configuration tables.

Every function is vectorised over configurations with numpy broadcasting, except t_X of an
edge with more than ``_DIRECT_PAIRS`` tile pairs, which a compiled loop prices pair by pair
(:mod:`dnnpart.layerwise.transfer_kernel`); a single pair is the same call on one-row spaces (see
:func:`dnnpart.layerwise.configs.ConfigSpace`).
Tensors are FP32 (:data:`BYTES_PER_ELEMENT`).

Choices where the paper is silent (also in ``docs/methods/optcnn.md``, each tested):

* **Input regions** (halos): a consumer tile ``[lo, hi)`` of a convolution or pooling layer
  reads rows ``lo*s - p .. (hi-1)*s - p + k - 1`` of its input (likewise columns), clipped to
  the input; a convolution reads all input channels, pooling the same channels; a fully
  connected layer reads all of ``(C, H, W)`` for its samples; ``add`` and ``softmax`` read
  their own box (softmax's per-sample normaliser is a negligible reduction); ``concat`` reads
  the part of its channel range that falls in input ``k``'s channel block. Samples always
  match. Volumes are products of per-dimension counts, each an interval intersection; a
  window smaller than its stride reads a strided set, counted exactly as a sum of interval
  intersections over the window offsets.
* **t_X** counts forward and backward: forward, every consumer tile receives from each
  producer tile on another device the intersection of that tile with its input region;
  backward, the gradient of the same region travels back. Transfers into one device are
  serialised, devices receive in parallel: ``t_X = max_t sum_s V[s,t]*B/bw[s->t] +
  max_s sum_t V[s,t]*B/bw[t->s]``. Same device: free.
* **t_C** (roofline): per tile, ``max(flops / (peak*eff), bytes / memory bandwidth)`` for the
  forward pass; the backward pass costs twice that for convolution and fully connected layers
  (input and weight gradients), once for the others; t_C is the slowest tile.
* **t_S** (parameter server): the tiles with the same channel coordinate hold the same slice
  of the parameters (``params / c`` values); the server of a slice is the device of its first
  tile (lowest tile index). Every other replica sends its gradient slice to the server and
  receives the new parameters back, one after the other; slices synchronise in parallel, so
  t_S is the slowest slice. One replica: 0.
* **Link accounting** (:data:`TRANSFER_MODELS`): the paper's t_X is "the time to transfer the
  input tensors to the target devices, using the size of the data to be moved and the known
  communication bandwidth", which fits two readings. ``"links"`` (the default, above):
  devices receive in parallel, each over its own links -- what NVLink pairs and separate
  PCIe lanes do. ``"serial"``: every transfer of an edge (and every slice of a
  synchronisation) one after the other, ``t_X = sum_{s,t} V[s,t]*B/bw[s->t] + the same
  backward``, t_S the sum over slices -- a shared bus, and the reading under which a time
  optimum is a byte optimum (uniform links). Kept as an ablation: the paper's Fig. 8 (layer-
  wise moves fewer bytes than OWT) depends on it (``dnnpart reproduce optcnn2018``).
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from dnnpart.devices.specs import DeviceSpec
from dnnpart.errors import UsageError
from dnnpart.layerwise.configs import ConfigSpace
from dnnpart.layerwise.layers import LayerSpec

__all__ = [
    "BYTES_PER_ELEMENT", "TRANSFER_MODELS", "backward_factor", "compute_time", "edge_read_volume",
    "input_region", "inverse_bandwidth",
    "read_volume", "sync_bytes", "sync_time", "tile_forward_times", "transfer_costs", "transfer_time",
]

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]

#: FP32 tensors and parameters.
BYTES_PER_ELEMENT = 4
#: How transfers over several links add up (module docstring): in parallel per receiver, or
#: all one after the other.
TRANSFER_MODELS = ("links", "serial")


def _check_transfers(transfers: str) -> None:
    if transfers not in TRANSFER_MODELS:
        raise UsageError(f"transfers must be one of {', '.join(TRANSFER_MODELS)}, got {transfers!r}")


def input_region(consumer: LayerSpec, k: int, lo: IntArray, hi: IntArray) -> tuple[IntArray, IntArray]:
    """Box ``[nlo, nhi)`` of input ``k`` that consumer tiles ``[lo, hi)`` read (last axis = dims).

    Empty tiles (``lo == hi``) give empty regions. Coordinates are those of the producer's
    output, clipped to it.

    Examples
    --------
    >>> from dnnpart.layerwise.layers import NetBuilder
    >>> b = NetBuilder("t", 2); x = b.input(1, 8, 8); y = b.conv("c", x, 4, 3, 2, 1)
    >>> conv = b.build().layers[y]
    >>> nlo, nhi = input_region(conv, 0, np.array([0, 0, 2, 0]), np.array([2, 4, 4, 4]))
    >>> nlo.tolist(), nhi.tolist()
    ([0, 0, 3, 0], [2, 1, 8, 8])
    """
    shape = np.asarray(consumer.in_shapes[k], dtype=np.int64)
    nlo, nhi = lo.copy(), hi.copy()
    op = consumer.op
    if consumer.has_window:
        for d, axis in ((0, 2), (1, 3)):
            kk, s, p = consumer.kernel[d], consumer.stride[d], consumer.padding[d]
            nlo[..., axis] = lo[..., axis] * s - p
            nhi[..., axis] = (hi[..., axis] - 1) * s - p + kk
        if op == "conv":
            nlo[..., 1], nhi[..., 1] = 0, shape[1]
    elif op == "fc":
        nlo[..., 1:], nhi[..., 1:] = 0, shape[1:]
    elif op == "concat":
        off = sum(s[1] for s in consumer.in_shapes[:k])
        nlo[..., 1] = lo[..., 1] - off
        nhi[..., 1] = hi[..., 1] - off
    elif op not in ("add", "softmax"):
        raise UsageError(f"layer {consumer.name!r} of kind {op!r} has no inputs to read")
    nlo = np.clip(nlo, 0, shape)
    nhi = np.clip(nhi, 0, shape)
    # a tile with no samples reads nothing, whatever its halo says
    empty = (hi[..., :1] <= lo[..., :1])
    return np.where(empty, 0, nlo), np.where(empty, 0, np.maximum(nhi, nlo))


def _ceil_div(a: IntArray, b: int) -> IntArray:
    out: IntArray = np.negative(np.floor_divide(np.negative(a), b))
    return out


def read_volume(consumer: LayerSpec, k: int, alo: IntArray, ahi: IntArray,
                lo: IntArray, hi: IntArray) -> IntArray:
    """Elements of box ``[alo, ahi)`` of input ``k`` that consumer tiles ``[lo, hi)`` read (broadcast).

    The hull of the read set is :func:`input_region`; along a windowed axis whose kernel is
    smaller than its stride only rows ``o*s - p + i`` (``i < kernel``) are read, counted per
    offset ``i``.

    Examples
    --------
    >>> from dnnpart.layerwise.layers import NetBuilder
    >>> b = NetBuilder("t", 1); x = b.input(1, 1, 7); y = b.conv("c", x, 1, 1, 3)   # 1x1, stride 3
    >>> conv = b.build().layers[y]
    >>> whole = (np.zeros(4, dtype=np.int64), np.array([1, 1, 1, 7]))
    >>> int(read_volume(conv, 0, *whole, np.zeros(4, dtype=np.int64), np.array([1, 1, 1, 3])))
    3
    """
    nlo, nhi = input_region(consumer, k, lo, hi)
    out: IntArray = np.ones((), dtype=np.int64)
    for axis in range(lo.shape[-1]):  # the volume of a box intersection: its sides' product
        out = out * _sides(consumer, axis, alo[..., axis], ahi[..., axis], nlo[..., axis], nhi[..., axis],
                           lo[..., axis], hi[..., axis])
    return out


def _sides(consumer: LayerSpec, axis: int, alo: IntArray, ahi: IntArray, nlo: IntArray, nhi: IntArray,
           olo: IntArray, ohi: IntArray) -> IntArray:
    """Along ``axis``: elements of ``[alo, ahi)`` read by consumer tiles whose output interval is
    ``[olo, ohi)`` and whose input region is ``[nlo, nhi)`` (broadcast)."""
    side: IntArray = np.maximum(np.minimum(ahi, nhi) - np.maximum(alo, nlo), 0)
    if not consumer.has_window or axis < 2:
        return side
    kk, s, p = consumer.kernel[axis - 2], consumer.stride[axis - 2], consumer.padding[axis - 2]
    if kk >= s:
        return side  # windows overlap or touch: the hull is read entirely
    count = np.zeros(np.broadcast_shapes(alo.shape, olo.shape), dtype=np.int64)
    for i in range(kk):
        first = np.maximum(olo, _ceil_div(alo + p - i, s))
        last = np.minimum(ohi, _ceil_div(ahi + p - i, s))
        count += np.maximum(last - first, 0)
    return count


def edge_read_volume(producer: ConfigSpace, consumer: LayerSpec, k: int, cons: ConfigSpace) -> IntArray:
    """:func:`read_volume` of every producer tile against every consumer tile of input ``k``:
    ``(C_producer, C_consumer, T_producer, T_consumer)`` (broadcast boxes: for small edges;
    :func:`transfer_costs` prices large ones pair by pair without this array).

    Examples
    --------
    >>> from dnnpart.layerwise.configs import config_space
    >>> from dnnpart.layerwise.models import lenet5
    >>> g = lenet5(4)
    >>> a, b = config_space(g.layers[0], 2), config_space(g.layers[1], 2)
    >>> vol = edge_read_volume(a, g.layers[1], 0, b)
    >>> both_by_samples = vol[a.index((2, 1, 1, 1)), b.index((2, 1, 1, 1))]
    >>> vol.shape, both_by_samples.tolist()  # each tile reads its own 2 x 28 x 28 half
    ((4, 5, 2, 2), [[1568, 0], [0, 1568]])
    """
    return read_volume(consumer, k, producer.lo[:, None, :, None, :], producer.hi[:, None, :, None, :],
                       cons.lo[None, :, None, :, :], cons.hi[None, :, None, :, :])


#: Tile pairs up to which :func:`transfer_costs` broadcasts an edge's tile boxes (numpy);
#: above, a compiled loop prices each pair from per-axis tables of distinct intervals.
_DIRECT_PAIRS = 1 << 14


def _axis_sides(producer: ConfigSpace, consumer: LayerSpec, k: int,
                cons: ConfigSpace) -> list[tuple[IntArray, IntArray, FloatArray]]:
    """Per axis, ``(p_of, c_of, sides)``: each producer tile's row and each consumer tile's
    column of ``sides``, the elements along that axis a consumer tile reads of a producer tile,
    between the distinct intervals only (a box intersection's volume is the product of its
    sides, and along one axis a space's tiles have few distinct intervals)."""
    nlo, nhi = input_region(consumer, k, cons.lo, cons.hi)
    out = []
    for axis in range(producer.lo.shape[-1]):
        p_of, (alo, ahi) = _distinct(producer.lo[..., axis], producer.hi[..., axis])
        c_of, (rlo, rhi, olo, ohi) = _distinct(nlo[..., axis], nhi[..., axis], cons.lo[..., axis],
                                               cons.hi[..., axis])
        sides = _sides(consumer, axis, alo[:, None], ahi[:, None], rlo[None, :], rhi[None, :],
                       olo[None, :], ohi[None, :]).astype(np.float64)
        out.append((p_of, c_of, sides))
    return out


def _compiled_transfer_costs(producer: ConfigSpace, consumer: LayerSpec, k: int, cons: ConfigSpace,
                             inv: FloatArray, serial: bool) -> tuple[FloatArray, FloatArray]:
    """:func:`transfer_costs` of a large edge by
    :func:`~dnnpart.layerwise.transfer_kernel.edge_transfer_tables`, from its per-axis sides
    (:func:`_axis_sides`), stacked into one padded table."""
    from dnnpart.layerwise.transfer_kernel import edge_transfer_tables

    per_axis = _axis_sides(producer, consumer, k, cons)
    sides = np.zeros((len(per_axis), max(s.shape[0] for _, _, s in per_axis),
                      max(s.shape[1] for _, _, s in per_axis)))
    for a, (_, _, side) in enumerate(per_axis):
        sides[a, :side.shape[0], :side.shape[1]] = side
    p_of = np.stack([p for p, _, _ in per_axis]).astype(np.int64)
    c_of = np.stack([c for _, c, _ in per_axis]).astype(np.int64)
    shape = (len(producer), len(cons))
    fwd, bwd, moved = np.empty(shape), np.empty(shape), np.empty(shape)
    # padding tiles (device -1) have empty boxes: every volume with them is 0
    edge_transfer_tables(p_of, c_of, sides, producer.device.astype(np.int64),
                         cons.device.astype(np.int64), inv, float(BYTES_PER_ELEMENT), serial,
                         fwd, bwd, moved)
    return fwd + bwd, moved


def _distinct(*columns: IntArray) -> tuple[IntArray, tuple[IntArray, ...]]:
    """The distinct rows of equally shaped non-negative integer arrays read side by side: each
    element's row number, and the rows' columns."""
    radix = int(max(int(c.max(initial=0)) for c in columns)) + 1
    key = np.zeros(columns[0].shape, dtype=np.int64)
    for c in columns:  # one integer per row (mixed radix): a 1-D unique, not a row-wise one
        key = key * radix + c
    if radix ** len(columns) >= 2**62:  # too wide for one int64: row-wise
        rows = np.stack([c.ravel() for c in columns], axis=1)
        uniq, of = np.unique(rows, axis=0, return_inverse=True)
        return of.reshape(columns[0].shape), tuple(uniq.T)
    _, first, of = np.unique(key.ravel(), return_index=True, return_inverse=True)
    return of.reshape(columns[0].shape), tuple(c.ravel()[first] for c in columns)


def inverse_bandwidth(bandwidth: FloatArray) -> FloatArray:
    """Seconds per byte between device pairs, 0 on the diagonal (no transfer to oneself)."""
    with np.errstate(divide="ignore"):
        inv = 1.0 / np.asarray(bandwidth, dtype=np.float64)
    np.fill_diagonal(inv, 0.0)
    return inv


def _gather_inv(inv_bw: FloatArray, src: IntArray, dst: IntArray) -> FloatArray:
    # padding tiles have device -1; their volumes are 0, so any finite entry will do
    out: FloatArray = inv_bw[np.maximum(src, 0), np.maximum(dst, 0)]
    return out


def transfer_costs(producer: ConfigSpace, consumer: LayerSpec, k: int, cons: ConfigSpace,
                   bandwidth: FloatArray, *, transfers: str = "links") -> tuple[FloatArray, FloatArray]:
    """t_X and bytes moved (forward plus backward) of the edge into input ``k`` of ``consumer``.

    Both are ``(C_producer, C_consumer)`` tables; see :func:`transfer_time`. ``transfers``:
    how the transfers add up (:data:`TRANSFER_MODELS`).

    Examples
    --------
    >>> from dnnpart.layerwise.configs import config_space
    >>> from dnnpart.layerwise.hardware import uniform_bandwidth
    >>> from dnnpart.layerwise.models import lenet5
    >>> g = lenet5(4)
    >>> a, b = config_space(g.layers[0], 2), config_space(g.layers[1], 2)
    >>> t, moved = transfer_costs(a, g.layers[1], 0, b, uniform_bandwidth(2, 2.0))
    >>> i, j = a.index((1, 1, 1, 1)), b.index((2, 1, 1, 1))
    >>> float(moved[i, j]), float(t[i, j])   # half the 4x28x28 input, there and back
    (12544.0, 6272.0)

    Samples split, rows needed split: each device receives from the other. Serial accounting
    adds what the two receivers got in parallel:

    >>> i, j = a.index((2, 1, 1, 1)), b.index((1, 1, 2, 1))
    >>> [float(transfer_costs(a, g.layers[1], 0, b, uniform_bandwidth(2, 2.0), transfers=m)[0][i, j])
    ...  for m in TRANSFER_MODELS]
    [3584.0, 7168.0]
    """
    _check_transfers(transfers)
    inv = inverse_bandwidth(bandwidth)
    shape = (producer.lo.shape[0], cons.lo.shape[0], producer.lo.shape[1], cons.lo.shape[1])
    if math.prod(shape) > _DIRECT_PAIRS:  # large: priced pair by pair, no tile-pair arrays
        return _compiled_transfer_costs(producer, consumer, k, cons, inv, transfers == "serial")
    bytes_ = edge_read_volume(producer, consumer, k, cons) * float(BYTES_PER_ELEMENT)  # (Ci, Cj, Ts, Tt)
    src = producer.device[:, None, :, None]
    dst = cons.device[None, :, None, :]
    seconds = bytes_ * _gather_inv(inv, src, dst)
    serial = transfers == "serial"
    fwd = seconds.sum(axis=(2, 3)) if serial else seconds.sum(axis=2).max(axis=2)
    if not np.array_equal(inv, inv.T):  # else the way back costs the same
        seconds = bytes_ * _gather_inv(inv, dst, src)
    bwd = seconds.sum(axis=(2, 3)) if serial else seconds.sum(axis=3).max(axis=2)
    moved = 2.0 * np.where(src != dst, bytes_, 0.0).sum(axis=(2, 3))
    return fwd + bwd, moved


def transfer_time(producer: ConfigSpace, consumer: LayerSpec, k: int, cons: ConfigSpace,
                  bandwidth: FloatArray) -> FloatArray:
    """t_X of the edge into input ``k`` of ``consumer``: a ``(C_producer, C_consumer)`` table.

    Examples
    --------
    >>> from dnnpart.layerwise.configs import config_space
    >>> from dnnpart.layerwise.hardware import uniform_bandwidth
    >>> from dnnpart.layerwise.models import lenet5
    >>> g = lenet5(4)
    >>> a, b = config_space(g.layers[0], 2), config_space(g.layers[1], 2)
    >>> t = transfer_time(a, g.layers[1], 0, b, uniform_bandwidth(2, 1.0))
    >>> t.shape, float(t[0, 0]), float(t[a.index((2, 1, 1, 1)), b.index((2, 1, 1, 1))])
    ((4, 5), 0.0, 0.0)
    """
    return transfer_costs(producer, consumer, k, cons, bandwidth)[0]


def _tile_elements(space: ConfigSpace) -> IntArray:
    out: IntArray = np.prod(space.hi - space.lo, axis=-1)
    return out


def tile_forward_times(layer: LayerSpec, space: ConfigSpace, device: DeviceSpec) -> FloatArray:
    """Forward time of every tile of every configuration: a ``(C, T)`` roofline table.

    Padding tiles take 0; the backward pass of a tile takes :func:`backward_factor` times its
    forward time.

    Examples
    --------
    >>> from dnnpart.layerwise.configs import config_space
    >>> from dnnpart.layerwise.hardware import P100
    >>> from dnnpart.layerwise.models import vgg16
    >>> layer = vgg16(32).layers[3]
    >>> f = tile_forward_times(layer, config_space(layer, 2), P100)
    >>> f.shape, bool(f[0, 1] == 0.0)
    ((5, 2), True)
    """
    out_elems = _tile_elements(space).astype(np.float64)                 # (C, T)
    in_elems = np.zeros_like(out_elems)
    for k, shape in enumerate(layer.in_shapes):
        whole = np.zeros(4, dtype=np.int64), np.asarray(shape, dtype=np.int64)
        in_elems += read_volume(layer, k, *whole, space.lo, space.hi)
    op = layer.op
    channels = (space.hi[..., 1] - space.lo[..., 1]).astype(np.float64)   # output channels per tile
    if op == "conv":
        cin = layer.in_shapes[0][1]
        macs = cin * layer.kernel[0] * layer.kernel[1]
        flops = 2.0 * out_elems * macs
        param_elems = channels * (macs + 1)
    elif op == "fc":
        _, c, h, w = layer.in_shapes[0]
        flops = 2.0 * out_elems * c * h * w
        param_elems = channels * (c * h * w + 1)
    elif op in ("pool_max", "pool_avg"):
        flops = out_elems * layer.kernel[0] * layer.kernel[1]
        param_elems = np.zeros_like(out_elems)
    elif op == "add":
        flops = out_elems * (len(layer.inputs) - 1)
        param_elems = np.zeros_like(out_elems)
    elif op == "softmax":
        flops = 5.0 * out_elems
        param_elems = np.zeros_like(out_elems)
    elif op == "concat":
        flops = np.zeros_like(out_elems)
        param_elems = np.zeros_like(out_elems)
    else:  # input: tiles are loaded in place
        return np.zeros_like(out_elems)
    bytes_ = BYTES_PER_ELEMENT * (in_elems + out_elems + param_elems)
    out: FloatArray = np.where(out_elems > 0, np.maximum(flops / device.effective_flops,
                                                         bytes_ / device.effective_bandwidth), 0.0)
    return out


def backward_factor(layer: LayerSpec) -> float:
    """Backward time over forward time: 2 for convolution and fully connected layers (input and
    weight gradients), 1 otherwise.

    Examples
    --------
    >>> from dnnpart.layerwise.models import lenet5
    >>> [backward_factor(x) for x in lenet5(1).layers[:3]]
    [1.0, 2.0, 1.0]
    """
    return 2.0 if layer.op in ("conv", "fc") else 1.0


def compute_time(layer: LayerSpec, space: ConfigSpace, device: DeviceSpec) -> FloatArray:
    """t_C of every configuration: forward plus backward of the slowest tile (roofline).

    Examples
    --------
    >>> from dnnpart.layerwise.configs import config_space
    >>> from dnnpart.layerwise.hardware import P100
    >>> from dnnpart.layerwise.models import vgg16
    >>> layer = vgg16(32).layers[3]
    >>> t = compute_time(layer, config_space(layer, 4), P100)
    >>> bool(t[0] > 3.9 * t[-1])   # 4 tiles: about a quarter of the work each
    True
    """
    forward = tile_forward_times(layer, space, device)
    out: FloatArray = ((1.0 + backward_factor(layer)) * forward).max(axis=1)
    return out


def sync_bytes(layer: LayerSpec, space: ConfigSpace) -> FloatArray:
    """Bytes moved by parameter synchronisation per configuration (gradients in, parameters out).

    Under the parameter-server rule every replica but the first of each channel slice sends
    and receives the slice: ``2 * 4 * params * (n*h*w - 1)`` bytes in all.

    Examples
    --------
    >>> from dnnpart.layerwise.configs import config_space
    >>> from dnnpart.layerwise.models import vgg16
    >>> fc = vgg16(8).layers[-2]
    >>> space = config_space(fc, 2)
    >>> sync_bytes(fc, space)[space.index((2, 1, 1, 1))] == 2 * 4 * fc.params
    np.True_
    """
    replicas = space.degrees[:, 0] * space.degrees[:, 2] * space.degrees[:, 3]
    out: FloatArray = 2.0 * BYTES_PER_ELEMENT * layer.params * (replicas - 1).astype(np.float64)
    return out


def sync_time(layer: LayerSpec, space: ConfigSpace, bandwidth: FloatArray, *,
              transfers: str = "links") -> FloatArray:
    """t_S of every configuration under the parameter-server rule (module docstring): the
    slowest slice, or with ``transfers="serial"`` all slices one after the other.

    Examples
    --------
    >>> from dnnpart.layerwise.configs import config_space
    >>> from dnnpart.layerwise.hardware import uniform_bandwidth
    >>> from dnnpart.layerwise.models import vgg16
    >>> fc = vgg16(8).layers[-2]
    >>> space = config_space(fc, 2)
    >>> t = sync_time(fc, space, uniform_bandwidth(2, 1e9))
    >>> float(t[space.index((1, 2, 1, 1))]), round(float(t[space.index((2, 1, 1, 1))]), 6)
    (0.0, 0.032776)
    """
    _check_transfers(transfers)
    out = np.zeros(len(space), dtype=np.float64)
    if layer.params == 0:
        return out
    inv = inverse_bandwidth(bandwidth)
    combine: Callable[[float, float], float] = operator.add if transfers == "serial" else max
    for i, deg in enumerate(space.degrees):
        c = int(deg[1])
        if int(np.prod(deg)) == c:
            continue  # no replicas
        slice_bytes = BYTES_PER_ELEMENT * layer.params / c
        valid = space.device[i] >= 0
        chan = space.lo[i, valid, 1]
        dev = space.device[i, valid]
        worst = 0.0
        for lo_c in np.unique(chan):
            group = dev[chan == lo_c]          # tile order: the first one is the server
            server, replicas = group[0], group[1:]
            worst = combine(worst, float(slice_bytes * (inv[replicas, server] + inv[server, replicas]).sum()))
        out[i] = worst
    return out
