"""The CNNs of paper 3 as layer graphs: our own definitions from the published architectures.

``lenet5``, ``alexnet``, ``vgg16``, ``inception_v3`` (no auxiliary head), ``resnet50`` and
``resnet152``; each takes the global ``batch`` (paper §6: 32 per GPU, so ``32 * devices``).

Choices (also in ``docs/methods/optcnn.md``):

* LeNet-5 is the 6-layer variant the paper's Table 3 counts (conv 20@5x5, pool, conv 50@5x5,
  pool, FC 500, FC 10) on 28x28 single-channel input.
* AlexNet is the single-tower variant of "one weird trick" (64-192-384-256-256 channels,
  224x224 input, 11x11/4 padding 2 first convolution), 5 conv + 3 pool + 3 FC.
* Inception-v3 follows Szegedy et al. 2016 at 299x299 (stem, 3 x A, B, 4 x C, D, 2 x E) without
  the auxiliary classifier; the 1x3/3x1 pair of an E module is concatenated in place.
* ResNets are v1.5 (stride on the 3x3 convolution of a bottleneck), with 1x1 projection
  shortcuts on the first block of every stage.
* Every network ends with a softmax layer; BN/ReLU are folded (see :mod:`.layers`).
"""

from __future__ import annotations

from collections.abc import Callable

from dnnpart.errors import UsageError
from dnnpart.layerwise.layers import LayerGraph, NetBuilder

__all__ = ["MODELS", "alexnet", "build_model", "inception_v3", "lenet5", "resnet50", "resnet152", "vgg16"]


def lenet5(batch: int = 32) -> LayerGraph:
    """LeNet-5 (6 layers + input + softmax).

    Examples
    --------
    >>> g = lenet5(64)
    >>> [layer.op for layer in g.layers]
    ['input', 'conv', 'pool_max', 'conv', 'pool_max', 'fc', 'fc', 'softmax']
    """
    b = NetBuilder("lenet5", batch)
    x = b.input(1, 28, 28)
    x = b.conv("conv1", x, 20, 5)
    x = b.pool("pool1", x, 2, 2)
    x = b.conv("conv2", x, 50, 5)
    x = b.pool("pool2", x, 2, 2)
    x = b.fc("fc1", x, 500)
    x = b.fc("fc2", x, 10)
    b.softmax("softmax", x)
    return b.build()


def alexnet(batch: int = 32) -> LayerGraph:
    """AlexNet, single tower (5 conv, 3 pool, 3 FC)."""
    b = NetBuilder("alexnet", batch)
    x = b.input(3, 224, 224)
    x = b.conv("conv1", x, 64, 11, 4, 2)
    x = b.pool("pool1", x, 3, 2)
    x = b.conv("conv2", x, 192, 5, 1, 2)
    x = b.pool("pool2", x, 3, 2)
    x = b.conv("conv3", x, 384, 3, 1, 1)
    x = b.conv("conv4", x, 256, 3, 1, 1)
    x = b.conv("conv5", x, 256, 3, 1, 1)
    x = b.pool("pool5", x, 3, 2)
    x = b.fc("fc6", x, 4096)
    x = b.fc("fc7", x, 4096)
    x = b.fc("fc8", x, 1000)
    b.softmax("softmax", x)
    return b.build()


def vgg16(batch: int = 32) -> LayerGraph:
    """VGG-16 (13 conv, 5 pool, 3 FC).

    Examples
    --------
    >>> g = vgg16(128)
    >>> g.layers[g.index("fc6")].params
    102764544
    """
    b = NetBuilder("vgg16", batch)
    x = b.input(3, 224, 224)
    for block, (reps, ch) in enumerate([(2, 64), (2, 128), (3, 256), (3, 512), (3, 512)], start=1):
        for r in range(1, reps + 1):
            x = b.conv(f"conv{block}_{r}", x, ch, 3, 1, 1)
        x = b.pool(f"pool{block}", x, 2, 2)
    x = b.fc("fc6", x, 4096)
    x = b.fc("fc7", x, 4096)
    x = b.fc("fc8", x, 1000)
    b.softmax("softmax", x)
    return b.build()


