"""Per-op-class pricing: the class of each operator type, calibrated classes on a device spec,
and the roofline wherever a device has no parameters for a class."""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest

from dnnpart.cost import CostModel, OpSpec, Work, device_time_s, operator_work, roofline_time_s
from dnnpart.cost.ops import BYTES_ONLY_OPS, CANONICAL, OP_CLASS
from dnnpart.devices.specs import (
    OP_CLASSES,
    DeviceSpec,
    OpClassCost,
    device_spec_from_dict,
    device_spec_to_dict,
)
from dnnpart.errors import FormatError

PLAIN = DeviceSpec(name="plain", kind="accelerator", peak_flops=2e12, memory_bandwidth=3e11,
                   compute_efficiency=0.5, bandwidth_efficiency=0.8, launch_overhead_s=4e-6)
CALIBRATED = (OpClassCost(name="elementwise", bytes_rate=2e10, overhead_s=3e-6),
              OpClassCost(name="matmul", flops_rate=8e10, bytes_rate=1e10, overhead_s=2e-6),
              OpClassCost(name="view", overhead_s=1e-6))


def _random_ops(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray, list[str]]:
    flops = rng.choice([0.0, 1.0, 1e3, 1e6, 1e9, 1e11], size=n) * rng.uniform(0.5, 2, size=n)
    moved = rng.choice([0.0, 4.0, 1e4, 1e7, 1e9], size=n) * rng.uniform(0.5, 2, size=n)
    classes = [str(c) for c in rng.choice([*OP_CLASSES, ""], size=n)]
    return flops, moved, classes


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_without_calibrated_classes_pricing_is_the_roofline(precision: str) -> None:
    rng = np.random.default_rng(7)
    flops, moved, classes = _random_ops(rng, 300)
    got = device_time_s(flops, moved, classes, PLAIN, precision)
    assert np.array_equal(got, roofline_time_s(flops, moved, PLAIN, precision))


def test_calibrated_classes_are_additive_and_the_rest_is_the_roofline() -> None:
    rng = np.random.default_rng(8)
    spec = DeviceSpec(name="cal", kind="accelerator", peak_flops=2e12, memory_bandwidth=3e11,
                      launch_overhead_s=4e-6, op_classes=CALIBRATED)
    flops, moved, classes = _random_ops(rng, 300)
    got = device_time_s(flops, moved, classes, spec)
    roof = roofline_time_s(flops, moved, spec)
    params = {c.name: c for c in CALIBRATED}
    for i, cls in enumerate(classes):
        if cls in params:
            p = params[cls]
            expected = p.overhead_s + flops[i] / p.flops_rate + moved[i] / p.bytes_rate
        else:
            expected = roof[i]
        assert got[i] == pytest.approx(expected, rel=1e-12), cls


def test_the_cost_model_prices_each_work_by_its_class() -> None:
    spec = DeviceSpec(name="cal", kind="accelerator", peak_flops=2e12, memory_bandwidth=3e11,
                      op_classes=CALIBRATED)
    model = CostModel(accelerator=spec, cpu=PLAIN, host_link=CostModel.from_presets().host_link)
    works = [Work(1e9, 1e6, op_class="matmul"), Work(1e9, 1e6, op_class="conv"),
             Work(0.0, 0.0, op_class="view")]
    ms = model.compute_times_ms(works)
    assert ms[0, 1] == pytest.approx((2e-6 + 1e9 / 8e10 + 1e6 / 1e10) * 1e3)
    assert ms[1, 1] == pytest.approx(float(roofline_time_s(1e9, 1e6, spec)) * 1e3)  # conv: not calibrated
    assert ms[2, 1] == pytest.approx(1e-6 * 1e3)
    assert np.array_equal(ms[:, 0], roofline_time_s([1e9, 1e9, 0.0], [1e6, 1e6, 0.0], PLAIN) * 1e3)


def test_every_priced_operator_type_has_a_class_of_the_spec() -> None:
    assert set(OP_CLASS.values()) <= set(OP_CLASSES)
    assert set(OP_CLASSES) - set(OP_CLASS.values()) == {"depthwise_conv"}  # told by shape
    assert set(OP_CLASS) == CANONICAL - BYTES_ONLY_OPS


def test_operator_work_carries_the_class_and_tells_depthwise_by_shape() -> None:
    def conv(weight: tuple[int, ...], op: str = "conv") -> str:
        return operator_work(OpSpec(op_type=op, input_shapes=((1, 8, 8, 8),), output_shapes=((1, 8, 8, 8),),
                                    weight_shapes=(weight,))).op_class

    assert conv((8, 8, 3, 3)) == "conv" and conv((8, 1, 7, 7)) == "depthwise_conv"
    assert conv((8, 1, 7, 7), "conv_backward") == "depthwise_conv"
    assert operator_work(OpSpec(op_type="layernorm_backward", input_shapes=((4, 8),),
                                output_shapes=((4, 8),))).op_class == "norm"
    assert operator_work(OpSpec(op_type="mystery")).op_class == ""


