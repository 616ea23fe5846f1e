"""``dnnpart simulate``, ``dnnpart cluster show``, ``--cluster SPEC`` and the new objectives."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.cli.test_cli import GRAPH, PLAN, _write, run

from dnnpart.cli.main import main


@pytest.fixture()
def files(tmp_path: Path) -> dict[str, str]:
    return {"graph": _write(tmp_path / "g.json", GRAPH), "plan": _write(tmp_path / "p.json", PLAN),
            "dir": str(tmp_path)}


def _check_trace(path: str) -> list[dict]:
    events = json.loads(Path(path).read_text())["traceEvents"]
    assert events
    for e in events:
        assert {"name", "ph", "ts", "pid", "tid"} <= set(e), e
        assert isinstance(e["ts"], (int, float)) and e["ts"] >= 0
        if e["ph"] == "X":
            assert e["dur"] >= 0
    return events


@pytest.mark.parametrize("level", ["pipeline", "ops"])
def test_simulate_writes_a_chrome_trace(capsys, files, level):
    trace = str(Path(files["dir"]) / f"{level}.json")
    code, out, _ = run(capsys, "simulate", files["graph"], files["plan"], "--level", level,
                       "--trace", trace, "--json")
    assert code == 0
    summary = json.loads(out)
    events = _check_trace(trace)
    spans = [e for e in events if e["ph"] == "X"]
    assert spans and max(e["ts"] + e["dur"] for e in spans) > 0
    if level == "pipeline":
        # 4 micro-batches x 3 stages, forward only (an inference graph)
        assert len([e for e in spans if e["cat"] == "compute"]) == 12
        assert summary["step_time"] * 1e3 == pytest.approx(max(e["ts"] + e["dur"] for e in spans))
    else:
        assert summary["makespan"] * 1e3 == pytest.approx(max(e["ts"] + e["dur"] for e in spans))
        assert [e for e in events if e["ph"] == "C"]  # memory counters


def test_simulate_pipeline_of_a_training_plan(capsys, tmp_path):
    plan = str(tmp_path / "plan.json")
    assert main(["-q", "solve", "zoo:resnet18-training", "-m", "dp", "-o", plan]) == 0
    capsys.readouterr()
    for schedule in ("gpipe", "1f1b"):
        code, out, _ = run(capsys, "simulate", "zoo:resnet18-training", plan, "--schedule", schedule,
                           "--microbatches", "6", "--json")
        s = json.loads(out)
        assert code == 0 and s["level"] == "pipeline" and s["schedule"] == schedule
        assert s["time_per_sample"] == pytest.approx(s["step_time"] / 6)
        assert 0 <= s["bubble_fraction"] < 1
    code, out, _ = run(capsys, "evaluate", "zoo:resnet18-training", plan, "--objective", "pipeline",
                       "--schedule", "1f1b", "--microbatches", "6", "--json")
    ev = json.loads(out)
    assert code == 0 and ev["objective"] == pytest.approx(s["time_per_sample"])
    assert ev["simulation"]["max_stage_time_eq5"] > 0


def test_evaluate_makespan_equals_the_emulator(capsys, files):
    from dnnpart.io import read_plan, read_problem
    from dnnpart.simulate import emulate_ops

    code, out, _ = run(capsys, "evaluate", files["graph"], files["plan"], "--objective", "makespan",
                       "--json")
    assert code == 0
    problem = read_problem(files["graph"])
    plan = read_plan(files["plan"], problem)
    assert json.loads(out)["objective"] == emulate_ops(problem.graph, problem.cluster,
                                                       plan.assignment).makespan


def test_pipeline_refuses_non_contiguous_plans(capsys, files):
    plan = _write(Path(files["dir"]) / "nc.json",
                  {"fpgas": [{"nodes": [1, 4]}, {"nodes": [2, 3]}], "cpus": []})
    graph = dict(GRAPH, nodes=[dict(n, supportedOnFpga=1) for n in GRAPH["nodes"]])
    g = _write(Path(files["dir"]) / "g2.json", graph)
    code, out, err = run(capsys, "evaluate", g, plan, "--objective", "pipeline")
    assert code == 2 and "contiguous" in err and "Traceback" not in err
    code, out, err = run(capsys, "simulate", g, plan, "--json")  # auto falls back to ops
    assert code == 0 and json.loads(out)["level"] == "ops"


def test_solvers_refuse_the_simulated_objectives(capsys, files):
    code, _, err = run(capsys, "solve", files["graph"], "-m", "dp", "--objective", "makespan")
    assert code == 2 and "not 'makespan'" in err


@pytest.mark.parametrize("spec", ["dgx1", "torus2d:x=3,y=3", "4xA100+1cpu", "two-level:nodes=2,gpus=2"])
def test_cluster_show(capsys, spec):
    code, out, _ = run(capsys, "cluster", "show", spec, "--json")
    s = json.loads(out)
    assert code == 0 and len(s["bandwidth"]) == len(s["devices"])


def test_cluster_show_plot(capsys, tmp_path):
    pytest.importorskip("matplotlib")
    png = tmp_path / "bw.png"
    code, _, _ = run(capsys, "cluster", "show", "mesh2d:x=2,y=3", "--plot", str(png))
    assert code == 0 and png.stat().st_size > 0


def test_cluster_spec_reaches_every_problem_command(capsys, files):
    code, out, _ = run(capsys, "info", files["graph"], "--cluster", "3xA100+1cpu", "--json")
    assert code == 0
    assert [d["name"] for d in json.loads(out)["cluster"]["devices"]] == ["acc0", "acc1", "acc2", "cpu0"]
    code, out, err = run(capsys, "evaluate", files["graph"], files["plan"], "--cluster",
                         "two-level:nodes=1,gpus=2", "--json")
    assert code == 2 and "only 0 CPUs" in err  # the generated cluster has no CPU for the plan


@pytest.mark.parametrize(("argv", "fragment"), [
    (["cluster", "show", "torus3d:x=2,y=2,k=2"], "unknown parameter 'k'"),
    (["cluster", "show", "mesh2d:x=-1"], "mesh2d"),
    (["cluster", "show", "3xNOPE"], "unknown device preset"),
    (["cluster", "show", "no/such/file.yaml"], "neither an existing cluster file"),
    (["simulate", "G", "P", "--microbatches", "0"], "microbatches"),
])
def test_bad_simulate_and_cluster_input(capsys, files, argv, fragment):
    argv = [files["graph"] if a == "G" else files["plan"] if a == "P" else a for a in argv]
    code, out, err = run(capsys, *argv)
    assert code == 2, (out, err)
    assert fragment in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_a_plan_is_scored_on_the_cluster_it_was_made_for(capsys, tmp_path):
    plan = str(tmp_path / "plan.json")
    assert main(["-q", "solve", "zoo:resnet18", "-m", "dp", "--cluster", "mesh2d:x=1,y=3",
                 "-o", plan]) == 0
    capsys.readouterr()
    assert json.loads(Path(plan).read_text())["cluster"]["name"] == "mesh2d 1x3"
    code, out, _ = run(capsys, "evaluate", "zoo:resnet18", plan, "--json")
    assert code == 0
    assert [d["name"] for d in json.loads(out)["devices"]] == ["acc0", "acc1", "acc2"]


def test_unsupported_placements_are_violations_for_the_simulated_objectives(capsys, files):
    plan = _write(Path(files["dir"]) / "bad.json", {"fpgas": [{"nodes": [1, 2, 4]}, {"nodes": [3]}]})
    for objective in ("makespan", "pipeline"):
        code, out, _ = run(capsys, "evaluate", files["graph"], plan, "--objective", objective,
                             "--json")
        ev = json.loads(out)
        assert code == 1 and not ev["feasible"] and ev["objective"] is None
        assert any("does not support" in v for v in ev["violations"])


def test_routed_clusters_are_stored_as_links_in_plans(tmp_path):
    from dnnpart.cost import resolve_cluster
    from dnnpart.io.cluster_file import cluster_to_dict, parse_cluster

    c = resolve_cluster("torus3d:x=4,y=4,z=4,latency=1e-6").cluster
    doc = cluster_to_dict(c)
    assert "bandwidth" not in doc and len(doc["links"]) == 192
    back = parse_cluster(json.loads(json.dumps(doc)))
    assert (back.bandwidth == c.bandwidth).all() and (back.latency == c.latency).all()
    d = resolve_cluster("dgx1").cluster  # a given matrix (no NVLink forwarding) is kept
    assert "bandwidth" in cluster_to_dict(d)
    assert (parse_cluster(json.loads(json.dumps(cluster_to_dict(d)))).bandwidth == d.bandwidth).all()


def test_a_plan_file_alone_is_simulated_with_its_own_schedule(capsys, tmp_path):
    plan = str(tmp_path / "plan.json")
    assert main(["-q", "solve", "zoo:resnet18-training", "-m", "dp", "--schedule", "1f1b",
                 "--microbatches", "6", "-o", plan]) == 0
    capsys.readouterr()
    code, out, _ = run(capsys, "simulate", plan, "--json")
    alone = json.loads(out)
    assert code == 0 and alone["schedule"] == "1f1b" and alone["microbatches"] == 6
    code, out, _ = run(capsys, "simulate", "zoo:resnet18-training", plan, "--schedule", "1f1b",
                       "--microbatches", "6", "--json")
    assert code == 0 and json.loads(out) == alone  # the same problem, read from the plan
    code, out, _ = run(capsys, "simulate", plan, "--microbatches", "3", "--schedule", "gpipe", "--json")
    assert code == 0 and (json.loads(out)["microbatches"], json.loads(out)["schedule"]) == (3, "gpipe")


@pytest.mark.parametrize(("argv", "fragment"), [
    (["simulate", "P", "--cluster", "2xA100"], "--cluster: a plan file alone"),
    (["simulate", "P", "--objective", "latency"], "--objective: a plan file alone"),
    (["simulate", "P", "--training"], "--training: a plan file alone"),
    (["simulate", "G", "P", "--trust-plan"], "--model/--trust-plan"),
    (["simulate", "zoo:bert-3"], "no such plan file"),
    (["simulate", "P"], "names no model or graph"),
])
def test_bad_plan_alone_input(capsys, files, argv, fragment):
    argv = [files["graph"] if a == "G" else files["plan"] if a == "P" else a for a in argv]
    code, out, err = run(capsys, *argv)
    assert code == 2, (out, err)
    assert fragment in err and len(err.strip().splitlines()) == 1
