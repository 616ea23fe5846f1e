"""add_backward_pass: pairing, colour classes, mirrored edges, costs, ids."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dnnpart import Plan, evaluate
from dnnpart.devices import reference_cluster
from dnnpart.graph import NO_CLASS, GraphBuilder
from dnnpart.graph.training import add_backward_pass, backward_partner
from dnnpart.problem import Objective, Problem
from dnnpart.testing import chain_graph


def diamond(*, classes: tuple[int, ...] = (NO_CLASS,) * 4):
    """0 -> {1, 2} -> 3 with distinct costs, ids 10..13, op types, one unsupported node."""
    b = GraphBuilder()
    for i in range(4):
        b.add_node(10 + i, cpu_time=10.0 + i, acc_time=math.inf if i == 2 else 1.0 + i,
                   memory_bytes=100.0 * (i + 1), color_class=classes[i], layer_id=i,
                   name=f"n{i}", op_type="Op")
    b.add_edge(10, 11, cost=0.5, n_bytes=5.0)
    b.add_edge(10, 12, cost=0.5, n_bytes=5.0)
    b.add_edge(11, 13, cost=0.25, n_bytes=2.5)
    b.add_edge(12, 13, cost=0.75, n_bytes=7.5)
    return b.build()


def edge_set(g):
    src = g.edge_sources()
    return {
        (g.names[u], g.names[v]): (c, nb)
        for u, v, c, nb in zip(src, g.succ_idx, g.edge_cost, g.edge_bytes, strict=True)
    }


def test_sizes_roles_and_names():
    fw = diamond()
    g = add_backward_pass(fw)
    assert g.n_nodes == 2 * fw.n_nodes
    assert g.n_edges == 2 * fw.n_edges + 1  # one sink
    assert g.is_backward.sum() == fw.n_nodes
    assert g.is_training
    assert sorted(g.names) == sorted([f"n{i}" for i in range(4)] + [f"n{i}_grad" for i in range(4)])
    for v in range(g.n_nodes):
        assert g.names[v].endswith("_grad") == bool(g.is_backward[v])
        assert g.op_types[v] == ("Op_grad" if g.is_backward[v] else "Op")


def test_every_forward_node_has_one_partner_in_its_class():
    g = add_backward_pass(diamond())
    partner = backward_partner(g)
    assert np.all(partner >= 0)
    assert np.array_equal(partner[partner], np.arange(g.n_nodes))
    assert np.all(g.is_backward[partner] != g.is_backward)
    assert np.all(g.color_class != NO_CLASS)
    assert np.array_equal(g.color_class[partner], g.color_class)
    # fresh classes: one per pair, all distinct
    assert len(np.unique(g.color_class)) == 4
    assert np.array_equal(g.layer_id[partner], g.layer_id)


def test_existing_classes_are_kept_and_joined():
    # n0 and n3 already share class 7; n1 is in class 2; n2 has none.
    g = add_backward_pass(diamond(classes=(7, 2, NO_CLASS, 7)))
    by_name = dict(zip(g.names, g.color_class.tolist(), strict=True))
    assert by_name["n0"] == by_name["n3"] == by_name["n0_grad"] == by_name["n3_grad"] == 7
    assert by_name["n1"] == by_name["n1_grad"] == 2
    assert by_name["n2"] == by_name["n2_grad"] not in (2, 7)


def test_edges_are_mirrored_with_the_same_cost_and_bytes():
    fw = diamond()
    g = add_backward_pass(fw)
    edges = edge_set(g)
    for (u, v), (cost, n_bytes) in edge_set(fw).items():
        assert edges[(u, v)] == (cost, n_bytes)
        assert edges[(f"{v}_grad", f"{u}_grad")] == (cost, n_bytes)
    assert edges[("n3", "n3_grad")] == (0.0, 0.0)  # the loss turns around at the sink
    assert len(edges) == 2 * fw.n_edges + 1


def test_times_memory_and_ids():
    fw = diamond()
    g = add_backward_pass(fw, backward_factor=3.0)
    partner = backward_partner(g)
    fwd = np.flatnonzero(~g.is_backward)
    np.testing.assert_array_equal(g.compute_time[partner[fwd]], 3.0 * g.compute_time[fwd])
    assert np.isinf(g.time_on("accelerator")[g.names.index("n2_grad")])  # unsupported stays so
    np.testing.assert_array_equal(g.memory_bytes[partner[fwd]], g.memory_bytes[fwd])
    # ids 10..13 -> backward ids 14..17: no collisions, and offset by the id span
    assert sorted(g.original_ids.tolist()) == list(range(10, 18))
    np.testing.assert_array_equal(g.original_ids[partner[fwd]], g.original_ids[fwd] + 4)


def test_custom_backward_memory():
    fw = diamond()
    g = add_backward_pass(fw, backward_memory_bytes=[1.0, 2.0, 3.0, 4.0])
    mem = dict(zip(g.names, g.memory_bytes.tolist(), strict=True))
    assert [mem[f"n{i}_grad"] for i in range(4)] == [1.0, 2.0, 3.0, 4.0]
    with pytest.raises(ValueError, match="one value per node"):
        add_backward_pass(fw, backward_memory_bytes=[1.0])


def test_rejects_bad_input():
    g = add_backward_pass(chain_graph(3))
    with pytest.raises(ValueError, match="already has 3 backward nodes"):
        add_backward_pass(g)
    for factor in (0.0, -1.0, math.inf, math.nan):
        with pytest.raises(ValueError, match="backward_factor"):
            add_backward_pass(chain_graph(3), backward_factor=factor)


def test_several_sinks_and_sources():
    # two independent chains: two sources, two sinks
    b = GraphBuilder()
    for i in range(4):
        b.add_node(i, cpu_time=1.0, acc_time=1.0)
    b.add_edge(0, 1, cost=1.0)
    b.add_edge(2, 3, cost=1.0)
    g = add_backward_pass(b.build())
    edges = edge_set(g)
    assert ("1", "1_grad") in edges and ("3", "3_grad") in edges
    assert g.n_edges == 2 * 2 + 2


def test_evaluate_on_one_device_and_colocation():
    g = add_backward_pass(chain_graph(4, acc_time=1.0, cost=0.5))
    cluster = reference_cluster(n_accelerators=2, n_cpus=0, memory_bytes=math.inf)
    problem = Problem(graph=g, cluster=cluster)
    ev = evaluate(problem, Plan(assignment=np.zeros(g.n_nodes, int)))
    assert ev.feasible
    assert ev.forward_load[0] == pytest.approx(4.0)
    assert ev.backward_load[0] == pytest.approx(8.0)
    assert ev.objective == pytest.approx(12.0)
    # splitting a pair across devices breaks its colocation class
    split = np.zeros(g.n_nodes, int)
    split[g.names.index("0_grad")] = 1
    ev = evaluate(problem, Plan(assignment=split))
    assert not ev.feasible and any("colocation" in v for v in ev.violations)
    # a contiguous two-stage split of pairs is feasible and cheaper (GPipe form too)
    stage = np.array([0 if name.split("_")[0] in ("0", "1") else 1 for name in g.names])
    for form in ("pipedream", "gpipe"):
        p = problem.with_objective(Objective(training=form))
        ev = evaluate(p, Plan(assignment=stage))
        assert ev.feasible and ev.objective < 12.0
