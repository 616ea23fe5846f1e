"""ResNets (He et al., 2016) at layer granularity, built from shapes (no weights, no data).

Nodes are the layers a framework shows: ``Conv``, ``BatchNormalization``, ``Relu``, ``Add``
(the residual join), ``MaxPool``, ``GlobalAveragePool`` and the final ``Gemm`` (fc). Blocks
follow torchvision's ResNet v1.5: basic blocks (two 3x3 convs) for depths 18/34, bottleneck
blocks (1x1, 3x3, 1x1 with the stride on the 3x3) for 50/101/152; the first block of a stage
whose shape changes has a downsample branch (1x1 conv + batch norm), the others an identity
skip.

``layer_id`` is 0 for the stem (conv, bn, relu, max pool), ``i`` for the ``i``-th residual
block (1-based, over all stages) and ``n_blocks + 1`` for the head (pool, fc).

FLOPs count mul and add separately: ResNet-50 at 224x224 is ~8.2 GFLOPs, i.e. the usual
~4.1 G multiply-adds of its convolutions and fc.
"""

from __future__ import annotations

from dnnpart.errors import UsageError
from dnnpart.graph.core import Graph
from dnnpart.zoo.cost import BYTES_PER_ELEMENT
from dnnpart.zoo.ops import OpGraph

#: Blocks per stage and block kind for each supported depth (He et al., 2016, table 1).
RESNET_CONFIGS: dict[int, tuple[str, tuple[int, int, int, int]]] = {
    18: ("basic", (2, 2, 2, 2)),
    34: ("basic", (3, 4, 6, 3)),
    50: ("bottleneck", (3, 4, 6, 3)),
    101: ("bottleneck", (3, 4, 23, 3)),
    152: ("bottleneck", (3, 8, 36, 3)),
}
_BOTTLENECK_EXPANSION = 4
#: What the builder helpers pass around: (op name, channels, height, width) of a tensor.
_Tensor = tuple[str, int, int, int]
_STAGE_WIDTHS = (64, 128, 256, 512)


