"""Layer graphs with shapes: the input of OptCNN (paper 3).

A :class:`LayerGraph` is a DAG of :class:`LayerSpec` rows, one per layer, each with its op kind,
the shapes of its inputs and its output (all ``(N, C, H, W)``), kernel/stride/padding as
``(h, w)`` pairs, and its parameter count. :class:`NetBuilder` computes the shapes while a
network is written down (see :mod:`dnnpart.layerwise.models`).

Choices where the paper is silent (also in ``docs/methods/optcnn.md``):

* Every tensor is 4-D ``(N, C, H, W)``; a fully connected layer's output is ``(N, C, 1, 1)``
  and it reads the whole ``(C, H, W)`` of its input (flatten is part of the FC layer).
* Batch normalisation and ReLU are folded into the preceding convolution (or addition), as the
  paper's layer counts do; a convolution has ``C_in/groups * C_out * kh * kw + C_out``
  parameters (bias), a fully connected layer ``C_in*H*W * C_out + C_out``.
* The ``input`` layer produces the data tensor; its tiles are loaded straight onto their
  devices, so it costs nothing to compute and has no parameters.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from dnnpart.errors import UsageError

__all__ = ["OP_KINDS", "LayerGraph", "LayerSpec", "NetBuilder", "Shape"]

Shape = tuple[int, int, int, int]

#: Op kinds a layer may have. ``conv``/``pool_max``/``pool_avg`` have windows (halos),
#: ``fc`` reads its whole input per sample, ``add``/``concat``/``softmax`` are element-wise
#: over ``(H, W)`` (``concat`` stacks channels in input order).
OP_KINDS = ("input", "conv", "pool_max", "pool_avg", "fc", "add", "concat", "softmax")


@dataclass(frozen=True)
class LayerSpec:
    """One layer: op kind, shapes, window and parameters.

    Parameters
    ----------
    name
        Unique layer name.
    op
        One of :data:`OP_KINDS`.
    inputs
        Indices of the producer layers, in input order (concat stacks in this order).
    in_shapes, out_shape
        ``(N, C, H, W)`` of each input and of the output.
    kernel, stride, padding
        ``(h, w)`` window of ``conv``/``pool``; ``(1, 1), (1, 1), (0, 0)`` otherwise.
    params
        Number of trainable parameters.
    """

    name: str
    op: str
    inputs: tuple[int, ...]
    in_shapes: tuple[Shape, ...]
    out_shape: Shape
    kernel: tuple[int, int] = (1, 1)
    stride: tuple[int, int] = (1, 1)
    padding: tuple[int, int] = (0, 0)
    params: int = 0

    @property
    def has_window(self) -> bool:
        """Whether the layer reads a sliding window of its input (convolution, pooling)."""
        return self.op in ("conv", "pool_max", "pool_avg")


@dataclass(frozen=True)
class LayerGraph:
    """A network as a DAG of layers, listed in topological order.

    ``edges`` lists ``(producer, consumer)`` index pairs, one per input of each layer.

    Examples
    --------
    >>> b = NetBuilder("tiny", batch=8)
    >>> x = b.input(3, 32, 32)
    >>> y = b.conv("conv1", x, 16, 3, padding=1)
    >>> g = b.build()
    >>> g.layers[y].out_shape, g.edges
    ((8, 16, 32, 32), ((0, 1),))
    """

    name: str
    layers: tuple[LayerSpec, ...]

    @property
    def edges(self) -> tuple[tuple[int, int], ...]:
        """``(producer, consumer)`` per input of each layer, consumers in order."""
        return tuple((p, j) for j, layer in enumerate(self.layers) for p in layer.inputs)

    def __len__(self) -> int:
        return len(self.layers)

    @property
    def batch(self) -> int:
        """The sample count ``N`` of the layers' tensors."""
        return self.layers[0].out_shape[0] if self.layers else 0

    def with_batch(self, batch: int) -> LayerGraph:
        """The same network on ``batch`` samples (every shape's ``N`` replaced).

        Examples
        --------
        >>> b = NetBuilder("t", 8); x = b.input(1, 4, 4); _ = b.conv("c", x, 2, 3, 1, 1)
        >>> b.build().with_batch(64).layers[1].in_shapes
        ((64, 1, 4, 4),)
        """
        if batch < 1:
            raise UsageError(f"batch must be >= 1, got {batch}")

        def nb(shape: Shape) -> Shape:
            return (batch, shape[1], shape[2], shape[3])

        layers = tuple(replace(x, in_shapes=tuple(nb(s) for s in x.in_shapes), out_shape=nb(x.out_shape))
                       for x in self.layers)
        return LayerGraph(self.name, layers)

    def index(self, name: str) -> int:
        """The index of the layer called ``name``."""
        for i, layer in enumerate(self.layers):
            if layer.name == name:
                return i
        raise KeyError(name)