def test_attention_backward_counts_its_five_products() -> None:
    q = (2, 4, 16, 8)  # batch-heads 8, L = S = 16, E = Ev = 8
    w = operator_work(OpSpec(op_type="attention_backward", input_shapes=(q, q, q, q, q),
                             output_shapes=(q, q, q)))
    assert w.known and w.op_class == "attention"
    assert w.flops == 2 * 8 * 16 * 16 * (3 * 8 + 2 * 8) + 5 * 8 * 16 * 16


def test_a_spec_with_classes_round_trips_through_its_mapping() -> None:
    spec = DeviceSpec(name="cal", kind="accelerator", peak_flops=2e12, memory_bandwidth=3e11,
                      op_classes=CALIBRATED)
    data = device_spec_to_dict(spec)
    assert data["op_classes"]["view"] == {"overhead_s": 1e-6}  # absent terms are left out
    assert device_spec_from_dict(data, "spec") == spec
    assert hash(spec) == hash(device_spec_from_dict(data, "spec"))  # clusters put specs in sets


@pytest.mark.parametrize(("entry", "field"), [
    ({"matmul": {"flops": -1.0}}, "op_classes.matmul.flops"),
    ({"matmul": {"flops": 0}}, "op_classes.matmul.flops"),
    ({"matmul": {"bytes": "1e999"}}, "op_classes.matmul.bytes"),
    ({"matmul": {"bytes": int("9" * 330)}}, "op_classes.matmul.bytes"),
    ({"matmul": {"bytes": 1e300}}, "op_classes.matmul.bytes"),
    ({"matmul": {"overhead_s": -1e-6}}, "op_classes.matmul.overhead_s"),
    ({"matmul": {"overhead_s": float("nan")}}, "op_classes.matmul.overhead_s"),
    ({"matmul": {"overhead_s": "abc"}}, "op_classes.matmul.overhead_s"),
    ({"matmul": {"flop": 1e9}}, "op_classes.matmul"),
    ({"matmul": {}}, "op_classes.matmul"),
    ({"matmul": 5}, "op_classes.matmul"),
    ({"matmull": {"flops": 1e9}}, "op_classes.matmull"),
    ({"matmul:": {"flops": 1e9}}, "op_classes.matmul:"),
    ({"matmul:NT": {"flops": 1e9}}, "op_classes.matmul:NT"),
    ({"kind:tanh": {"flops": 1e9}}, "op_classes.kind:tanh"),
    ([1, 2], "op_classes"),
])
def test_bad_class_parameters_name_their_field(entry: object, field: str) -> None:
    data = {"kind": "accelerator", "peak_flops": 1e12, "memory_bandwidth": 1e11, "op_classes": entry}
    with pytest.raises(FormatError) as caught:
        device_spec_from_dict(data, "devices.box", name="box")
    assert f"devices.box.{field}" in str(caught.value) and "\n" not in str(caught.value)


def test_a_class_without_a_rate_has_no_such_term() -> None:
    c = OpClassCost(name="view", overhead_s=2e-6)
    assert math.isinf(c.flops_rate) and c.time_s(1e12, 1e12) == 2e-6


def test_a_linear_layers_products_are_classed_by_their_operands_storage() -> None:
    """``x @ W.T`` forward (``W`` row-major, so ``B`` is transposed), ``g @ W`` for the input's
    gradient (neither), ``g.T @ x`` for the weight's (``A`` transposed): the strides of the
    captured fake tensors, as a training capture and calibration see them."""
    torch = pytest.importorskip("torch")
    from torch.fx.experimental.proxy_tensor import make_fx

    from dnnpart.cost.ops import aten_op_name
    from dnnpart.frontends.export_import import aten_spec, tensor_vals

    def step(x: object, w: object, g: object) -> object:
        return torch.autograd.grad(torch.nn.functional.linear(x, w), (x, w), g)

    x = torch.randn(256, 192, requires_grad=True)   # every GEMM dimension past 128: no bucket
    w = torch.randn(160, 192, requires_grad=True)
    gm = make_fx(step, tracing_mode="fake")(x, w, torch.randn(256, 160))
    classes = {}
    for node in gm.graph.nodes:
        if node.op == "call_function" and aten_op_name(node.target) == "mm":
            work = operator_work(aten_spec(node, "mm", tensor_vals(node), {}))
            shape = tuple(tensor_vals(node)[0].shape)
            classes[shape] = work.cost_key
    assert classes == {(256, 160): "matmul:nt", (256, 192): "matmul:nn", (160, 192): "matmul:tn"}
    skinny = operator_work(OpSpec(op_type="matmul", input_shapes=((32, 192),), output_shapes=((32, 160),),
                                  attrs={"k": 192, "layout": "nt"}))
    assert skinny.cost_key == "matmul:nt@32"  # its smallest dimension, 32 rows


