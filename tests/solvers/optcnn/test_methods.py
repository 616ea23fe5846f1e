"""Paper 3 wired into the shared model: registry methods, iteration objective, plan files, CLI."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from dnnpart.cli.main import main
from dnnpart.cost import resolve_cluster
from dnnpart.errors import FormatError
from dnnpart.evaluate import evaluate
from dnnpart.io.native import load_graph, save_graph
from dnnpart.io.plan_files import plan_to_dict, read_plan, write_plan
from dnnpart.layerwise.graphs import layer_graph, layers_of
from dnnpart.layerwise.hardware import P100, paper_bandwidth, paper_cluster_spec
from dnnpart.layerwise.layers import LayerGraph
from dnnpart.layerwise.models import build_model
from dnnpart.layerwise.strategy import strategy_time
from dnnpart.layerwise.tables import build_tables
from dnnpart.plan import LayerConfig, Plan, Status
from dnnpart.problem import Objective, Problem
from dnnpart.solvers import solve
from dnnpart.solvers.optcnn.search import optimize_tables
from dnnpart.testing.layer_problems import random_layer_problem
from dnnpart.workflow import load_problem

METHODS = ("optcnn", "data-parallel", "model-parallel", "owt", "optcnn-dfs")


def problem_for(model: str, spec: str, batch: int = 32) -> Problem:
    return load_problem(f"builtin:{model}", cluster=resolve_cluster(spec).cluster,
                        objective=Objective(kind="iteration", batch=batch))


@pytest.mark.parametrize("method", METHODS)
def test_methods_report_the_evaluators_value(method: str) -> None:
    p = problem_for("lenet5", "2xP100", batch=4)
    options = {"prune": True} if method == "optcnn-dfs" else {}
    r = solve(p, method, **options)
    assert r.plan is not None and r.plan.layer_configs is not None
    assert r.objective == pytest.approx(evaluate(p, r.plan).objective, rel=1e-12)
    assert r.objective == pytest.approx(r.stats["search_value"], rel=1e-9)
    exact = solve(p, "optcnn")
    best = exact.objective
    assert exact.bound == best and exact.gap == 0.0   # exact: its own bound over the space
    assert r.objective >= best * (1 - 1e-9)
    if r.status is not Status.OPTIMAL:
        assert r.bound is None   # a baseline proves nothing
    if method == "optcnn-dfs":
        assert r.status is Status.OPTIMAL and r.objective == pytest.approx(best, rel=1e-9)


def test_iteration_value_is_the_tables_t_o_on_the_paper_cluster() -> None:
    """The objective uses the cluster's bandwidth and the preset's roofline at batch x d."""
    p = problem_for("alexnet", paper_cluster_spec(8))
    r = solve(p, "optcnn")
    tables = build_tables(build_model("alexnet", 256), 8, P100, paper_bandwidth(8))
    assert r.objective * 1e-3 == pytest.approx(optimize_tables(tables).value, rel=1e-9)
    assert r.stats["final_nodes"] == 2


def test_dfs_stops_at_its_time_limit_with_a_plan() -> None:
    p = problem_for("alexnet", "4xP100")
    r = solve(p, "optcnn-dfs", time_limit=0.3)
    assert r.status is Status.FEASIBLE and r.stats["stopped"] == "time-limit"
    assert r.objective == pytest.approx(evaluate(p, r.plan).objective)  # type: ignore[arg-type]


def test_vgg16_on_four_p100s_acceptance() -> None:
    """Issue 17: n = 4 on the first convolutions, n = 1 and c >= 2 on FC1/FC2, <= 0.95 x data."""
    p = problem_for("vgg16", "4xP100")
    best = solve(p, "optcnn")
    data = solve(p, "data-parallel")
    names = [x.name for x in layers_of(p.graph).layers]
    cfg = dict(zip(names, best.plan.layer_configs, strict=True))  # type: ignore[union-attr]
    assert cfg["conv1_1"].degrees == (4, 1, 1, 1) and cfg["conv1_2"].degrees == (4, 1, 1, 1)
    for fc in ("fc6", "fc7"):
        assert cfg[fc].degrees[0] == 1 and cfg[fc].degrees[1] >= 2
    assert best.objective <= 0.95 * data.objective


def _permuted(plan: Plan, d: int, rng: np.random.Generator) -> Plan:
    perm = rng.permutation(d)
    assert plan.layer_configs is not None
    return Plan.from_layer_configs([LayerConfig(c.degrees, tuple(int(perm[x]) for x in c.devices))
                                    for c in plan.layer_configs])


def test_plans_export_and_reimport_to_the_same_t_o(tmp_path: Path) -> None:
    rng = np.random.default_rng(11)
    for spec in ("4xP100", paper_cluster_spec(8)):
        p = problem_for("alexnet", spec)
        r = solve(p, "optcnn")
        for plan in (r.plan, _permuted(r.plan, p.cluster.n_devices, rng)):  # type: ignore[arg-type]
            path = tmp_path / "plan.json"
            write_plan(p, plan, path, r)
            data = json.loads(path.read_text())
            assert data["version"] == 3 and len(data["layer_configs"]) == p.graph.n_nodes
            back = read_plan(path, p)
            assert back.layer_configs == plan.layer_configs
            assert evaluate(p, back).objective == evaluate(p, plan).objective
    # a plain plan stays version 2
    q = problem_for("lenet5", "2xP100")
    assert plan_to_dict(q, Plan(assignment=[0] * q.graph.n_nodes))["version"] == 2


def test_non_contiguous_tiles_are_scored_by_their_devices() -> None:
    """Moving FC tiles across the node boundary costs more (EDR instead of NVLink)."""
    p = problem_for("alexnet", paper_cluster_spec(8))
    r = solve(p, "optcnn")
    assert r.plan is not None and r.plan.layer_configs is not None
    swapped = _permuted(r.plan, 8, np.random.default_rng(0))
    layers, dev, bw = layers_of(p.graph).with_batch(256), P100, paper_bandwidth(8)
    assert evaluate(p, swapped).objective * 1e-3 == pytest.approx(
        strategy_time(layers, swapped.layer_configs or (), dev, bw), rel=1e-12)
    assert evaluate(p, swapped).objective >= r.objective * (1 - 1e-12)


@pytest.mark.parametrize(("edit", "field"), [
    (lambda d: d["layer_configs"][0].update(degrees=[2, 1, 1]), "layer_configs[0]"),
    (lambda d: d["layer_configs"][1].update(devices=["nope"]), "layer_configs[1].devices[0]"),
    (lambda d: d["layer_configs"].pop(), "layer_configs:"),
    (lambda d: d["layer_configs"][2].update(degrees=[1, 1, 1, "x"]), "layer_configs[2].degrees[3]"),
])
def test_bad_layer_configs_name_the_field(edit: object, field: str) -> None:
    p = problem_for("lenet5", "2xP100")
    data = plan_to_dict(p, solve(p, "data-parallel").plan)  # type: ignore[arg-type]
    edit(data)  # type: ignore[operator]
    from dnnpart.io.plan_files import parse_plan

    with pytest.raises(FormatError, match=field.replace("[", r"\[").replace("]", r"\]")):
        parse_plan(data, p)


def test_inadmissible_configuration_is_refused_by_the_evaluator() -> None:
    p = problem_for("lenet5", "2xP100")
    configs = [LayerConfig((1, 1, 1, 1), (0,))] * p.graph.n_nodes
    configs[-1] = LayerConfig((1, 1, 2, 1), (0, 1))   # softmax cannot be cut in H
    with pytest.raises(ValueError, match="softmax"):
        evaluate(p, Plan.from_layer_configs(configs))


def test_random_layer_problems_optcnn_equals_dfs() -> None:
    rng = np.random.default_rng(99)
    for _ in range(6):
        p = random_layer_problem(rng, devices=4)
        a, b = solve(p, "optcnn"), solve(p, "optcnn-dfs")
        assert b.status is Status.OPTIMAL
        assert a.objective == pytest.approx(b.objective, rel=1e-9)


def _by_name(layers: LayerGraph) -> dict[str, tuple[object, ...]]:
    names = [x.name for x in layers.layers]
    return {x.name: (x.op, x.in_shapes, x.out_shape, x.kernel, x.stride, x.padding, x.params,
                     tuple(names[i] for i in x.inputs)) for x in layers.layers}


@pytest.mark.parametrize("name", ["inception_v3", "resnet50"])
def test_builtin_layer_graphs_keep_their_layers(name: str, tmp_path: Path) -> None:
    g = layer_graph(name)
    # every layer, with its inputs in their order (a concatenation's channel order), survives
    # the graph's renumbering and a file round trip, read from the graph's attributes alone
    assert _by_name(layers_of(g)) == _by_name(build_model(name, 32))
    save_graph(g, tmp_path / "g.npz")
    assert _by_name(layers_of(load_graph(tmp_path / "g.npz"))) == _by_name(build_model(name, 32))


def test_unknown_builtin_layer_graphs_are_named() -> None:
    g = layer_graph("inception_v3")
    assert g.op_types is not None and "concat" in g.op_types
    with pytest.raises(FormatError, match="builtin:vgg17"):
        load_problem("builtin:vgg17", cluster=resolve_cluster("2xP100").cluster,
                     objective=Objective(kind="iteration"))


def test_builtin_names_pick_layer_graphs_or_torch_models() -> None:
    from dnnpart.workflow.inputs import _layer_graph_name

    iteration, plain = Objective(kind="iteration"), Objective()
    assert _layer_graph_name("builtin:vgg16", plain) == "vgg16"          # no torch model of that name
    assert _layer_graph_name("builtin:resnet50", iteration) == "resnet50"
    assert _layer_graph_name("builtin:resnet50", plain) is None         # the torch model (issue 14)
    assert _layer_graph_name("zoo:bert-3", iteration) is None
    pytest.importorskip("torch")
    from dnnpart.frontends.models import BUILTIN_MODELS

    # the loader's list of torch builtin names (kept there to avoid importing torch)
    torch_picked = {n for n in BUILTIN_MODELS if _layer_graph_name(f"builtin:{n}", plain) is None}
    assert torch_picked == set(BUILTIN_MODELS)


def test_cli_prints_the_per_layer_table(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out = tmp_path / "vgg.json"
    rc = main(["solve", "builtin:vgg16", "--objective", "iteration", "--method", "optcnn",
               "--cluster", "4xP100", "--out", str(out)])
    text = capsys.readouterr().out
    assert rc == 0
    assert "{n=4, c=1, h=1, w=1}" in text and "fc6" in text and "K = 2" in text
    rc = main(["evaluate", "builtin:vgg16", str(out), "--objective", "iteration", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert rc == 0 and data["objective"] == pytest.approx(json.loads(out.read_text())["objective"], rel=1e-12)


@pytest.mark.parametrize("method", METHODS)
def test_unknown_options_are_refused(method: str) -> None:
    with pytest.raises(ValueError, match="unknown option"):
        solve(problem_for("lenet5", "2xP100"), method, no_such_option=1)


def test_cli_simulate_replays_a_layerwise_plan(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    plan, trace = tmp_path / "plan.json", tmp_path / "trace.json"
    assert main(["solve", "builtin:alexnet", "--objective", "iteration", "--method", "optcnn",
                 "--cluster", "4xP100", "--out", str(plan), "--json"]) == 0
    solved = json.loads(capsys.readouterr().out)
    assert main(["simulate", "builtin:alexnet", str(plan), "--objective", "iteration", "--json",
                 "--trace", str(trace)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["level"] == "layerwise" and data["t_o_s"] * 1e3 == pytest.approx(solved["objective"])
    assert 0.9 <= data["ratio"] <= 1.0 + 1e-12 and trace.is_file()
    assert data["sync"] == "after-backward"
    assert main(["simulate", "builtin:alexnet", str(plan), "--objective", "iteration", "--json",
                 "--sync", "eager"]) == 0
    eager = json.loads(capsys.readouterr().out)
    assert eager["sync"] == "eager" and eager["t_o_s"] == pytest.approx(data["t_o_s"], rel=1e-12)
    assert eager["bytes_per_step"] == pytest.approx(data["bytes_per_step"], rel=1e-12)
    assert main(["simulate", "builtin:alexnet", str(plan)]) == 2   # needs --objective iteration


@pytest.mark.parametrize("model", ["alexnet", "vgg16", "resnet50"])
def test_layer_graphs_survive_a_native_file(model: str, tmp_path: Path) -> None:
    """The layer-attribute table carries what the iteration objective reads (no side table)."""
    from dnnpart.io.native import load_graph, save_graph

    p = problem_for(model, "2xP100", batch=8)
    save_graph(p.graph, tmp_path / "g.npz")
    back = Problem(graph=load_graph(tmp_path / "g.npz"), cluster=p.cluster, objective=p.objective)
    r = solve(p, "optcnn")
    # add and chains do not depend on the order of a layer's inputs; concat would (node order)
    assert solve(back, "optcnn").objective == pytest.approx(r.objective, rel=1e-12)
    assert evaluate(back, r.plan).objective == pytest.approx(r.objective, rel=1e-12)  # type: ignore[arg-type]


def test_foreign_layer_kinds_are_named() -> None:
    from dataclasses import replace

    from dnnpart.layerwise.graphs import layers_from_attrs

    g = layer_graph("lenet5")
    assert g.layer_attrs is not None
    attrs = replace(g.layer_attrs, kind=("aten.convolution.default",) * g.n_nodes)
    with pytest.raises(ValueError, match=r"aten\.convolution"):
        layers_from_attrs(replace(g, layer_attrs=attrs))


def test_dfs_stops_on_a_stop_request_with_its_best_plan() -> None:
    """Ctrl-C (the registry's stop flag) ends the exhaustive search with a plan, promptly."""
    import threading
    import time

    from dnnpart import interrupt

    p = problem_for("alexnet", "4xP100")
    solve(p, "optcnn-dfs", time_limit=0.2)  # compile and build outside the timing
    timer = threading.Timer(0.5, interrupt.request_stop)
    started = time.perf_counter()
    timer.start()
    try:
        r = solve(p, "optcnn-dfs", time_limit=20)
    finally:
        timer.cancel()
    assert time.perf_counter() - started < 0.5 + interrupt.GRACE_S + 3
    assert r.stats["stopped"] == interrupt.INTERRUPTED and r.plan is not None
    assert r.objective == pytest.approx(evaluate(p, r.plan).objective)
    assert not interrupt.stop_requested()
