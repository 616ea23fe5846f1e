"""Diagnostics name the binding constraint and warn about host-CPU offload."""

from __future__ import annotations

import dataclasses

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from dnnpart.evaluate.diagnose import binding_constraint, host_offload
from dnnpart.plan import Plan
from dnnpart.testing import chain_problem


@settings(max_examples=30, deadline=None)
@given(st.lists(st.floats(1e6, 5e9), min_size=2, max_size=6), st.floats(1e8, 4e9))
def test_binding_constraint_names_the_biggest_operator_when_it_fits_nowhere(
    sizes: list[float], capacity: float
) -> None:
    p = chain_problem([1.0] * len(sizes), n_accelerators=2, memory_bytes=capacity)
    p = dataclasses.replace(p, graph=dataclasses.replace(p.graph, memory_bytes=np.array(sizes)))
    why = binding_constraint(p)
    biggest = int(np.argmax(sizes))
    if max(sizes) > capacity:
        assert why is not None and why.startswith(f"{p.graph.names[biggest]!r} needs")
    elif sum(sizes) > 2 * capacity:
        assert why is not None and "in all" in why
    else:
        assert why is None


def test_host_offload_warns_only_when_the_cpu_computes() -> None:
    p = chain_problem([1.0, 1.0, 2.0], n_accelerators=1, n_cpus=1)
    assert host_offload(p, Plan(assignment=[0, 0, 0])) is None
    line = host_offload(p, Plan(assignment=[0, 0, 1]))
    assert line is not None and "50% of the compute" in line and "cpu" in line