def _inception_a(b: NetBuilder, name: str, x: int, pool_features: int) -> int:
    b1 = b.conv(f"{name}/1x1", x, 64, 1)
    b5 = b.conv(f"{name}/5x5_1", x, 48, 1)
    b5 = b.conv(f"{name}/5x5_2", b5, 64, 5, 1, 2)
    b3 = b.conv(f"{name}/3x3dbl_1", x, 64, 1)
    b3 = b.conv(f"{name}/3x3dbl_2", b3, 96, 3, 1, 1)
    b3 = b.conv(f"{name}/3x3dbl_3", b3, 96, 3, 1, 1)
    bp = b.pool(f"{name}/pool", x, 3, 1, 1, kind="avg")
    bp = b.conv(f"{name}/pool_proj", bp, pool_features, 1)
    return b.concat(f"{name}/concat", b1, b5, b3, bp)


def _inception_b(b: NetBuilder, name: str, x: int) -> int:
    b3 = b.conv(f"{name}/3x3", x, 384, 3, 2)
    bd = b.conv(f"{name}/3x3dbl_1", x, 64, 1)
    bd = b.conv(f"{name}/3x3dbl_2", bd, 96, 3, 1, 1)
    bd = b.conv(f"{name}/3x3dbl_3", bd, 96, 3, 2)
    bp = b.pool(f"{name}/pool", x, 3, 2)
    return b.concat(f"{name}/concat", b3, bd, bp)


def _inception_c(b: NetBuilder, name: str, x: int, c7: int) -> int:
    b1 = b.conv(f"{name}/1x1", x, 192, 1)
    b7 = b.conv(f"{name}/7x7_1", x, c7, 1)
    b7 = b.conv(f"{name}/7x7_2", b7, c7, (1, 7), 1, (0, 3))
    b7 = b.conv(f"{name}/7x7_3", b7, 192, (7, 1), 1, (3, 0))
    bd = b.conv(f"{name}/7x7dbl_1", x, c7, 1)
    bd = b.conv(f"{name}/7x7dbl_2", bd, c7, (7, 1), 1, (3, 0))
    bd = b.conv(f"{name}/7x7dbl_3", bd, c7, (1, 7), 1, (0, 3))
    bd = b.conv(f"{name}/7x7dbl_4", bd, c7, (7, 1), 1, (3, 0))
    bd = b.conv(f"{name}/7x7dbl_5", bd, 192, (1, 7), 1, (0, 3))
    bp = b.pool(f"{name}/pool", x, 3, 1, 1, kind="avg")
    bp = b.conv(f"{name}/pool_proj", bp, 192, 1)
    return b.concat(f"{name}/concat", b1, b7, bd, bp)


def _inception_d(b: NetBuilder, name: str, x: int) -> int:
    b3 = b.conv(f"{name}/3x3_1", x, 192, 1)
    b3 = b.conv(f"{name}/3x3_2", b3, 320, 3, 2)
    b7 = b.conv(f"{name}/7x7x3_1", x, 192, 1)
    b7 = b.conv(f"{name}/7x7x3_2", b7, 192, (1, 7), 1, (0, 3))
    b7 = b.conv(f"{name}/7x7x3_3", b7, 192, (7, 1), 1, (3, 0))
    b7 = b.conv(f"{name}/7x7x3_4", b7, 192, 3, 2)
    bp = b.pool(f"{name}/pool", x, 3, 2)
    return b.concat(f"{name}/concat", b3, b7, bp)


def _inception_e(b: NetBuilder, name: str, x: int) -> int:
    b1 = b.conv(f"{name}/1x1", x, 320, 1)
    b3 = b.conv(f"{name}/3x3_1", x, 384, 1)
    b3a = b.conv(f"{name}/3x3_2a", b3, 384, (1, 3), 1, (0, 1))
    b3b = b.conv(f"{name}/3x3_2b", b3, 384, (3, 1), 1, (1, 0))
    b3 = b.concat(f"{name}/3x3_concat", b3a, b3b)
    bd = b.conv(f"{name}/3x3dbl_1", x, 448, 1)
    bd = b.conv(f"{name}/3x3dbl_2", bd, 384, 3, 1, 1)
    bda = b.conv(f"{name}/3x3dbl_3a", bd, 384, (1, 3), 1, (0, 1))
    bdb = b.conv(f"{name}/3x3dbl_3b", bd, 384, (3, 1), 1, (1, 0))
    bd = b.concat(f"{name}/3x3dbl_concat", bda, bdb)
    bp = b.pool(f"{name}/pool", x, 3, 1, 1, kind="avg")
    bp = b.conv(f"{name}/pool_proj", bp, 192, 1)
    return b.concat(f"{name}/concat", b1, b3, bd, bp)


