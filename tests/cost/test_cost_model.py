"""The analytic cost model: presets, roofline, transfers, operator work, cluster shorthand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dnnpart.cost import (
    CostModel,
    LinkSpec,
    OpSpec,
    load_catalog,
    operator_work,
    resolve_cluster,
    roofline_time_s,
    transfer_time_s,
)
from dnnpart.errors import FormatError


def test_presets_cover_the_required_devices_and_links() -> None:
    cat = load_catalog()
    for name in ("cpu", "V100-32GB", "A100-40GB", "A100-80GB", "H100-80GB"):
        assert cat.device(name).peak_flops > 0
    for name in ("pcie3-x16", "pcie4-x16", "pcie5-x16", "nvlink2", "nvlink3", "nvlink4", "network-100g"):
        assert cat.link(name).bandwidth > 0
    assert cat.device("A100-80GB").memory_bytes == 80e9
    assert math.isinf(cat.device("cpu").memory_bytes)


def test_roofline_is_the_max_of_compute_and_memory_plus_overhead() -> None:
    acc = load_catalog().device("V100")
    t = roofline_time_s([acc.effective_flops, 0.0], [0.0, acc.effective_bandwidth], acc)
    np.testing.assert_allclose(t, [1.0 + acc.launch_overhead_s, 1.0 + acc.launch_overhead_s])


def test_transfer_is_latency_plus_bytes_over_bandwidth() -> None:
    link = LinkSpec(name="l", bandwidth=10e9, latency=2e-6)
    np.testing.assert_allclose(transfer_time_s([10e9, 0.0], link), [1.0 + 2e-6, 0.0])


@pytest.mark.parametrize(
    ("spec", "flops"),
    [
        (OpSpec(op_type="matmul", input_shapes=((4, 8), (8, 16)), output_shapes=((4, 16),)), 2 * 4 * 16 * 8),
        (
            OpSpec(
                op_type="linear",
                input_shapes=((2, 8),),
                output_shapes=((2, 4),),
                weight_shapes=((4, 8), (4,)),
            ),
            2 * 2 * 4 * 8 + 8,
        ),
        (
            OpSpec(
                op_type="conv",
                input_shapes=((1, 3, 8, 8),),
                output_shapes=((1, 4, 8, 8),),
                weight_shapes=((4, 3, 3, 3),),
            ),
            2 * 4 * 64 * 27,
        ),
        (OpSpec(op_type="relu", input_shapes=((10,),), output_shapes=((10,),)), 10),
        (OpSpec(op_type="softmax", input_shapes=((10,),), output_shapes=((10,),)), 50),
        (OpSpec(op_type="reshape", input_shapes=((10,),), output_shapes=((2, 5),)), 0),
        (
            OpSpec(
                op_type="maxpool",
                input_shapes=((1, 1, 4, 4),),
                output_shapes=((1, 1, 2, 2),),
                attrs={"kernel": (2, 2)},
            ),
            16,
        ),
        (OpSpec(op_type="cross_entropy", input_shapes=((4, 10), (4,)), output_shapes=((),)), 240),
    ],
)
def test_operator_flops(spec: OpSpec, flops: float) -> None:
    work = operator_work(spec)
    assert work.known
    assert work.flops == flops


def test_unknown_operator_is_priced_by_bytes_never_zero() -> None:
    work = operator_work(OpSpec(op_type="fancy", input_shapes=((100,),), output_shapes=((100,),)))
    assert not work.known
    assert work.bytes_moved == 800
    model = CostModel.from_presets()
    assert model.compute_times_ms([work])[0, 1] > model.accelerator.launch_overhead_s * 1e3


def test_shorthand_cluster_uses_the_presets_links() -> None:
    assert resolve_cluster("4xH100").cluster.n_cpus == 0  # host CPUs only when asked
    priced = resolve_cluster("4xH100+1cpu")
    c = priced.cluster
    assert c.n_accelerators == 4 and c.n_cpus == 1
    assert c.bandwidth[0, 1] == load_catalog().link("nvlink4").bandwidth
    assert c.bandwidth[0, 4] == load_catalog().link("pcie5").bandwidth
    assert priced.cost_model.host_link.name == "pcie5-x16"


def test_bad_cluster_specs_are_format_errors(tmp_path) -> None:
    with pytest.raises(FormatError, match="unknown device preset"):
        resolve_cluster("2xTPUv9")
    with pytest.raises(FormatError, match="NxPRESET"):
        resolve_cluster("lots of GPUs")
    with pytest.raises(FormatError, match="not an accelerator"):
        resolve_cluster("2xcpu")


def test_user_spec_file_is_merged_over_the_presets(tmp_path) -> None:
    path = tmp_path / "mine.yaml"
    path.write_text(
        "devices:\n  MyChip:\n    kind: accelerator\n    peak_flops: 1e15\n"
        "    memory_bandwidth: 1e12\n    memory_bytes: 1e10\n    default_link: nvlink4\n"
        "    host_link: pcie5\n"
    )
    cat = load_catalog(path)
    assert cat.device("mychip").peak_flops == 1e15
    assert cat.device("A100").name == "A100-40GB"
    assert resolve_cluster("2xMyChip", catalog=cat).cluster.n_accelerators == 2
    bad = tmp_path / "bad.yaml"
    bad.write_text("devices:\n  X:\n    kind: accelerator\n    peak_flops: fast\n    memory_bandwidth: 1\n")
    with pytest.raises(FormatError, match=r"devices\.X\.peak_flops"):
        load_catalog(bad)