def test_a_kinds_parameters_price_it_and_other_kinds_take_their_classes() -> None:
    spec = DeviceSpec(name="cal", kind="accelerator", peak_flops=2e12, memory_bandwidth=3e11,
                      fresh_bytes_rate=1e9,
                      op_classes=(OpClassCost(name="elementwise", bytes_rate=1e10, overhead_s=1e-6),
                                  OpClassCost(name="elementwise:tanh", flops_rate=1e9, overhead_s=2e-6)))
    got = device_time_s([4e6, 4e6, 4e6], [8e6, 8e6, 8e6], ["elementwise:tanh", "elementwise:add",
                                                          "elementwise"], spec)
    assert got.tolist() == pytest.approx([2e-6 + 4e6 / 1e9, 1e-6 + 8e6 / 1e10, 1e-6 + 8e6 / 1e10])
    fresh = device_time_s([0.0, 0.0], [8e6, 8e6], ["elementwise", "conv"], spec, "fp32", [5e7, 5e7])
    roof = roofline_time_s([0.0], [8e6], spec)[0]
    assert fresh.tolist() == pytest.approx([1e-6 + 8e6 / 1e10 + 0.05, roof + 0.05])


def test_only_outputs_past_the_fresh_allocation_size_are_fresh_bytes() -> None:
    from dnnpart.cost.ops import FRESH_ALLOCATION_BYTES

    big = FRESH_ALLOCATION_BYTES // 4  # float32 elements of one fresh allocation
    w = operator_work(OpSpec(op_type="add", input_shapes=((big,), (big,)), output_shapes=((big,),)))
    assert w.fresh_bytes == FRESH_ALLOCATION_BYTES and w.cost_key == "elementwise:add"
    small = operator_work(OpSpec(op_type="add", input_shapes=((big - 1,),), output_shapes=((big - 1,),)))
    view = operator_work(OpSpec(op_type="view", input_shapes=((big,),), output_shapes=((big,),)))
    assert small.fresh_bytes == 0.0 and view.fresh_bytes == 0.0


def test_a_product_with_an_operand_past_the_cache_is_priced_apart() -> None:
    """A language model's head (weights 512 x 50,257: 103 MB) has the bucket ``@big``; a skinny
    product keeps its small-dimension bucket whatever its operands' sizes; a block's product
    has neither."""
    from dnnpart.cost.ops import CACHE_BEYOND_BYTES

    head = operator_work(OpSpec(op_type="matmul", input_shapes=((256, 512),), weight_shapes=((50257, 512),),
                                output_shapes=((256, 50257),), attrs={"k": 512, "layout": "nt"}))
    assert head.cost_key == "matmul:nt@big" and 4 * 50257 * 512 >= CACHE_BEYOND_BYTES
    skinny = operator_work(OpSpec(op_type="matmul", input_shapes=((32, 512),), weight_shapes=((50257, 512),),
                                  output_shapes=((32, 50257),), attrs={"k": 512, "layout": "nt"}))
    assert skinny.cost_key == "matmul:nt@32"
    block = operator_work(OpSpec(op_type="matmul", input_shapes=((256, 512),), weight_shapes=((2048, 512),),
                                 output_shapes=((256, 2048),), attrs={"k": 512, "layout": "nt"}))
    assert block.cost_key == "matmul:nt"


