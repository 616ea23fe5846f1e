"""Throughput evaluation against paper 1's cost model (section 3, appendices B and C.1).

An accelerator's load is its compute plus ``c_u`` once per own node with an edge leaving the
device (out) and once per outside node with an edge into the device (in); a CPU pays compute
only. Non-uniform out-edge costs are paid per edge (the subdivision of appendix B).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given

from dnnpart import Objective, Plan, Problem, evaluate
from dnnpart.devices import ACCELERATOR, CPU, Cluster, Device, reference_cluster
from dnnpart.graph import NO_CLASS, Graph, GraphBuilder, build_graph
from dnnpart.testing.strategies import problems_and_contiguous_plans, problems_and_plans

INF = math.inf


# -- an independent, straightforward re-implementation ---------------------------------------


def reference_evaluation(problem: Problem, assignment) -> dict:
    """Loads, memory and feasibility by plain loops over nodes and edges."""
    g, cl, obj = problem.graph, problem.cluster, problem.objective
    n, d = g.n_nodes, cl.n_devices
    a = [int(x) for x in assignment]
    devs = cl.devices
    col = {kind: g.device_kinds.index(kind) for kind in (ACCELERATOR, CPU)}
    comp = [[0.0] * d for _ in range(2)]
    cin = [[0.0] * d for _ in range(2)]
    cout = [[0.0] * d for _ in range(2)]
    out_edges: dict[int, list[tuple[int, float]]] = {u: [] for u in range(n)}
    for u in range(n):
        for e in range(int(g.succ_ptr[u]), int(g.succ_ptr[u + 1])):
            out_edges[u].append((int(g.succ_idx[e]), float(g.edge_cost[e])))
    for v in range(n):
        dev = devs[a[v]]
        role = int(g.is_backward[v])
        comp[role][a[v]] += float(g.compute_time[v, col[dev.kind]]) / dev.speed
    for u in range(n):
        role = int(g.is_backward[u])
        du = a[u]
        edges = out_edges[u]
        if not edges:
            continue
        scale_u = float(cl.host_link_scale[du]) if devs[du].is_accelerator else 0.0
        if len({c for _, c in edges}) == 1:  # one tensor: c_u per device boundary
            c = edges[0][1]
            receivers = {a[w] for w, _ in edges} - {du}
            if receivers:
                cout[role][du] += c * scale_u
            for x in receivers:
                if devs[x].is_accelerator:
                    cin[role][x] += c * float(cl.host_link_scale[x])
        else:  # per edge (appendix B)
            for w, c in edges:
                if a[w] != du:
                    cout[role][du] += c * scale_u
                    if devs[a[w]].is_accelerator:
                        cin[role][a[w]] += c * float(cl.host_link_scale[a[w]])

    def combine(c: float, i: float, o: float) -> float:
        if obj.overlap == "none":
            return c + i + o
        if obj.overlap == "compute-comm":
            return max(c, i + o)
        return max(c, i, o)

    fw = [combine(comp[0][x], cin[0][x], cout[0][x]) for x in range(d)]
    bw = [combine(comp[1][x], cin[1][x], cout[1][x]) for x in range(d)]
    total = [combine(comp[0][x] + comp[1][x], cin[0][x] + cin[1][x], cout[0][x] + cout[1][x])
             for x in range(d)]
    objective = max(fw) + max(bw) if obj.training == "gpipe" else max(total)
    memory = [0.0] * d
    for v in range(n):
        memory[a[v]] += float(g.memory_bytes[v])
    ok_memory = all(memory[x] <= devs[x].memory_bytes for x in range(d))
    ok_support = all(math.isfinite(g.compute_time[v, col[devs[a[v]].kind]]) for v in range(n))
    classes: dict[int, set[int]] = {}
    for v in range(n):
        if g.color_class[v] != NO_CLASS:
            classes.setdefault(int(g.color_class[v]), set()).add(a[v])
    ok_colocation = all(len(s) == 1 for s in classes.values())
    return {
        "objective": objective, "load": total, "forward": fw, "backward": bw, "memory": memory,
        "feasible": ok_memory and ok_support and ok_colocation,
        "ok_memory": ok_memory, "ok_support": ok_support, "ok_colocation": ok_colocation,
    }


def _check_against_reference(problem: Problem, plan: Plan) -> None:
    ev = evaluate(problem, plan)
    ref = reference_evaluation(problem, plan.assignment)
    assert ev.objective == pytest.approx(ref["objective"])
    np.testing.assert_allclose(ev.load, ref["load"], rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(ev.forward_load, ref["forward"], rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(ev.backward_load, ref["backward"], rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(ev.memory_bytes, ref["memory"])
    assert ev.feasible == ref["feasible"], ev.violations
    assert (len(ev.violations) == 0) == ev.feasible


@given(problems_and_plans(heterogeneous_prob=0.3, random_objective=True))
def test_evaluate_equals_reference_on_random_plans(case) -> None:
    _check_against_reference(*case)


@given(problems_and_contiguous_plans(heterogeneous_prob=0.2, random_objective=True))
def test_evaluate_equals_reference_on_contiguous_plans(case) -> None:
    _check_against_reference(*case)


# -- appendix B: non-uniform out-edges equal the subdivided graph --------------------------------


def subdivide(problem: Problem, assignment) -> tuple[Problem, list[int]]:
    """Paper 1, appendix B: each out-edge (u, v_j) of a node with unequal out-edge costs
    becomes u -> w_j -> v_j with w_j free, colocated with u, c_{w_j} = d_j; c_u is set high
    (it is never paid since u is colocated with all its successors)."""
    g = problem.graph
    _, uniform = g.node_out_cost()
    ids = [int(i) for i in g.original_ids]
    fresh = max(ids) + 1
    src, dst, ecost = [], [], []
    times = [list(map(float, row)) for row in g.compute_time]
    mem = list(map(float, g.memory_bytes))
    backward = list(map(bool, g.is_backward))
    a = [int(x) for x in assignment]
    classes = list(map(int, g.color_class))
    for u in range(g.n_nodes):
        for e in range(int(g.succ_ptr[u]), int(g.succ_ptr[u + 1])):
            v = int(g.succ_idx[e])
            if uniform[u]:
                src.append(ids[u]), dst.append(ids[v]), ecost.append(float(g.edge_cost[e]))
                continue
            w = fresh
            fresh += 1
            ids.append(w)
            times.append([0.0, 0.0])
            mem.append(0.0)
            backward.append(backward[u])
            classes.append(NO_CLASS)
            a.append(a[u])
            src += [ids[u], w]
            dst += [w, ids[v]]
            ecost += [1e6, float(g.edge_cost[e])]
    h = build_graph(ids, src, dst, compute_time=times, edge_cost=ecost, memory_bytes=mem,
                    is_backward=backward, color_class=classes)
    order = h.index_of(ids)
    assign = np.empty(len(ids), np.int64)
    assign[order] = a
    return Problem(graph=h, cluster=problem.cluster, objective=problem.objective), assign.tolist()


@given(problems_and_plans(nonuniform_prob=0.8, heterogeneous_prob=0.2, random_objective=True))
def test_nonuniform_edges_equal_appendix_b_subdivision(case) -> None:
    problem, plan = case
    sub, assign = subdivide(problem, plan.assignment)
    ev, ev_sub = evaluate(problem, plan), evaluate(sub, Plan(assignment=assign))
    assert ev.objective == pytest.approx(ev_sub.objective)
    np.testing.assert_allclose(ev.load, ev_sub.load, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(ev.forward_load, ev_sub.forward_load, rtol=1e-9, atol=1e-9)


# -- hand-computed cases --------------------------------------------------------------------


def _graph(nodes, edges, *, backward=(), classes=None) -> Graph:
    """nodes: {id: (cpu, acc, mem)}; edges: [(u, v, cost)]."""
    b = GraphBuilder()
    for v, (cpu, acc, mem) in nodes.items():
        b.add_node(v, cpu_time=cpu, acc_time=acc, memory_bytes=mem, is_backward=v in backward,
                   color_class=(classes or {}).get(v, NO_CLASS))
    for u, v, c in edges:
        b.add_edge(u, v, cost=c)
    return b.build()


def _plan(g: Graph, where: dict[int, int]) -> Plan:
    a = np.empty(g.n_nodes, np.int64)
    a[g.index_of(list(where))] = list(where.values())
    return Plan(assignment=a)


def _problem(g: Graph, k: int, cpus: int = 0, memory: float = INF, **objective) -> Problem:
    return Problem(graph=g, cluster=reference_cluster(n_accelerators=k, n_cpus=cpus,
                                                      memory_bytes=memory),
                   objective=Objective(**objective))


def test_chain_split_pays_the_crossing_tensor_on_both_sides() -> None:
    g = _graph({1: (9, 1, 0), 2: (9, 2, 0), 3: (9, 3, 0)}, [(1, 2, 0.5), (2, 3, 0.25)])
    ev = evaluate(_problem(g, 2), _plan(g, {1: 0, 2: 0, 3: 1}))
    assert ev.load.tolist() == [3.25, 3.25]  # 1+2 + out c_2 ; 3 + in c_2
    assert ev.objective == 3.25
    assert ev.breakdown.comm_out.sum(axis=0).tolist() == [0.25, 0.0]
    assert ev.breakdown.comm_in.sum(axis=0).tolist() == [0.0, 0.25]


def test_fan_out_pays_once_per_receiving_device() -> None:
    # u -> v1, v2 (acc1), v3 (acc2): u's output leaves acc0 once, enters acc1 once, acc2 once
    g = _graph({0: (9, 1, 0), 1: (9, 1, 0), 2: (9, 1, 0), 3: (9, 1, 0)},
               [(0, 1, 2.0), (0, 2, 2.0), (0, 3, 2.0)])
    ev = evaluate(_problem(g, 3), _plan(g, {0: 0, 1: 1, 2: 1, 3: 2}))
    assert ev.load.tolist() == [1 + 2, 2 + 2, 1 + 2]


def test_fan_in_pays_each_outside_producer() -> None:
    g = _graph({0: (9, 1, 0), 1: (9, 1, 0), 2: (9, 1, 0)}, [(0, 2, 1.5), (1, 2, 0.5)])
    ev = evaluate(_problem(g, 3), _plan(g, {0: 0, 1: 1, 2: 2}))
    assert ev.load.tolist() == [2.5, 1.5, 3.0]


def test_cpu_pays_compute_only_and_accelerator_pays_transfers_from_cpu() -> None:
    g = _graph({0: (7, 1, 0), 1: (20, 2, 0), 2: (5, 1, 0)}, [(0, 1, 0.5), (1, 2, 0.75)])
    ev = evaluate(_problem(g, 1, cpus=1), _plan(g, {0: 1, 1: 0, 2: 1}))
    assert ev.load.tolist() == [0.5 + 2 + 0.75, 7 + 5]
    assert ev.objective == 12


def test_nonuniform_out_edges_are_paid_per_edge() -> None:
    g = _graph({0: (9, 1, 0), 1: (9, 1, 0), 2: (9, 1, 0)}, [(0, 1, 1.0), (0, 2, 3.0)])
    both_away = evaluate(_problem(g, 2), _plan(g, {0: 0, 1: 1, 2: 1}))
    assert both_away.load.tolist() == [1 + 4, 2 + 4]
    one_away = evaluate(_problem(g, 2), _plan(g, {0: 0, 1: 0, 2: 1}))
    assert one_away.load.tolist() == [2 + 3, 1 + 3]
    other_away = evaluate(_problem(g, 2), _plan(g, {0: 0, 1: 1, 2: 0}))
    assert other_away.load.tolist() == [2 + 1, 1 + 1]


@pytest.mark.parametrize("overlap", ["none", "compute-comm", "full-duplex"])
def test_overlap_modes_of_appendix_c1(overlap: str) -> None:
    # 0 -> 1 -> 2 -> 3 with 0, 1, 3 on acc0 and 2 on acc1:
    # acc0: compute 1+3+0 = 4, out 3 (node 1's tensor), in 4 (node 2's tensor)
    # acc1: compute 2, in 3, out 4
    g = _graph({0: (9, 1, 0), 1: (9, 3, 0), 2: (9, 2, 0), 3: (9, 0, 0)},
               [(0, 1, 0.0), (1, 2, 3.0), (2, 3, 4.0)])
    ev = evaluate(_problem(g, 2, overlap=overlap), _plan(g, {0: 0, 1: 0, 2: 1, 3: 0}))
    want = {
        "none": [4 + 4 + 3, 2 + 3 + 4],
        "compute-comm": [max(4, 4 + 3), max(2, 3 + 4)],
        "full-duplex": [max(4, 4, 3), max(2, 3, 4)],
    }[overlap]
    assert ev.load.tolist() == want
    assert ev.objective == max(want)


def test_gpipe_form_is_max_forward_plus_max_backward() -> None:
    # forward f1 -> f2, backward b2 -> b1; f1,b1 on acc0; f2,b2 on acc1; no transfer costs
    g = _graph({1: (9, 3, 0), 2: (9, 1, 0), 12: (9, 5, 0), 11: (9, 1, 0)},
               [(1, 2, 0.0), (2, 12, 0.0), (12, 11, 0.0)], backward={11, 12},
               classes={1: 1, 11: 1, 2: 2, 12: 2})
    where = {1: 0, 11: 0, 2: 1, 12: 1}
    pipedream = evaluate(_problem(g, 2), _plan(g, where))
    gpipe = evaluate(_problem(g, 2, training="gpipe"), _plan(g, where))
    assert pipedream.forward_load.tolist() == [3, 1]
    assert pipedream.backward_load.tolist() == [1, 5]
    assert pipedream.objective == max(3 + 1, 1 + 5) == 6
    assert gpipe.objective == 3 + 5
    assert pipedream.feasible and gpipe.feasible


def test_transfers_count_for_the_producers_pass() -> None:
    # forward f (acc0) -> backward b (acc1) with cost 2: both ends count it as forward
    g = _graph({1: (9, 1, 0), 2: (9, 1, 0)}, [(1, 2, 2.0)], backward={2})
    ev = evaluate(_problem(g, 2), _plan(g, {1: 0, 2: 1}))
    assert ev.forward_load.tolist() == [3, 2]
    assert ev.backward_load.tolist() == [0, 1]


def test_speed_and_host_link_scale() -> None:
    g = _graph({0: (8, 4, 0), 1: (8, 4, 0)}, [(0, 1, 1.0)])
    cluster = Cluster(devices=(Device(name="fast", kind=ACCELERATOR, speed=2.0),
                               Device(name="slow", kind=ACCELERATOR, speed=0.5)),
                      host_link_scale=np.array([3.0, 1.0]))
    ev = evaluate(Problem(graph=g, cluster=cluster), _plan(g, {0: 0, 1: 1}))
    assert ev.load.tolist() == [4 / 2 + 3 * 1.0, 4 / 0.5 + 1.0]


# -- violations -----------------------------------------------------------------------------


def test_memory_violation_is_reported_with_the_device() -> None:
    g = _graph({0: (9, 1, 6), 1: (9, 1, 5)}, [(0, 1, 0.0)])
    p = _problem(g, 2, memory=10)
    ok = evaluate(p, _plan(g, {0: 0, 1: 1}))
    assert ok.feasible and ok.memory_bytes.tolist() == [6, 5]
    bad = evaluate(p, _plan(g, {0: 1, 1: 1}))
    assert not bad.feasible
    assert bad.memory_bytes.tolist() == [0, 11]
    assert len(bad.violations) == 1
    assert "acc1" in bad.violations[0] and "memory" in bad.violations[0]
    assert bad.objective == 2  # the objective is still reported


def test_memory_at_capacity_is_feasible() -> None:
    g = _graph({0: (9, 1, 5), 1: (9, 1, 5)}, [(0, 1, 0.0)])
    assert evaluate(_problem(g, 1, memory=10), _plan(g, {0: 0, 1: 0})).feasible


def test_unsupported_node_on_accelerator_is_a_violation() -> None:
    b = GraphBuilder()
    b.add_node(1, cpu_time=2.0, acc_time=1.0)
    b.add_node(2, cpu_time=3.0, name="custom_op")  # accelerator time inf: unsupported
    b.add_edge(1, 2, cost=0.5)
    g = b.build()
    p = _problem(g, 1, cpus=1)
    bad = evaluate(p, _plan(g, {1: 0, 2: 0}))
    assert not bad.feasible and bad.objective == INF
    assert any("custom_op" in v and "acc0" in v for v in bad.violations), bad.violations
    good = evaluate(p, _plan(g, {1: 0, 2: 1}))
    assert good.feasible and good.load.tolist() == [1.5, 3.0]


def test_split_colocation_class_is_a_violation() -> None:
    g = _graph({0: (9, 1, 0), 1: (9, 1, 0), 2: (9, 1, 0)}, [(0, 1, 0.0), (1, 2, 0.0)],
               classes={0: 7, 2: 7})
    p = _problem(g, 2)
    bad = evaluate(p, _plan(g, {0: 0, 1: 0, 2: 1}))
    assert not bad.feasible
    assert any("class 7" in v and "acc0" in v and "acc1" in v for v in bad.violations)
    assert evaluate(p, _plan(g, {0: 1, 1: 0, 2: 1})).feasible


def test_contiguity_flags_per_device() -> None:
    g = _graph({0: (9, 1, 0), 1: (9, 1, 0), 2: (9, 1, 0)}, [(0, 1, 0.0), (1, 2, 0.0)])
    ev = evaluate(_problem(g, 2), _plan(g, {0: 0, 1: 1, 2: 0}))
    assert ev.contiguous.tolist() == [False, True]
    assert ev.feasible  # non-contiguous splits are allowed for throughput


def test_bad_plans_raise_value_error() -> None:
    g = _graph({0: (9, 1, 0), 1: (9, 1, 0)}, [(0, 1, 0.0)])
    p = _problem(g, 2)
    with pytest.raises(ValueError, match="3 nodes"):
        evaluate(p, Plan(assignment=[0, 0, 0]))
    with pytest.raises(ValueError, match="device 5"):
        evaluate(p, Plan(assignment=[0, 5]))
    with pytest.raises(ValueError):
        Plan(assignment=[0, -1])


def test_to_dict_has_per_device_figures() -> None:
    g = _graph({0: (9, 1, 3), 1: (9, 2, 4)}, [(0, 1, 0.5)])
    p = _problem(g, 2, memory=100)
    d = evaluate(p, _plan(g, {0: 0, 1: 1})).to_dict(p)
    assert d["objective"] == 2.5 and d["feasible"] is True
    assert [x["name"] for x in d["devices"]] == ["acc0", "acc1"]
    assert [x["load"] for x in d["devices"]] == [1.5, 2.5]
    assert [x["memory_bytes"] for x in d["devices"]] == [3, 4]
