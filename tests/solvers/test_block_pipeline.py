"""The block pipeline on real captured models: units form a chain, the DP's value is the
evaluator's, the plan cuts between whole blocks, memory matches the simulator's, and an
impossible memory names the block that cannot fit. (Exactness against an enumeration of
every block split runs in tests/test_conformance.py, ``stages`` set.)"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from dnnpart import Objective, Plan, Status, evaluate
from dnnpart.graph.blocks import block_keys, node_units
from dnnpart.solvers import solve

pytest.importorskip("transformers")

GPT2 = "hf:gpt2:n_layer=3,n_embd=64,n_head=2"


@pytest.fixture(scope="module")
def gpt2_training():
    from dnnpart.workflow import import_model

    return import_model(GPT2, cluster="4xA100", training=True, optimizer="adam")


@pytest.fixture(scope="module")
def resnet_inference():
    from dnnpart.workflow import import_model

    return import_model("builtin:resnet50", cluster="4xA100", input_shapes=[(1, 3, 32, 32)])


def _chain_ok(graph) -> None:
    units = node_units(graph)
    src = graph.edge_sources()
    dst = graph.succ_idx
    fwd = ~graph.is_backward[src] & ~graph.is_backward[dst]
    assert np.all(units.unit[src[fwd]] <= units.unit[dst[fwd]])
    return units


def test_gpt2_units_are_its_blocks_in_order(gpt2_training) -> None:
    units = _chain_ok(gpt2_training.imported.graph)
    assert units.names == ("prologue", "transformer.h.0", "transformer.h.1", "transformer.h.2", "epilogue")


def test_resnet_units_are_its_bottlenecks(resnet_inference) -> None:
    units = _chain_ok(resnet_inference.imported.graph)
    blocks = [n for n in units.names if n not in ("prologue", "epilogue")]
    assert blocks[0] == "layer1.0" and blocks[-1] == "layer4.2" and len(blocks) == 16


def test_nested_repeated_blocks_are_split_and_distinct_sublayers_are_not() -> None:
    swin = ["s.0.blocks.0.attn", "s.0.blocks.0.mlp", "s.0.blocks.1.attn", "s.0.blocks.1.mlp", "s.0.down"]
    assert block_keys(swin) == ["s.0.blocks.0"] * 2 + ["s.0.blocks.1"] * 2 + ["s.0"]
    t5 = ["enc.block.0.layer.0.attn", "enc.block.0.layer.1.ff", "enc.block.1.layer.0.attn",
          "enc.block.1.layer.1.ff"]
    assert block_keys(t5) == ["enc.block.0"] * 2 + ["enc.block.1"] * 2
    seq = ["f.1.0.block.0", "f.1.0.block.2", "f.1.1.block.0", "f.1.1.block.2"]  # ConvNeXt-like
    assert block_keys(seq) == ["f.1.0"] * 2 + ["f.1.1"] * 2


@pytest.mark.parametrize("schedule", ["1f1b", "gpipe"])
def test_dp_value_is_the_evaluators_and_the_best_block_split(gpt2_training, schedule: str) -> None:
    problem = gpt2_training.problem(Objective(kind="stages", schedule=schedule, microbatches=4))
    result = solve(problem, "block-pipeline")
    assert result.status is Status.OPTIMAL
    ev = evaluate(problem, result.plan)
    assert result.objective == pytest.approx(ev.objective, rel=1e-12)
    units = node_units(problem.graph)
    # every unit on one device, devices in unit order = the first accelerators in order
    per_unit = [np.unique(result.plan.assignment[units.unit == u]) for u in range(units.n_units)]
    assert all(d.size == 1 for d in per_unit)
    seq = [int(d[0]) for d in per_unit]
    assert seq == sorted(seq) and sorted(set(seq)) == list(range(len(set(seq))))
    # brute force over every block split, scored by evaluate
    best = np.inf
    for s in range(1, 5):
        for cuts in itertools.combinations(range(1, units.n_units), s - 1):
            stage = np.searchsorted(np.asarray(cuts), np.arange(units.n_units), side="right")
            ev2 = evaluate(problem, Plan(assignment=stage[units.unit]))
            if ev2.feasible:
                best = min(best, ev2.objective)
    assert result.objective == pytest.approx(best, rel=1e-12)


@pytest.mark.parametrize(("schedule", "recompute"), [("1f1b", False), ("gpipe", False), ("1f1b", True)])
def test_stage_memory_is_the_simulators(gpt2_training, schedule: str, recompute: bool) -> None:
    """The analytic in-flight count (1F1B: min(m, S - i)) against the simulator's peak."""
    from dnnpart.simulate import simulate_pipeline
    from dnnpart.stages import Stage

    problem = gpt2_training.problem(Objective(kind="stages", schedule=schedule, microbatches=6,
                                              recompute=recompute))
    units = node_units(problem.graph)
    plan = Plan(assignment=np.minimum(units.unit, 3))
    ev = evaluate(problem, plan)
    figures = ev.simulation
    stages = [Stage(devices=(i,), forward=1.0, backward=2.0,
                    weight_bytes=m["weights"], activation_bytes=1.0e6, input_bytes=1.0e5)
              for i, m in enumerate(figures["memory"])]
    sim = simulate_pipeline(stages, problem.cluster, microbatches=6, schedule=schedule,
                            recompute=recompute, optimizer_factor=figures["optimizer_factor"])
    from dnnpart.pricing.chain import stage_memory

    for i, st in enumerate(stages):
        mine = stage_memory(weights=st.weight_bytes, activations=st.activation_bytes,
                            inputs=st.input_bytes, stage=i, n_stages=len(stages), schedule=schedule,
                            microbatches=6, recompute=recompute, training=True,
                            k=figures["optimizer_factor"])
        assert mine.total == pytest.approx(sim.memory[i]["total"], rel=1e-12)
    assert all(m["activations"] > 0 for m in figures["memory"])