def test_a_strided_convolution_and_its_backward_are_their_own_kind() -> None:
    """Captured from autograd, as calibration and a training graph see them: a stride-2
    convolution and its backward carry ``_strided``; stride 1 and a depthwise one do not; a
    depthwise one on a channels-last input carries ``_cl``."""
    torch = pytest.importorskip("torch")
    from torch.fx.experimental.proxy_tensor import make_fx

    from dnnpart.cost.ops import aten_op_name
    from dnnpart.frontends.export_import import aten_spec, tensor_vals

    def step(x: object, w: object, stride: int, groups: int) -> object:
        y = torch.nn.functional.conv2d(x, w, stride=stride, padding=1, groups=groups)
        return torch.autograd.grad(y.sum(), (x, w))

    keys = {}
    for stride, groups, fmt in ((1, 1, torch.contiguous_format), (2, 1, torch.contiguous_format),
                                (2, 160, torch.contiguous_format), (1, 160, torch.channels_last)):
        # every GEMM dimension past 128
        x = torch.randn(2, 160, 32, 32).contiguous(memory_format=fmt).requires_grad_(True)
        w = torch.randn(160, 160 // groups, 3, 3, requires_grad=True)
        gm = make_fx(functools.partial(step, stride=stride, groups=groups), tracing_mode="fake")(x, w)
        keys[stride, groups, fmt == torch.channels_last] = sorted(
            operator_work(aten_spec(n, aten_op_name(n.target), tensor_vals(n), {})).cost_key
            for n in gm.graph.nodes
            if n.op == "call_function" and aten_op_name(n.target).startswith("convolution"))
    assert keys[1, 1, False] == ["conv:conv", "conv:conv_backward"]
    assert keys[2, 1, False] == ["conv:conv_backward_strided", "conv:conv_strided"]
    assert keys[2, 160, False] == ["depthwise_conv:conv", "depthwise_conv:conv_backward"]
    assert keys[1, 160, True] == ["depthwise_conv:conv_backward_cl", "depthwise_conv:conv_cl"]


@pytest.mark.parametrize(("channels", "kernel", "op_type", "layout", "key"), [
    (768, 7, "conv_backward", "channels_last", "depthwise_conv:conv_backward_cl@wide"),
    (672, 7, "conv_backward", "channels_last", "depthwise_conv:conv_backward_cl@wide"),
    (640, 7, "conv_backward", "channels_last", "depthwise_conv:conv_backward_cl@32"),
    (768, 3, "conv_backward", "channels_last", "depthwise_conv:conv_backward_cl@32"),  # 7 MB
    (768, 7, "conv_backward", None, "depthwise_conv:conv_backward@32"),  # NCHW: no such block
    (768, 7, "conv", "channels_last", "depthwise_conv:conv_cl@32"),  # forward: none either
])
def test_a_channels_last_depthwise_backward_with_a_fresh_workspace_has_its_own_bucket(
        channels: int, kernel: int, op_type: str, layout: str | None, key: str) -> None:
    """A channels-last depthwise backward whose weight-gradient workspace (1 KiB per channel
    and tap) reaches a fresh allocation is ``@wide`` whatever its positions (2 x 4 x 4 here,
    else the ``@32`` bucket): at 7 x 7 that is from 672 channels on, not at 640."""
    from dnnpart.cost.ops import FRESH_ALLOCATION_BYTES, depthwise_workspace_bytes

    shape = (2, channels, 4, 4)
    spec = OpSpec(op_type=op_type, input_shapes=(shape, shape) if op_type == "conv_backward" else (shape,),
                  output_shapes=(shape,), weight_shapes=((channels, 1, kernel, kernel),),
                  attrs={"memory_format": layout} if layout else {})
    assert operator_work(spec).cost_key == key
    assert depthwise_workspace_bytes(spec) == channels * kernel * kernel * 1024
    assert (depthwise_workspace_bytes(spec) >= FRESH_ALLOCATION_BYTES) == key.endswith("@wide") \
        or op_type == "conv" or layout is None


def test_a_wide_bucket_without_parameters_is_priced_as_the_unbucketed_kind() -> None:
    """A machine file calibrated before ``@wide`` existed prices it as its kind without a bucket."""
    spec = DeviceSpec(name="cal", kind="accelerator", peak_flops=2e12, memory_bandwidth=3e11,
                      op_classes=(OpClassCost(name="depthwise_conv", flops_rate=1e11),
                                  OpClassCost(name="depthwise_conv:conv_backward_cl", flops_rate=1e10),
                                  OpClassCost(name="depthwise_conv:conv_backward_cl@32", flops_rate=1e9)))
    got = device_time_s([1e9], [0.0], ["depthwise_conv:conv_backward_cl@wide"], spec)
    assert got.tolist() == pytest.approx([0.1])


def test_a_strided_kind_without_parameters_is_priced_as_its_plain_kind() -> None:
    """A machine file calibrated before strided convolutions were measured apart prices them
    as it did: the bucketed plain kind, then the plain kind."""
    spec = DeviceSpec(name="cal", kind="accelerator", peak_flops=2e12, memory_bandwidth=3e11,
                      op_classes=(OpClassCost(name="conv", flops_rate=1e11),
                                  OpClassCost(name="conv:conv_backward@32", flops_rate=1e10),
                                  OpClassCost(name="conv:conv_backward_strided@32", flops_rate=2e9),
                                  OpClassCost(name="conv:conv_strided", flops_rate=5e10)))
    keys = ["conv:conv_backward_strided@32", "conv:conv_backward_strided@128", "conv:conv_strided@32",
            "conv:conv_backward@32", "conv:conv_strided_x"]
    got = device_time_s([1e9] * len(keys), [0.0] * len(keys), keys, spec)
    assert got.tolist() == pytest.approx([0.5, 0.01, 0.02, 0.1, 0.01])
