"""Layer graphs of the six CNNs and their configuration spaces (Table 1, placement rule)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from dnnpart.layerwise.configs import config_space, enumerate_degrees, format_config, parallel_dims
from dnnpart.layerwise.hardware import NVLINK_BPS, paper_bandwidth
from dnnpart.layerwise.layers import NetBuilder
from dnnpart.layerwise.models import MODELS, build_model

#: Published parameter counts (torchvision/Caffe reference implementations); ours fold BN into a
#: bias, so networks with BN differ by the BN parameters (well under 1%).
PUBLISHED_PARAMS = {
    "lenet5": 431_080, "alexnet": 61_100_840, "vgg16": 138_357_544,
    "inception_v3": 23_834_568, "resnet50": 25_557_032, "resnet152": 60_192_808,
}
#: Spatial size at the end of the feature extractor.
LAST_MAP = {"lenet5": 4, "alexnet": 6, "vgg16": 7, "inception_v3": 8, "resnet50": 7, "resnet152": 7}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_models_shapes_params_and_dag(name: str) -> None:
    g = build_model(name, 64)
    total = sum(layer.params for layer in g.layers)
    assert total == pytest.approx(PUBLISHED_PARAMS[name], rel=0.01)
    assert all(p < j for p, j in g.edges)  # listed in topological order
    sources = [i for i, layer in enumerate(g.layers) if not layer.inputs]
    consumers = {p for p, _ in g.edges}
    assert sources == [0] and set(range(len(g))) - consumers == {len(g) - 1}
    first_fc = next(layer for layer in g.layers if layer.op == "fc")
    last_map = g.layers[first_fc.inputs[0]]
    if last_map.op == "pool_avg":  # global average pooling over the last feature map
        assert last_map.in_shapes[0][2:] == (LAST_MAP[name],) * 2 == last_map.kernel
    else:
        assert first_fc.in_shapes[0][2:] == (LAST_MAP[name],) * 2
    for layer in g.layers:
        assert layer.out_shape[0] == 64
        for p, shape in zip(layer.inputs, layer.in_shapes, strict=True):
            assert g.layers[p].out_shape == shape


def test_unknown_model_and_bad_shapes() -> None:
    with pytest.raises(ValueError, match="unknown model"):
        build_model("resnet18", 8)
    b = NetBuilder("bad", 2)
    x = b.input(1, 4, 4)
    with pytest.raises(ValueError, match="does not fit"):
        b.conv("c", x, 1, 7)
    y = b.input(2, 4, 4, name="y")
    with pytest.raises(ValueError, match="add of different shapes"):
        b.add("a", x, y)
    with pytest.raises(ValueError, match="duplicate"):
        b.input(1, 4, 4, name="y")


@pytest.mark.parametrize("devices", [1, 2, 3, 4, 6, 8, 16])
def test_degrees_are_admissible(devices: int) -> None:
    g = build_model("inception_v3", 32 * devices)
    for layer in g.layers:
        degrees = enumerate_degrees(layer.out_shape, parallel_dims(layer), devices)
        assert (degrees[0] == 1).all()
        for deg in degrees:
            assert all(d & (d - 1) == 0 for d in deg)                       # powers of two
            assert devices % int(np.prod(deg)) == 0                         # divides the devices
            assert all(s % d == 0 for s, d in zip(layer.out_shape, deg, strict=True))
            if layer.op in ("fc", "softmax"):
                assert deg[2] == deg[3] == 1
        # complete: every admissible vector is there
        dims = parallel_dims(layer)
        pw = (1, 2, 4, 8, 16)
        count = sum(
            1 for vec in itertools.product(pw, pw, pw, pw)
            if devices % int(np.prod(vec)) == 0
            and all((d == 1 or ok) and s % d == 0
                    for s, d, ok in zip(layer.out_shape, vec, dims, strict=True))
        )
        assert len(degrees) == count


def test_seventy_configurations_on_sixteen_devices() -> None:
    assert len(enumerate_degrees((512, 64, 64, 64), (True,) * 4, 16)) == 70


def test_placement_contiguous_block_fills_a_node_first() -> None:
    layer = build_model("vgg16", 512).layers[1]
    space = config_space(layer, 16)
    bw = paper_bandwidth(16)
    for k, deg in enumerate(space.degrees):
        p = int(np.prod(deg))
        devs = space.device[k][space.device[k] >= 0]
        assert devs.tolist() == list(range(p))
        if p <= 4:  # a block of at most 4 stays inside node 0 (NVLink only)
            sub = bw[np.ix_(devs, devs)]
            assert (sub[~np.eye(p, dtype=bool)] == NVLINK_BPS).all()
        # tiles partition the output exactly
        vol = np.prod(space.hi[k] - space.lo[k], axis=-1)
        assert vol.sum() == np.prod(layer.out_shape)


def test_format_config() -> None:
    g = build_model("vgg16", 128)
    assert format_config(g.layers[1], (4, 1, 1, 1)) == "{n=4, c=1, h=1, w=1}"
    assert format_config(g.layers[g.index("fc7")], (1, 4, 1, 1)) == "{n=1, c=4}"
