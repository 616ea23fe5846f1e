"""A SemanticFPN-like operator graph (Kirillov et al., 2019, "Panoptic Feature Pyramid
Networks", semantic branch): the model of paper 4's Table 2, built from shapes.

Structure (our choices where the papers give no exact figure; ``docs/methods/parmesan.md``):

* **backbone**: a ResNet (:func:`dnnpart.zoo.resnet.resnet_ops` without its head, default
  ResNet-50), stage outputs ``C2 .. C5`` at strides 4, 8, 16, 32;
* **lateral** 1x1 convolutions ``C_k -> 256`` channels;
* **top-down** pathway: ``P5 = lat5``, ``P_k = lat_k + upsample2x(P_{k+1})``, then a 3x3 conv
  (256) on every ``P_k``;
* **semantic head**: from each ``P_k`` a chain of (3x3 conv 128, group norm, ReLU, 2x
  upsample) until stride 4 (``P2``: one conv, no upsample), the four maps summed, a 1x1 conv to
  ``n_classes`` and a 4x upsample to the image.

``layer_id``: the backbone's (stem 0, block ``i``), then one id per FPN level for its lateral
and top-down ops, then one per head branch, then the classifier.
"""

from __future__ import annotations

from dnnpart.errors import UsageError
from dnnpart.graph.core import Graph
from dnnpart.zoo.ops import OpGraph
from dnnpart.zoo.resnet import _BOTTLENECK_EXPANSION, _STAGE_WIDTHS, RESNET_CONFIGS, resnet_ops

FPN_CHANNELS = 256
HEAD_CHANNELS = 128


def semantic_fpn_ops(
    depth: int = 50, *, image: int = 512, batch: int = 1, n_classes: int = 19
) -> OpGraph:
    """The op list of a SemanticFPN on a ResNet backbone (``image`` x ``image`` input).

    Examples
    --------
    >>> ops = semantic_fpn_ops(50, image=256)
    >>> sum(op.op_type == "Conv" and op.name.startswith("fpn.lateral") for op in ops.ops)
    4
    >>> ops.ops[-1].name, ops.ops[-1].output_bytes == 4 * 19 * 256 * 256
    ('classifier.upsample', True)
    """
    if image % 32:
        raise UsageError(f"semantic_fpn: image must be a multiple of 32, got {image}")
    ops = resnet_ops(depth, image=image, batch=batch, head=False)
    kind, blocks = RESNET_CONFIGS[depth]
    expansion = _BOTTLENECK_EXPANSION if kind == "bottleneck" else 1
    c_names = [f"layer{k + 1}.{n - 1}.relu_out" for k, n in enumerate(blocks)]
    c_chans = [w * expansion for w in _STAGE_WIDTHS]
    sizes = [image // s for s in (4, 8, 16, 32)]
    layer = sum(blocks) + 1

    def conv(name: str, src: str, c_in: int, c_out: int, k: int, hw: int, lid: int) -> str:
        out = batch * c_out * hw * hw
        return ops.add(name, "Conv", [src], flops=2 * out * c_in * k * k,
                       weight_elements=c_out * c_in * k * k + c_out, output_elements=out,
                       layer_id=lid)

    def upsample(name: str, src: str, c: int, hw_out: int, lid: int) -> str:
        out = batch * c * hw_out * hw_out
        return ops.add(name, "Resize", [src], flops=4 * out, output_elements=out, layer_id=lid)

    # lateral convs and the top-down pathway, coarsest level first
    p: dict[int, str] = {}
    for k in (3, 2, 1, 0):
        lid = layer + (3 - k)
        lat = conv(f"fpn.lateral{k + 2}", c_names[k], c_chans[k], FPN_CHANNELS, 1, sizes[k], lid)
        if k == 3:
            merged = lat
        else:
            up = upsample(f"fpn.topdown{k + 2}.upsample", p[k + 1], FPN_CHANNELS, sizes[k], lid)
            out = batch * FPN_CHANNELS * sizes[k] ** 2
            merged = ops.add(f"fpn.topdown{k + 2}.add", "Add", [lat, up], flops=out,
                             output_elements=out, layer_id=lid)
        p[k] = merged
    outs = {k: conv(f"fpn.output{k + 2}", p[k], FPN_CHANNELS, FPN_CHANNELS, 3, sizes[k],
                    layer + (3 - k)) for k in (3, 2, 1, 0)}
    layer += 4
    # semantic head: every level up to stride 4
    branch_out = []
    for k in (0, 1, 2, 3):
        lid = layer + k
        x, c, hw = outs[k], FPN_CHANNELS, sizes[k]
        for step in range(max(1, k)):
            x = conv(f"head{k + 2}.conv{step}", x, c, HEAD_CHANNELS, 3, hw, lid)
            c = HEAD_CHANNELS
            n = batch * c * hw * hw
            x = ops.add(f"head{k + 2}.gn{step}", "GroupNormalization", [x], flops=4 * n,
                        weight_elements=2 * c, output_elements=n, layer_id=lid)
            x = ops.add(f"head{k + 2}.relu{step}", "Relu", [x], flops=n, output_elements=n,
                        layer_id=lid)
            if k > 0:
                hw *= 2
                x = upsample(f"head{k + 2}.upsample{step}", x, c, hw, lid)
        branch_out.append(x)
    layer += 4
    n = batch * HEAD_CHANNELS * sizes[0] ** 2
    total = ops.add("head.sum", "Sum", branch_out, flops=3 * n, output_elements=n,
                    layer_id=layer)
    logits = conv("classifier.conv", total, HEAD_CHANNELS, n_classes, 1, sizes[0], layer)
    upsample("classifier.upsample", logits, n_classes, image, layer)
    return ops


def semantic_fpn(
    depth: int = 50, *, image: int = 512, batch: int = 1, n_classes: int = 19,
    training: bool = False,
) -> Graph:
    """A SemanticFPN graph priced by :mod:`dnnpart.zoo.cost` (ms); ``training`` adds the
    backward pass.

    Examples
    --------
    >>> g = semantic_fpn(50, image=256, training=True)
    >>> g.is_training, g.n_nodes > 2 * 174
    (True, True)
    """
    return semantic_fpn_ops(depth, image=image, batch=batch, n_classes=n_classes).to_graph(
        training=training)