def resnet_ops(
    depth: int = 50, *, image: int = 224, batch: int = 1, n_classes: int = 1000,
    head: bool = True,
) -> OpGraph:
    """The layer list of a ResNet.

    Parameters
    ----------
    depth : 18, 34, 50, 101 or 152.
    image : input height and width (square, 3 channels).
    batch : batch size.
    n_classes : outputs of the fc layer.
    head : add the classification head (pool, fc); ``False`` leaves the backbone, whose
        stage outputs are ``layer{k}.{last block}.relu_out`` (dense-prediction models such as
        :mod:`dnnpart.zoo.semantic_fpn` build on them).

    Examples
    --------
    >>> ops = resnet_ops(50)
    >>> len(ops), round(ops.total_flops() / 1e9, 1)
    (174, 8.2)
    """
    if depth not in RESNET_CONFIGS:
        raise UsageError(
            f"unsupported ResNet depth {depth}; choose one of {sorted(RESNET_CONFIGS)}"
        )
    if image < 32 or batch < 1 or n_classes < 1:
        raise UsageError(
            f"need image >= 32, batch >= 1, n_classes >= 1; got {image}, {batch}, {n_classes}"
        )
    kind, blocks = RESNET_CONFIGS[depth]
    ops = OpGraph()

    def conv(name: str, x: _Tensor, c_out: int, k: int, stride: int, layer: int) -> _Tensor:
        src, c_in, h, w = x
        pad = k // 2
        h_out = (h + 2 * pad - k) // stride + 1
        w_out = (w + 2 * pad - k) // stride + 1
        out = batch * c_out * h_out * w_out
        node = ops.add(name, "Conv", [src], flops=2 * out * c_in * k * k,
                       weight_elements=c_out * c_in * k * k, output_elements=out,
                       layer_id=layer)
        return node, c_out, h_out, w_out

    def elementwise(name: str, op_type: str, x: _Tensor, layer: int, *, flops_per: int = 1,
                    params_per_channel: int = 0, other: str | None = None) -> _Tensor:
        src, c, h, w = x
        out = batch * c * h * w
        inputs = [src] if other is None else [src, other]
        node = ops.add(name, op_type, inputs, flops=flops_per * out,
                       weight_elements=params_per_channel * c, output_elements=out,
                       layer_id=layer)
        return node, c, h, w

    def bn(name: str, x: _Tensor, layer: int) -> _Tensor:
        # Inference batch norm is an affine map per channel (2 FLOPs per element); it owns
        # gamma, beta, running mean and running variance.
        return elementwise(name, "BatchNormalization", x, layer, flops_per=2,
                           params_per_channel=4)

    def relu(name: str, x: _Tensor, layer: int) -> _Tensor:
        return elementwise(name, "Relu", x, layer)

    def conv_bn(prefix: str, i: str, x: _Tensor, c_out: int, k: int, stride: int, layer: int,
                *, relu_after: bool = False) -> _Tensor:
        """``{prefix}.conv{i}`` -> ``{prefix}.bn{i}`` (-> ``{prefix}.relu{i}``)."""
        y = bn(f"{prefix}.bn{i}", conv(f"{prefix}.conv{i}", x, c_out, k, stride, layer), layer)
        return relu(f"{prefix}.relu{i}", y, layer) if relu_after else y

    # Stem: 7x7/2 conv, bn, relu, 3x3/2 max pool. The image is no node, so conv1 has no
    # inputs and its traffic is given explicitly (image + weights + output).
    h1 = (image + 2 * 3 - 7) // 2 + 1
    out = batch * 64 * h1 * h1
    weights = 64 * 3 * 7 * 7
    node = ops.add("conv1", "Conv", [], flops=2 * out * 3 * 7 * 7, weight_elements=weights,
                   output_elements=out, layer_id=0,
                   bytes_moved=BYTES_PER_ELEMENT * (batch * 3 * image * image + weights + out))
    x: _Tensor = bn("bn1", (node, 64, h1, h1), 0)
    x = relu("relu1", x, 0)
    src, c, h, w = x
    h_pool = (h + 2 * 1 - 3) // 2 + 1
    pooled = batch * c * h_pool * h_pool
    node = ops.add("maxpool", "MaxPool", [src], flops=9 * pooled, output_elements=pooled,
                   layer_id=0)
    x = (node, c, h_pool, h_pool)

    layer = 0
    for stage, (width, n_blocks) in enumerate(zip(_STAGE_WIDTHS, blocks, strict=True), start=1):
        for b in range(n_blocks):
            layer += 1
            p = f"layer{stage}.{b}"
            stride = 2 if (b == 0 and stage > 1) else 1
            c_out = width * _BOTTLENECK_EXPANSION if kind == "bottleneck" else width
            identity = x
            if kind == "bottleneck":
                y = conv_bn(p, "1", x, width, 1, 1, layer, relu_after=True)
                y = conv_bn(p, "2", y, width, 3, stride, layer, relu_after=True)
                y = conv_bn(p, "3", y, c_out, 1, 1, layer)
            else:
                y = conv_bn(p, "1", x, width, 3, stride, layer, relu_after=True)
                y = conv_bn(p, "2", y, width, 3, 1, layer)
            if stride != 1 or x[1] != c_out:
                identity = conv_bn(f"{p}.downsample", "", x, c_out, 1, stride, layer)
            y = elementwise(f"{p}.add", "Add", y, layer, other=identity[0])
            x = relu(f"{p}.relu_out", y, layer)

    if not head:
        return ops
    head_id = layer + 1
    src, c, h, w = x
    node = ops.add("avgpool", "GlobalAveragePool", [src], flops=batch * c * h * w,
                   output_elements=batch * c, layer_id=head_id)
    ops.add("fc", "Gemm", [node], flops=2 * batch * c * n_classes + batch * n_classes,
            weight_elements=c * n_classes + n_classes, output_elements=batch * n_classes,
            layer_id=head_id)
    return ops


def resnet(
    depth: int = 50, *, image: int = 224, batch: int = 1, training: bool = False
) -> Graph:
    """A ResNet graph at layer granularity, priced by :mod:`dnnpart.zoo.cost`.

    Compute times and edge costs are in milliseconds. ``training`` appends the mirrored
    backward pass (:func:`dnnpart.graph.training.add_backward_pass`).

    Parameters
    ----------
    depth : 18, 34, 50, 101 or 152.
    image : input height and width.
    batch : batch size.
    training : add the backward pass.

    Examples
    --------
    >>> g = resnet(50)
    >>> g.n_nodes, g.n_edges
    (174, 189)
    >>> resnet(18).n_nodes
    68
    """
    return resnet_ops(depth, image=image, batch=batch).to_graph(training=training)