def inception_v3(batch: int = 32) -> LayerGraph:
    """Inception-v3 at 299x299 without the auxiliary head.

    Examples
    --------
    >>> g = inception_v3(32)
    >>> g.layers[-2].params, g.layers[-3].out_shape
    (2049000, (32, 2048, 1, 1))
    """
    b = NetBuilder("inception_v3", batch)
    x = b.input(3, 299, 299)
    x = b.conv("conv1a", x, 32, 3, 2)
    x = b.conv("conv2a", x, 32, 3)
    x = b.conv("conv2b", x, 64, 3, 1, 1)
    x = b.pool("pool1", x, 3, 2)
    x = b.conv("conv3b", x, 80, 1)
    x = b.conv("conv4a", x, 192, 3)
    x = b.pool("pool2", x, 3, 2)
    for name, pf in (("mixed5b", 32), ("mixed5c", 64), ("mixed5d", 64)):
        x = _inception_a(b, name, x, pf)
    x = _inception_b(b, "mixed6a", x)
    for name, c7 in (("mixed6b", 128), ("mixed6c", 160), ("mixed6d", 160), ("mixed6e", 192)):
        x = _inception_c(b, name, x, c7)
    x = _inception_d(b, "mixed7a", x)
    x = _inception_e(b, "mixed7b", x)
    x = _inception_e(b, "mixed7c", x)
    x = b.pool("avgpool", x, 8, 1, kind="avg")
    x = b.fc("fc", x, 1000)
    b.softmax("softmax", x)
    return b.build()


def _resnet(name: str, blocks: tuple[int, int, int, int], batch: int) -> LayerGraph:
    b = NetBuilder(name, batch)
    x = b.input(3, 224, 224)
    x = b.conv("conv1", x, 64, 7, 2, 3)
    x = b.pool("pool1", x, 3, 2, 1)
    for stage, (reps, width) in enumerate(zip(blocks, (64, 128, 256, 512), strict=True), start=2):
        for r in range(reps):
            pre = f"layer{stage - 1}.{r}"
            stride = 2 if (r == 0 and stage > 2) else 1
            y = b.conv(f"{pre}/conv1", x, width, 1)
            y = b.conv(f"{pre}/conv2", y, width, 3, stride, 1)
            y = b.conv(f"{pre}/conv3", y, 4 * width, 1)
            short = b.conv(f"{pre}/downsample", x, 4 * width, 1, stride) if r == 0 else x
            x = b.add(f"{pre}/add", y, short)
    x = b.pool("avgpool", x, 7, 1, kind="avg")
    x = b.fc("fc", x, 1000)
    b.softmax("softmax", x)
    return b.build()


def resnet50(batch: int = 32) -> LayerGraph:
    """ResNet-50 (v1.5 bottlenecks, 3-4-6-3).

    Examples
    --------
    >>> sum(layer.params for layer in resnet50().layers) > 25_000_000
    True
    """
    return _resnet("resnet50", (3, 4, 6, 3), batch)


def resnet152(batch: int = 32) -> LayerGraph:
    """ResNet-152 (v1.5 bottlenecks, 3-8-36-3)."""
    return _resnet("resnet152", (3, 8, 36, 3), batch)


#: Name -> builder(batch).
MODELS: dict[str, Callable[[int], LayerGraph]] = {
    "lenet5": lenet5, "alexnet": alexnet, "vgg16": vgg16, "inception_v3": inception_v3,
    "resnet50": resnet50, "resnet152": resnet152,
}


def build_model(name: str, batch: int) -> LayerGraph:
    """Build the network called ``name`` (a key of :data:`MODELS`) for a global ``batch``."""
    try:
        return MODELS[name](batch)
    except KeyError:
        raise UsageError(f"unknown model {name!r}; known: {', '.join(MODELS)}") from None
