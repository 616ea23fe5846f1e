"""The built-in examples: structure, FLOPs against published figures, cost model, registry."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter

import numpy as np
import pytest

from dnnpart import Plan, evaluate
from dnnpart.devices import PCIE3_X16_BANDWIDTH
from dnnpart.graph.training import backward_partner
from dnnpart.zoo import EXAMPLES, list_examples, load_example, parse_spec
from dnnpart.zoo.bert import OPS_PER_LAYER, bert, bert_ops
from dnnpart.zoo.cost import (
    ACCELERATOR_PROFILE,
    CPU_PROFILE,
    DeviceProfile,
    node_memory_bytes,
    transfer_time_ms,
)
from dnnpart.zoo.resnet import resnet, resnet_ops

# Multiply-adds of convolutions + fc at 224x224, batch 1, as torchvision reports them
# ("GFLOPS" column of its model table, which counts multiply-adds) for ResNet v1.5.
TORCHVISION_GMACS = {18: 1.81, 34: 3.66, 50: 4.09, 101: 7.80}
TORCHVISION_MPARAMS = {18: 11.69, 34: 21.80, 50: 25.56, 101: 44.55}


def is_topological_dag(g) -> bool:
    return bool(np.all(g.edge_sources() < g.succ_idx))


# -- cost model --------------------------------------------------------------------------------
def test_roofline_is_max_of_compute_and_memory_plus_overhead():
    p = DeviceProfile(name="t", peak_flops=1e12, memory_bandwidth=1e9, launch_overhead_ms=0.5)
    t = p.time_ms([1e9, 0.0, 1e9], [0.0, 2e6, 2e6])
    np.testing.assert_allclose(t, [1.5, 2.5, 2.5])
    assert ACCELERATOR_PROFILE.peak_flops > CPU_PROFILE.peak_flops
    assert ACCELERATOR_PROFILE.memory_bandwidth > CPU_PROFILE.memory_bandwidth
    with pytest.raises(ValueError, match="peak_flops"):
        DeviceProfile(name="bad", peak_flops=0.0, memory_bandwidth=1.0)


def test_transfer_and_memory():
    assert float(transfer_time_ms(PCIE3_X16_BANDWIDTH)) == pytest.approx(1e3)  # 1 s in ms
    assert node_memory_bytes(3.0, 4.0) == 7.0


# -- ResNet ------------------------------------------------------------------------------------
@pytest.mark.parametrize(("depth", "n_nodes", "n_downsample"),
                         [(18, 68, 3), (34, 124, 3), (50, 174, 4), (101, 344, 4)])
def test_resnet_structure(depth, n_nodes, n_downsample):
    g = resnet(depth)
    assert g.n_nodes == n_nodes
    assert is_topological_dag(g)
    types = Counter(g.op_types)
    n_blocks = int(g.layer_id.max()) - 1  # the head's layer id is n_blocks + 1
    assert types["Add"] == n_blocks
    assert types["Conv"] == 1 + n_blocks * (3 if depth >= 50 else 2) + n_downsample
    assert types["BatchNormalization"] == types["Conv"]
    assert types["MaxPool"] == types["GlobalAveragePool"] == types["Gemm"] == 1
    assert sum(".downsample.conv" in name for name in g.names) == n_downsample
    # every residual join has two inputs; every block input feeds two branches
    adds = [v for v in range(g.n_nodes) if g.op_types[v] == "Add"]
    assert all(g.in_degree()[v] == 2 for v in adds)
    assert (g.out_degree() == 2).sum() == n_blocks
    # one source (conv1), one sink (fc)
    assert (g.in_degree() == 0).sum() == 1 and (g.out_degree() == 0).sum() == 1
    # layer ids: stem 0, blocks 1..n_blocks, head n_blocks + 1
    assert set(g.layer_id.tolist()) == set(range(n_blocks + 2))


@pytest.mark.parametrize("depth", sorted(TORCHVISION_GMACS))
def test_resnet_flops_and_parameters_match_published_figures(depth):
    ops = resnet_ops(depth)
    by_type = ops.flops_by_type()
    macs = (by_type["Conv"] + by_type["Gemm"]) / 2
    assert macs / 1e9 == pytest.approx(TORCHVISION_GMACS[depth], rel=0.01)
    # weights include batch-norm running statistics (+0.2 % over torchvision's parameters)
    assert ops.total_weight_bytes() / 4 / 1e6 == pytest.approx(TORCHVISION_MPARAMS[depth], rel=0.01)


def test_resnet50_total_flops_is_about_8_2_gflops():
    # mul and add counted separately: 2 x 4.1 G multiply-adds, plus bn/relu/add/pool
    assert resnet_ops(50).total_flops() == pytest.approx(8.2e9, rel=0.02)


def test_resnet_scales_with_image_and_batch():
    base = resnet_ops(18).total_flops()
    assert resnet_ops(18, batch=2).total_flops() == pytest.approx(2 * base, rel=1e-3)
    assert resnet_ops(18, image=448).total_flops() == pytest.approx(4 * base, rel=0.01)
    with pytest.raises(ValueError, match="unsupported ResNet depth 42"):
        resnet(42)


# -- BERT --------------------------------------------------------------------------------------
def test_bert_structure():
    n_layers = 3
    g = bert(n_layers)
    assert is_topological_dag(g)
    assert g.n_nodes == 6 + OPS_PER_LAYER * n_layers + 6
    per_layer = Counter(g.layer_id.tolist())
    assert [per_layer[i] for i in range(1, n_layers + 1)] == [OPS_PER_LAYER] * n_layers
    assert per_layer[0] == 6 and per_layer[n_layers + 1] == 6
    assert Counter(g.op_types)["MatMul"] == 8 * n_layers + 2  # 6 dense + 2 attention
    # three embedding lookups are the sources; the classifier is the only sink
    assert (g.in_degree() == 0).sum() == 3 and (g.out_degree() == 0).sum() == 1
    # each layer input feeds Q, K, V and the residual skip
    for layer in range(1, n_layers + 1):
        q = g.names.index(f"layer{layer}.attention.q.matmul")
        x = int(g.predecessors(q)[0])
        succ = {g.names[w] for w in g.successors(x)}
        assert succ == {f"layer{layer}.attention.{p}.matmul" for p in "qkv"} | {
            f"layer{layer}.attention.residual_add"
        }
        ln1 = g.names.index(f"layer{layer}.attention.layernorm")
        assert g.names.index(f"layer{layer}.ffn.residual_add") in g.successors(ln1).tolist()


def test_bert_base_flops_and_parameters():
    seq, hidden = 128, 768
    # one layer: 4 projections + 2 FFN matmuls (24 S H^2) and two S x S attention matmuls
    layer_matmul = 24 * seq * hidden**2 + 4 * seq**2 * hidden  # 1.862e9
    layer = bert_ops(2).total_flops() - bert_ops(1).total_flops()
    assert layer == pytest.approx(layer_matmul, rel=0.02)
    matmuls_12 = bert_ops(12).flops_by_type()["MatMul"]
    assert matmuls_12 / 2 / 1e9 == pytest.approx(11.2, rel=0.01)  # "11.2 G multiply-adds"
    assert bert_ops(12).total_weight_bytes() / 4 / 1e6 == pytest.approx(109.5, rel=0.01)


def test_bert_validates_arguments():
    with pytest.raises(ValueError, match="multiple of heads"):
        bert(2, hidden=100, heads=12)
    with pytest.raises(ValueError, match="n_layers"):
        bert(0)


# -- costs on the graphs -----------------------------------------------------------------------
@pytest.mark.parametrize("ops", [bert_ops(2), resnet_ops(18)], ids=["bert-2", "resnet18"])
def test_graph_costs_are_consistent(ops):
    graph = ops.to_graph()
    acc, cpu = graph.time_on("accelerator"), graph.time_on("cpu")
    assert np.all(np.isfinite(acc)) and np.all(acc > 0) and cpu.sum() > 5 * acc.sum()
    # heavy ops are much faster on the accelerator; tiny ones (a view, the 2-way classifier)
    # are cheaper on the CPU, whose dispatch overhead is below a kernel launch
    heavy = np.array([ops[name].flops > 1e8 for name in graph.names])
    assert heavy.sum() > 10 and np.all(cpu[heavy] > 5 * acc[heavy])
    np.testing.assert_allclose(graph.edge_cost, graph.edge_bytes / PCIE3_X16_BANDWIDTH * 1e3)
    assert np.all(graph.edge_bytes > 0)
    # out-edges of a node carry its one output tensor: uniform c_u
    assert np.all(graph.node_out_cost()[1])
    assert np.all(graph.memory_bytes > 0)


# -- training variants -------------------------------------------------------------------------
@pytest.mark.parametrize("spec", ["zoo:bert-2-training", "zoo:resnet18-training"])
def test_training_examples_pair_every_node(spec):
    g = load_example(spec).graph
    fw = np.flatnonzero(~g.is_backward)
    assert fw.size * 2 == g.n_nodes
    partner = backward_partner(g)
    assert np.all(partner >= 0)
    assert np.array_equal(g.color_class[partner], g.color_class)
    assert np.all(np.bincount(g.color_class) == 2)
    np.testing.assert_allclose(g.compute_time[partner[fw]], 2.0 * g.compute_time[fw])


# -- registry ----------------------------------------------------------------------------------
def test_every_listed_example_loads_and_evaluates():
    assert len(list_examples()) == len(EXAMPLES) >= 8
    for spec, description in list_examples():
        assert spec.startswith("zoo:") and description
        problem = load_example(spec)
        assert problem.name == spec
        g = problem.graph
        assert g.is_training == spec.endswith("-training")
        n_acc = problem.cluster.n_accelerators
        assert n_acc in (3, 6) and problem.cluster.n_cpus == 1
        ev = evaluate(problem, Plan(assignment=np.zeros(g.n_nodes, int)))
        assert ev.feasible, (spec, ev.violations)
        assert ev.objective == pytest.approx(g.time_on("accelerator").sum())


def test_default_clusters_follow_paper_1():
    assert load_example("zoo:bert-3").cluster.n_accelerators == 3
    assert load_example("zoo:bert-12").cluster.n_accelerators == 6
    assert load_example("zoo:resnet50").cluster.n_accelerators == 6
    assert load_example("zoo:bert-3").cluster.memory_capacity()[0] == 16e9


def test_spec_parsing():
    assert parse_spec("zoo:bert-5").size == 5  # any layer count
    assert parse_spec("bert-3-training").spec == "zoo:bert-3-training"
    assert parse_spec("ZOO:ResNet50").spec == "zoo:resnet50"
    assert load_example("zoo:bert-1").graph.n_nodes == 6 + OPS_PER_LAYER + 6


@pytest.mark.parametrize("spec", ["zoo:gpt-2", "zoo:bert-0", "zoo:resnet42", "bert3", ""])
def test_unknown_spec_lists_valid_ones(spec):
    with pytest.raises(ValueError, match="unknown example") as info:
        load_example(spec)
    assert "zoo:bert-3" in str(info.value) and "zoo:resnet50-training" in str(info.value)


def test_import_is_light():
    code = (
        "import sys, dnnpart.zoo; "
        "heavy = [m for m in ('dnnpart.zoo.bert', 'dnnpart.zoo.resnet', 'dnnpart.zoo.ops') "
        "if m in sys.modules]; print(heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
