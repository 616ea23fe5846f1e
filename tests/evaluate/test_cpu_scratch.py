"""A convolution's CPU workspace in the run's memory model: its output in oneDNN's blocked
layout, channels padded to the CPU's block (what ``torch.profiler`` shows a rank allocate)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from dnnpart.evaluate.run_prediction import channel_block, cpu_scratch
from dnnpart.graph.core import LayerAttrs
from dnnpart.testing import chain_graph


def _convs(channels: list[int], backward: list[bool]) -> object:
    n = len(channels)
    g = chain_graph(n)
    attrs = dataclasses.replace(LayerAttrs.empty(n), output_shape=tuple((2, c, 4, 4) for c in channels))
    out = np.array([2.0 * c * 16 * 4 for c in channels])
    return dataclasses.replace(g, op_types=("conv",) * n, output_bytes=out,
                               is_backward=np.array(backward), layer_attrs=attrs)


@pytest.mark.parametrize("block", [8, 16])
def test_workspace_is_the_output_with_channels_padded_to_the_block(block: int) -> None:
    channels = [3, 8, 16, 24, 96]
    g = _convs(channels, [False, False, True, False, True])
    got = cpu_scratch(g, block)
    for v, c in enumerate(channels):
        padded = -(-c // block) * block
        per_channel = g.output_bytes[v] / c
        factor = 2.0 if g.is_backward[v] else 1.0
        assert got[v] == pytest.approx(factor * padded * per_channel)
    assert channel_block() in (8, 16)


def test_other_operators_hold_no_workspace() -> None:
    g = _convs([8, 8], [False, False])
    g = dataclasses.replace(g, op_types=("matmul", "add"))
    assert cpu_scratch(g, 16).tolist() == [0.0, 0.0]