def _out_len(size: int, k: int, s: int, p: int) -> int:
    out = (size + 2 * p - k) // s + 1
    if out < 1:
        raise UsageError(f"window {k} stride {s} padding {p} does not fit size {size}")
    return out


@dataclass
class NetBuilder:
    """Write a network down layer by layer; shapes and parameter counts are derived.

    Every method returns the new layer's index; ``build`` freezes the graph.
    """

    name: str
    batch: int
    _layers: list[LayerSpec] = field(default_factory=list)

    def _add(self, spec: LayerSpec) -> int:
        if any(spec.name == layer.name for layer in self._layers):
            raise UsageError(f"duplicate layer name {spec.name!r}")
        self._layers.append(spec)
        return len(self._layers) - 1

    def shape(self, i: int) -> Shape:
        """Output shape of layer ``i``."""
        return self._layers[i].out_shape

    def input(self, c: int, h: int, w: int, name: str = "input") -> int:
        """The data tensor ``(batch, c, h, w)``."""
        return self._add(LayerSpec(name, "input", (), (), (self.batch, c, h, w)))

    def conv(self, name: str, src: int, cout: int, kernel: int | tuple[int, int],
             stride: int | tuple[int, int] = 1, padding: int | tuple[int, int] = 0) -> int:
        """Convolution (with folded batch norm and ReLU)."""
        k, s, p = _pair(kernel), _pair(stride), _pair(padding)
        n, cin, h, w = self.shape(src)
        out = (n, cout, _out_len(h, k[0], s[0], p[0]), _out_len(w, k[1], s[1], p[1]))
        params = cin * cout * k[0] * k[1] + cout
        return self._add(LayerSpec(name, "conv", (src,), (self.shape(src),), out, k, s, p, params))

    def pool(self, name: str, src: int, kernel: int, stride: int, padding: int = 0,
             kind: str = "max") -> int:
        """Max or average pooling."""
        k, s, p = _pair(kernel), _pair(stride), _pair(padding)
        n, c, h, w = self.shape(src)
        out = (n, c, _out_len(h, k[0], s[0], p[0]), _out_len(w, k[1], s[1], p[1]))
        return self._add(LayerSpec(name, f"pool_{kind}", (src,), (self.shape(src),), out, k, s, p))

    def fc(self, name: str, src: int, cout: int) -> int:
        """Fully connected layer over the whole ``(C, H, W)`` of its input."""
        n, c, h, w = self.shape(src)
        return self._add(LayerSpec(name, "fc", (src,), (self.shape(src),), (n, cout, 1, 1),
                                   params=c * h * w * cout + cout))

    def add(self, name: str, *srcs: int) -> int:
        """Element-wise sum (residual join, with folded ReLU)."""
        shapes = tuple(self.shape(s) for s in srcs)
        if len(set(shapes)) != 1:
            raise UsageError(f"{name}: add of different shapes {shapes}")
        return self._add(LayerSpec(name, "add", tuple(srcs), shapes, shapes[0]))

    def concat(self, name: str, *srcs: int) -> int:
        """Channel concatenation, in the order given."""
        shapes = tuple(self.shape(s) for s in srcs)
        if len({(s[0], s[2], s[3]) for s in shapes}) != 1:
            raise UsageError(f"{name}: concat of different (N, H, W) {shapes}")
        n, _, h, w = shapes[0]
        return self._add(LayerSpec(name, "concat", tuple(srcs), shapes,
                                   (n, sum(s[1] for s in shapes), h, w)))

    def softmax(self, name: str, src: int) -> int:
        """Softmax over channels."""
        return self._add(LayerSpec(name, "softmax", (src,), (self.shape(src),), self.shape(src)))

    def build(self) -> LayerGraph:
        """Freeze the layers written so far."""
        return LayerGraph(self.name, tuple(self._layers))


def _pair(v: int | tuple[int, int]) -> tuple[int, int]:
    return (v, v) if isinstance(v, int) else (int(v[0]), int(v[1]))
