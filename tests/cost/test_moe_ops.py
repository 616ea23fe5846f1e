"""Mixture-of-experts operators are priced by FLOPs, checked against torch's own FLOP counter.

The oracle runs the reference implementation (a loop of ``torch.mm`` over the experts' row
slices, as ``transformers``' fallback does) under ``torch.utils.flop_counter.FlopCounterMode``
and compares its count with :func:`dnnpart.cost.ops.operator_work` of the operator's shapes.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

from dnnpart.cost.ops import OpSpec, canonical_op, operator_work  # noqa: E402


def _counted(fn: object, *args: object) -> int:
    with FlopCounterMode(display=False) as counter:
        fn(*args)  # type: ignore[operator]
    return int(counter.get_total_flops())


def _loop_forward(x: object, w: object, offs: list[int]) -> None:
    start = 0
    for i, end in enumerate(offs):
        torch.mm(x[start:end], w[i])  # type: ignore[index]
        start = end


def _loop_backward(x: object, w: object, offs: list[int], grad: object) -> None:
    start = 0
    for i, end in enumerate(offs):
        torch.mm(grad[start:end], w[i].T)  # type: ignore[index]
        torch.mm(x[start:end].T, grad[start:end])  # type: ignore[index]
        start = end


@pytest.mark.parametrize(("rows", "k", "n", "offs"), [(12, 8, 4, [3, 3, 9, 12]), (16, 16, 8, [16]),
                                                       (10, 4, 12, [0, 5, 7, 10, 10])])
def test_grouped_matmuls_count_each_row_once(rows: int, k: int, n: int, offs: list[int]) -> None:
    experts = len(offs)
    x, w, grad = torch.randn(rows, k), torch.randn(experts, k, n), torch.randn(rows, n)
    for name in ("_grouped_mm", "grouped_mm_fallback"):
        spec = OpSpec(op_type=canonical_op(name), input_shapes=((rows, k), (experts,)),
                      weight_shapes=((experts, k, n),), output_shapes=((rows, n),))
        work = operator_work(spec)
        assert work.known and work.flops == _counted(_loop_forward, x, w, offs)
    backward = OpSpec(op_type=canonical_op("grouped_mm_fallback_backward"),
                      input_shapes=((rows, k), (experts, k, n), (experts,), (rows, n)),
                      output_shapes=((rows, k), (experts, k, n)))
    assert operator_work(backward).flops == _counted(_loop_backward, x, w, offs, grad)


def test_weight_gradient_grouped_over_k() -> None:
    """2-D x 2-D with offsets (the weight gradient): each group reduces over its slice of k."""
    m, n, offs = 8, 4, [4, 4, 12]
    a, b = torch.randn(m, offs[-1]), torch.randn(offs[-1], n)

    def loop() -> None:
        start = 0
        for end in offs:
            torch.mm(a[:, start:end], b[start:end])
            start = end

    spec = OpSpec(op_type="grouped_mm", input_shapes=((m, offs[-1]), (offs[-1], n), (len(offs),)),
                  output_shapes=((len(offs), m, n),))
    assert operator_work(spec).flops == _counted(loop)


def test_routing_ops_have_formulas() -> None:
    """top-k, sort, histogram, scatter: the router's operators are priced, not unknown."""
    for name in ("topk", "sort", "histc", "floor_divide", "scatter", "index_put_", "split_with_sizes",
                 "softplus_backward"):
        spec = OpSpec(op_type=canonical_op(name), input_shapes=((16, 8),), output_shapes=((16, 8),))
        assert operator_work(spec).known, name