def test_memory_too_small_names_the_block(gpt2_training) -> None:
    import dataclasses

    problem = gpt2_training.problem(Objective(kind="stages", schedule="1f1b", microbatches=4))
    c = problem.cluster
    tiny = dataclasses.replace(c, devices=tuple(
        dataclasses.replace(d, memory_bytes=1e6) if d.is_accelerator else d for d in c.devices))
    result = solve(dataclasses.replace(problem, cluster=tiny), "block-pipeline")
    assert result.status is Status.INFEASIBLE
    assert "alone needs" in result.stats["why"] and "capacity" in result.stats["why"]


def test_stage_memory_counts_the_largest_units_working_set(gpt2_training) -> None:
    """The DP's tables and ``evaluate`` count one micro-batch's working set the same way: per
    block unit (its walk's peak over its stash), the largest of a stage's units; a training
    stage holds more than its stash alone, an inference graph has no such term."""
    from dnnpart.pricing.chain_tables import chain_tables
    from dnnpart.pricing.liveness import piece_working, value_bytes, working_set

    problem = gpt2_training.problem(Objective(kind="stages", schedule="1f1b", microbatches=4))
    g = problem.graph
    units = node_units(g)
    per_unit = piece_working(g, units.unit, units.n_units)
    nbytes = value_bytes(g)
    for u in range(units.n_units):  # the walk of each unit alone, one by one
        ws = working_set(g, units.unit == u, nbytes)
        assert per_unit[u] == pytest.approx(max(ws.peak - ws.stash, 0.0))
    assert np.all(per_unit[1:-1] > 0)  # every block's backward makes gradients
    plan = Plan(assignment=np.minimum(units.unit, 3))
    ev = evaluate(problem, plan)
    tables = chain_tables(problem, units)
    stage_units = [np.unique(units.unit[plan.assignment == i]) for i in range(4)]
    for i, mem in enumerate(ev.simulation["memory"]):
        assert mem["working"] == pytest.approx(per_unit[stage_units[i]].max())
        a, b = int(stage_units[i][0]), int(stage_units[i][-1]) + 1
        assert tables.memory(problem, i, 4, [a], b)[0] == pytest.approx(mem["total"], rel=1e-12)


def test_inference_stages_have_no_working_set_term(resnet_inference) -> None:
    from dnnpart.pricing.liveness import piece_working

    g = resnet_inference.imported.graph
    units = node_units(g)
    assert not piece_working(g, units.unit, units.n_units).any()
