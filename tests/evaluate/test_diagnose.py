"""Diagnostics name the binding constraint and warn about host-CPU offload."""

from __future__ import annotations

import dataclasses

import numpy as np
from hypothesis import example, given, settings
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


def test_host_offload_ignores_forced_and_negligible_operators() -> None:
    import math

    p = chain_problem([1.0, 1.0, 1000.0, 1e-3], n_accelerators=1, n_cpus=1)
    assert host_offload(p, Plan(assignment=[0, 0, 1, 0])) is not None
    assert host_offload(p, Plan(assignment=[0, 0, 0, 1])) is None  # 1e-6 of the compute
    g = p.graph
    times = g.compute_time.copy()
    times[2, g.device_kinds.index("accelerator")] = math.inf  # no accelerator runs it
    forced = dataclasses.replace(p, graph=dataclasses.replace(g, compute_time=times))
    assert host_offload(forced, Plan(assignment=[0, 0, 1, 0])) is None
    assert host_offload(p, Plan(assignment=[1, 0, 0, 0])) is None  # 0.1% of the compute


# -- bottleneck attribution -------------------------------------------------------------------


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(1, 20), min_size=2, max_size=7), st.integers(2, 4))
@example([1, 18, 1, 19], 3)  # two stages tie at 19; only one of them is a single operator
def test_a_one_operator_bottleneck_means_more_devices_do_not_help(times: list[int], k: int) -> None:
    from dnnpart.evaluate.diagnose import bottleneck, bound_is_one_operator
    from dnnpart.solvers import solve

    p = chain_problem([float(t) for t in times], n_accelerators=k)
    result = solve(p, "dp")
    plan = result.require_plan()
    said = bottleneck(p, plan)
    if said is not None:
        # the claim holds: twice the devices (as many as operators) do no better
        more = solve(chain_problem([float(t) for t in times], n_accelerators=len(times)), "dp")
        assert more.objective == result.objective
        assert "more devices will not help" in said
    if result.objective == max(times):
        # the optimum is the biggest operator: both diagnostics say so
        assert said is not None and f"`{times.index(max(times))}`" in said
        assert bound_is_one_operator(p, result.bound) is not None
    else:
        assert bound_is_one_operator(p, result.bound) is None


def test_bottleneck_counts_an_operator_with_its_backward_as_one() -> None:
    from dnnpart.evaluate import evaluate
    from dnnpart.evaluate.diagnose import bottleneck
    from dnnpart.testing import random_problem

    p = random_problem(np.random.default_rng(3), n_nodes=4, n_accelerators=4, n_cpus=0, training=True)
    g = p.graph
    # every forward node with its backward partner on a device of its own
    plan = Plan(assignment=np.asarray(g.color_class, dtype=np.int64) % 4)
    worst = int(np.argmax(evaluate(p, plan).load))
    on = np.flatnonzero((plan.assignment == worst) & (g.compute_time[:, 0] > 0))
    assert on.size == 2 and g.is_backward[on].sum() == 1  # the case under test: forward + backward
    forward = g.names[int(on[~g.is_backward[on]][0])]
    said = bottleneck(p, plan)
    assert said is not None and f"is one operator, `{forward}`" in said


def test_bottleneck_names_the_module_and_the_cli_prints_it(tmp_path) -> None:
    import json
    import subprocess
    import sys

    graph = {"maxSizePerFPGA": 100.0, "maxFPGAs": 3, "maxCPUs": 0,
             "nodes": [{"id": i, "supportedOnFpga": 1, "cpuLatency": 50.0, "fpgaLatency": t, "size": 1.0}
                       for i, t in enumerate([1.0, 1.0, 9.0, 1.0])],
             "edges": [{"sourceId": i, "destId": i + 1, "cost": 0.0} for i in range(3)]}
    path = tmp_path / "g.json"
    path.write_text(json.dumps(graph))
    proc = subprocess.run([sys.executable, "-m", "dnnpart", "solve", str(path)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "is one operator, `2`" in proc.stderr and "the bound 9 is one operator's time" in proc.stderr
    # every bound says what it bounds
    assert "dp: optimal among contiguous splits" in proc.stdout


def test_a_makespan_problem_sums_only_what_lives_all_run() -> None:
    """Under the makespan objective activations are freed, so their sum binds no plan (a chain
    of 2 GB activations runs on two 2.5 GB devices); the residual bytes (held
    all run) still add up, and the line says that is what they are."""
    from dnnpart.graph import NORMAL, RESIDUAL
    from dnnpart.problem import Objective

    p = chain_problem([1.0] * 4, n_accelerators=2, memory_bytes=2.5e9)
    p = dataclasses.replace(p, objective=Objective(kind="makespan"))
    big = np.full(4, 2e9)
    normal = dataclasses.replace(p.graph, memory_bytes=big, memory_class=np.full(4, NORMAL, np.int8))
    assert binding_constraint(dataclasses.replace(p, graph=normal)) is None
    resident = dataclasses.replace(normal, memory_class=np.full(4, RESIDUAL, np.int8))
    why = binding_constraint(dataclasses.replace(p, graph=resident))
    assert why is not None and why.startswith("its parameters and optimizer state") and "8 GB" in why
    # paper 1's throughput: every operator's bytes count all run, so the sum binds
    additive = dataclasses.replace(p, graph=normal, objective=Objective(kind="throughput"))
    assert "the model needs 8 GB in all" in (binding_constraint(additive) or "")
