"""The ``dnnpart`` command line, run in-process (plus one subprocess run of the entry point).

Exit codes: 0 ok, 1 no plan / infeasible, 2 bad input or usage, 3 missing extra. Bad input
gives a one-line ``error:`` on stderr and never a traceback.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from dnnpart import evaluate
from dnnpart.cli.main import main
from dnnpart.graph import count_ideals, width
from dnnpart.io import read_plan, read_problem
from dnnpart.solvers import available_methods, solve

GRAPH = {
    "maxSizePerFPGA": 100.0,
    "maxFPGAs": 2,
    "maxCPUs": 1,
    "nodes": [
        {"id": 1, "supportedOnFpga": 1, "cpuLatency": 10.0, "fpgaLatency": 2.0, "size": 30.0},
        {"id": 2, "supportedOnFpga": 1, "cpuLatency": 12.0, "fpgaLatency": 3.0, "size": 30.0},
        {"id": 3, "supportedOnFpga": 1, "cpuLatency": 8.0, "fpgaLatency": 1.0, "size": 30.0},
        {"id": 4, "supportedOnFpga": 0, "cpuLatency": 2.0, "fpgaLatency": 0.0, "size": 30.0},
    ],
    "edges": [
        {"sourceId": 1, "destId": 2, "cost": 0.5},
        {"sourceId": 1, "destId": 3, "cost": 0.5},
        {"sourceId": 2, "destId": 4, "cost": 0.25},
        {"sourceId": 3, "destId": 4, "cost": 0.75},
    ],
}
PLAN = {"fpgas": [{"nodes": [1, 2]}, {"nodes": [3]}], "cpus": [{"nodes": [4]}]}


def _write(path: Path, data) -> str:
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return str(path)


@pytest.fixture()
def files(tmp_path: Path) -> dict[str, str]:
    return {"graph": _write(tmp_path / "g.json", GRAPH), "plan": _write(tmp_path / "p.json", PLAN),
            "dir": str(tmp_path)}


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _assert_bad_input(code: int, out: str, err: str, *fragments: str) -> None:
    assert code == 2, (code, out, err)
    assert "Traceback" not in err and "Traceback" not in out
    assert err.startswith("error:") or err.lstrip().startswith("usage:"), err
    for fragment in fragments:
        assert fragment in " ".join(err.split()), err


# -- happy paths ----------------------------------------------------------------------------


def test_info_json(capsys, files) -> None:
    code, out, _ = run(capsys, "info", files["graph"], "--json")
    assert code == 0
    s = json.loads(out)
    g = read_problem(files["graph"]).graph
    assert (s["nodes"], s["edges"]) == (4, 4)
    assert s["ideals"] == count_ideals(g) == 6
    assert (s["width"], s["width_exact"]) == (width(g)[0], True)
    assert s["unsupported_on_accelerator"] == 1
    assert [d["name"] for d in s["cluster"]["devices"]] == ["acc0", "acc1", "cpu0"]


def test_info_table(capsys, files) -> None:
    code, out, err = run(capsys, "info", files["graph"])
    assert code == 0 and "nodes" in out and "ideals" in out and not err


def test_methods(capsys) -> None:
    code, out, _ = run(capsys, "methods", "--json")
    assert code == 0
    listed = {m["name"]: m for m in json.loads(out)}
    assert set(listed) == {m.name for m in available_methods()}
    assert listed["brute-force"]["exact"] is True
    code, out, _ = run(capsys, "methods")
    assert code == 0 and "brute-force" in out


def test_evaluate_json_equals_the_api(capsys, files) -> None:
    code, out, _ = run(capsys, "evaluate", files["graph"], files["plan"], "--json")
    assert code == 0
    d = json.loads(out)
    problem = read_problem(files["graph"])
    ev = evaluate(problem, read_plan(files["plan"], problem))
    assert d["objective"] == pytest.approx(ev.objective)
    assert d["feasible"] is True
    # by hand: acc0 = 2 + 3 + out c1 0.5 + out c2 0.25 = 5.75 ; acc1 = in 0.5 + 1 + out 0.75
    assert [dev["load"] for dev in d["devices"]] == pytest.approx([5.75, 2.25, 2.0])
    assert [dev["memory_bytes"] for dev in d["devices"]] == [60, 30, 30]


def test_evaluate_table(capsys, files) -> None:
    code, out, _ = run(capsys, "evaluate", files["graph"], files["plan"])
    assert code == 0 and "acc0" in out and "5.75" in out


def test_evaluate_latency(capsys, files) -> None:
    code, out, _ = run(capsys, "evaluate", files["graph"], files["plan"], "--json",
                       "--objective", "latency")
    assert code == 0
    d = json.loads(out)
    assert d["objective_kind"] == "latency"
    # 1,2 on acc0 (2+3, out 0.5+0.25) ; 3 on acc1 starts at 5.75: in 0.5 + 1 + out 0.75 ;
    # 4 on cpu starts at 8.0: 2 -> latency 10
    assert d["objective"] == pytest.approx(10.0)


def test_evaluate_infeasible_memory_exits_1(capsys, files) -> None:
    graph = _write(Path(files["dir"]) / "small-memory.json", _mutated(maxSizePerFPGA=50.0))
    code, out, err = run(capsys, "evaluate", graph, files["plan"])  # acc0 holds 60 bytes
    assert code == 1
    assert "memory" in out + err and "acc0" in out + err and "Traceback" not in err
    code, out, _ = run(capsys, "evaluate", graph, files["plan"], "--json")
    assert code == 1
    d = json.loads(out)
    assert d["feasible"] is False and any("acc0" in v for v in d["violations"])


@pytest.mark.parametrize("method", ["brute-force", "one-accelerator"])
def test_solve_json_and_out(capsys, files, method: str) -> None:
    out_plan = str(Path(files["dir"]) / f"{method}.plan.json")
    code, out, _ = run(capsys, "solve", files["graph"], "--method", method, "--json", "--out", out_plan)
    assert code == 0
    d = json.loads(out)
    problem = read_problem(files["graph"])
    api = solve(problem, method)
    assert d["objective"] == pytest.approx(api.objective)
    assert d["status"] == api.status.value
    assert d["method"] == method
    devices = d["evaluation"]["devices"]
    assert len(devices) == 3 and all("load" in x and "memory_bytes" in x for x in devices)
    assert d["evaluation"]["feasible"] is True
    # the written plan evaluates to the same objective, through the CLI and the API
    code, out, _ = run(capsys, "evaluate", files["graph"], out_plan, "--json")
    assert code == 0
    assert json.loads(out)["objective"] == pytest.approx(d["objective"])
    assert evaluate(problem, read_plan(out_plan, problem)).objective == pytest.approx(d["objective"])


def test_solve_brute_force_is_optimal_by_hand(capsys, files) -> None:
    # node 4 must run on the CPU (2); the best is 1,2 | 3 or 1,3 | 2 on the accelerators
    code, out, _ = run(capsys, "solve", files["graph"], "--method", "brute-force", "--json")
    d = json.loads(out)
    assert code == 0 and d["status"] == "optimal"
    assert d["objective"] == pytest.approx(solve(read_problem(files["graph"]), "brute-force").objective)
    assert d["bound"] == pytest.approx(d["objective"])


def test_solve_latency_objective(capsys, files) -> None:
    code, out, _ = run(capsys, "solve", files["graph"], "--method", "brute-force", "--json",
                       "--objective", "latency")
    assert code == 0
    assert json.loads(out)["evaluation"]["objective_kind"] == "latency"


def test_solve_text_output(capsys, files) -> None:
    code, out, _ = run(capsys, "solve", files["graph"], "--method", "one-accelerator")
    assert code == 0 and "one-accelerator" in out


def test_solve_with_cluster_file(capsys, files) -> None:
    cluster = Path(files["dir"]) / "c.yaml"
    cluster.write_text("preset: reference\naccelerators: 1\ncpus: 1\nmemory_bytes: 1e3\n")
    code, out, _ = run(capsys, "solve", files["graph"], "--cluster", str(cluster),
                       "--method", "brute-force", "--json")
    assert code == 0
    assert [x["name"] for x in json.loads(out)["evaluation"]["devices"]] == ["acc0", "cpu0"]


def test_solve_infeasible_exits_1(capsys, tmp_path: Path) -> None:
    doc = json.loads(json.dumps(GRAPH))
    doc["maxCPUs"] = 0
    doc["maxSizePerFPGA"] = 10.0  # no node fits anywhere
    code, out, err = run(capsys, "solve", _write(tmp_path / "g.json", doc), "--method", "brute-force",
                         "--json")
    assert code == 1 and "Traceback" not in err
    assert json.loads(out)["status"] == "infeasible"


def test_problem_too_large_for_brute_force_exits_1(capsys, tmp_path: Path) -> None:
    n = 30
    doc = {"maxFPGAs": 3, "maxCPUs": 1, "maxSizePerFPGA": 1e9,
           "nodes": [{"id": i, "cpuLatency": 1, "fpgaLatency": 1} for i in range(n)],
           "edges": [{"sourceId": i, "destId": i + 1, "cost": 0} for i in range(n - 1)]}
    code, _, err = run(capsys, "solve", _write(tmp_path / "big.json", doc), "--method", "brute-force")
    assert code == 1
    assert err.startswith("error:") and "Traceback" not in err


# -- bad input: exit 2, one error line, no traceback ------------------------------------------


def _mutated(**changes):
    doc = json.loads(json.dumps(GRAPH))
    for key, value in changes.items():
        if key.startswith("node1_"):
            doc["nodes"][1][key[6:]] = value
        else:
            doc[key] = value
    return doc


BAD_GRAPHS = {
    "malformed-json": ("{nodes: ", ["invalid JSON"]),
    "not-an-object": ("[1, 2]", ["unrecognised"]),
    "abc": (_mutated(node1_cpuLatency="abc"), ["nodes[1].cpuLatency", "abc"]),
    "negative": (_mutated(node1_fpgaLatency=-2), ["nodes[1].fpgaLatency"]),
    "no-nodes": (_mutated(nodes=[]), ["nodes"]),
    "unknown-endpoint": (_mutated(edges=[{"sourceId": 1, "destId": 9, "cost": 0}]), ["edges[0].destId", "9"]),
    "duplicate-id": (_mutated(node1_id=1), ["duplicate"]),
    "cycle": (_mutated(edges=GRAPH["edges"] + [{"sourceId": 4, "destId": 1, "cost": 0}]), ["cycle"]),
    "maxFPGAs": (_mutated(maxFPGAs=-1), ["maxFPGAs"]),
}


@pytest.mark.parametrize("case", sorted(BAD_GRAPHS))
@pytest.mark.parametrize("command", ["info", "evaluate", "solve"])
def test_bad_graph_files_exit_2(capsys, tmp_path: Path, case: str, command: str) -> None:
    doc, fragments = BAD_GRAPHS[case]
    graph = _write(tmp_path / "bad.json", doc)
    argv = [command, graph]
    if command == "evaluate":
        argv.append(_write(tmp_path / "p.json", PLAN))
    if command == "solve":
        argv += ["--method", "brute-force"]
    _assert_bad_input(*run(capsys, *argv), *fragments)


def test_missing_graph_file_exits_2(capsys, tmp_path: Path) -> None:
    _assert_bad_input(*run(capsys, "info", str(tmp_path / "absent.json")), "no such file")


BAD_PLANS = {
    "unknown-node": ({"fpgas": [{"nodes": [1, 2, 3, 99]}], "cpus": [{"nodes": [4]}]}, ["99"]),
    "placed-twice": ({"fpgas": [{"nodes": [1, 2]}, {"nodes": [2, 3]}], "cpus": [{"nodes": [4]}]}, ["twice"]),
    "unplaced": ({"fpgas": [{"nodes": [1, 2]}], "cpus": [{"nodes": [4]}]}, ["not placed"]),
    "unknown-device": ({"format": "dnnpart.plan", "version": 1,
                        "devices": [{"name": "gpu9", "nodes": [1, 2, 3, 4]}]}, ["devices[0].name", "gpu9"]),
    "too-many-fpgas": ({"fpgas": [{"nodes": [1]}, {"nodes": [2]}, {"nodes": [3]}], "cpus": [{"nodes": [4]}]},
                       ["fpgas[2]"]),
    "malformed": ("{fpgas", ["invalid JSON"]),
    "not-a-plan": ({"hello": 1}, ["not a plan"]),
}


@pytest.mark.parametrize("case", sorted(BAD_PLANS))
def test_bad_plan_files_exit_2(capsys, files, case: str) -> None:
    doc, fragments = BAD_PLANS[case]
    plan = _write(Path(files["dir"]) / "bad-plan.json", doc)
    _assert_bad_input(*run(capsys, "evaluate", files["graph"], plan), *fragments)


def test_missing_plan_file_exits_2(capsys, files) -> None:
    _assert_bad_input(*run(capsys, "evaluate", files["graph"], files["dir"] + "/none.json"), "no such file")


@pytest.mark.parametrize(
    ("text", "fragments"),
    [("preset: nowhere\n", ["preset"]), ("devices: [{name: g, kind: tpu}]\n", ["devices[0].kind"]),
     ("preset: reference\naccelerators: -3\n", ["accelerators"]), ("devices: [unclosed\n", ["YAML"])],
)
def test_bad_cluster_files_exit_2(capsys, files, text: str, fragments: list[str]) -> None:
    cluster = Path(files["dir"]) / "c.yaml"
    cluster.write_text(text)
    _assert_bad_input(*run(capsys, "info", files["graph"], "--cluster", str(cluster)), *fragments)


@pytest.mark.parametrize(
    ("extra", "fragments"),
    [
        (["--method", "no-such-method"], ["no-such-method"]),
        (["--method", "brute-force", "--set", "novalue"], ["KEY=VALUE"]),
        (["--method", "brute-force", "--time-limit", "-1"], ["time_limit"]),
        (["--method", "brute-force", "--objective", "speed"], []),
        (["--method", "brute-force", "--overlap", "sometimes"], []),
        (["--bogus-flag"], []),
        (["--method", "ip-noncontig", "--descent", "--time-limit", "inf"], ["descent", "time_limit"]),
        (["--method", "ip-noncontig", "--descent", "--time-limit", "5", "--backend", "highs"],
         ["descent", "cpsat"]),
    ],
)
def test_bad_solve_arguments_exit_2(capsys, files, extra: list[str], fragments: list[str]) -> None:
    _assert_bad_input(*run(capsys, "solve", files["graph"], *extra), *fragments)


def test_solve_with_descent_writes_a_plan_equal_to_its_objective(capsys, files) -> None:
    out_plan = str(Path(files["dir"]) / "descent.plan.json")
    code, out, _ = run(capsys, "solve", files["graph"], "--method", "ip-noncontig", "--descent",
                       "--time-limit", "5", "--threads", "1", "--json", "--out", out_plan)
    assert code == 0
    d = json.loads(out)
    problem = read_problem(files["graph"])
    assert evaluate(problem, read_plan(out_plan, problem)).objective == pytest.approx(d["objective"])


def test_solve_with_the_portfolio_backend_writes_a_plan_equal_to_its_objective(capsys, files) -> None:
    out_plan = str(Path(files["dir"]) / "portfolio.plan.json")
    code, out, _ = run(capsys, "solve", files["graph"], "--method", "ip-noncontig", "--backend",
                       "portfolio", "--time-limit", "20", "--threads", "1", "--json", "--out", out_plan)
    assert code == 0
    d = json.loads(out)
    problem = read_problem(files["graph"])
    assert d["objective"] == pytest.approx(solve(problem, "brute-force").objective)
    assert evaluate(problem, read_plan(out_plan, problem)).objective == pytest.approx(d["objective"])


def test_backend_choices_of_the_cli_match_the_solvers() -> None:
    from dnnpart.cli.main import build_parser
    from dnnpart.solvers.ip.backend import BACKEND_CHOICES

    solve_parser = build_parser()._subparsers._group_actions[0].choices["solve"]  # type: ignore[union-attr]
    backend = next(a for a in solve_parser._actions if a.dest == "backend")
    assert tuple(backend.choices) == BACKEND_CHOICES


def test_usage_errors_exit_2(capsys) -> None:
    for argv in ([], ["frobnicate"], ["evaluate"], ["info"]):
        code, _, err = run(capsys, *argv)
        assert code == 2, argv
        assert "Traceback" not in err and "usage" in err


def test_help_exits_0(capsys) -> None:
    code, out, _ = run(capsys, "--help")
    assert code == 0 and "usage" in out


def test_long_error_message_stays_on_one_line(capsys, files) -> None:
    long_name = Path(files["dir"]) / ("a_rather_long_plan_file_name_" * 3 + ".json")
    plan = _write(long_name, {"fpgas": [{"nodes": [1]}]})
    code, _, err = run(capsys, "evaluate", files["graph"], plan)
    assert code == 2
    assert err.startswith("error:") and err.count("\n") == 1, repr(err)


def test_error_message_with_brackets_from_the_input_is_printed_verbatim(capsys, tmp_path: Path) -> None:
    doc = json.loads(json.dumps(GRAPH))
    doc["nodes"][3]["name"] = "weird[/x]"
    graph = _write(tmp_path / "g.json", doc)
    plan = _write(tmp_path / "p.json", {"fpgas": [{"nodes": [1, 2, 3]}]})  # node 4 unplaced
    code, _, err = run(capsys, "evaluate", graph, plan)
    assert code == 2
    assert "Traceback" not in err
    assert "weird[/x]" in err


def test_device_name_with_brackets_in_the_table(capsys, files) -> None:
    cluster = Path(files["dir"]) / "c.yaml"
    cluster.write_text('devices:\n  - {name: "g[/x]", kind: accelerator}\n  - {name: host, kind: cpu}\n')
    plan = _write(Path(files["dir"]) / "p2.json", {"format": "dnnpart.plan", "version": 1, "devices": [
        {"name": "g[/x]", "nodes": [1, 2, 3]}, {"name": "host", "nodes": [4]}]})
    code, out, err = run(capsys, "evaluate", files["graph"], plan, "--cluster", str(cluster))
    assert code == 0 and "Traceback" not in err
    assert "g[/x]" in out


# -- demo and the entry point ------------------------------------------------------------------


def test_demo(capsys) -> None:
    try:
        import dnnpart.zoo  # noqa: F401
    except ImportError as exc:
        pytest.skip(f"dnnpart.zoo does not import yet: {exc}")
    code, out, _ = run(capsys, "demo", "--list")
    assert code == 0 and "zoo:" in out
    code, out, err = run(capsys, "demo")
    assert code == 0 and "Traceback" not in err
    _assert_bad_input(*run(capsys, "info", "zoo:no-such-model"))


def test_entry_point_runs_as_a_module(files) -> None:
    proc = subprocess.run([sys.executable, "-m", "dnnpart", "info", files["graph"], "--json"],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["nodes"] == 4
    bad = subprocess.run([sys.executable, "-m", "dnnpart", "info", files["dir"] + "/none.json"],
                         capture_output=True, text=True, timeout=120, check=False)
    assert bad.returncode == 2
    assert bad.stderr.startswith("error:") and "Traceback" not in bad.stderr


def test_quiet_is_accepted_before_and_after_the_command(capsys) -> None:
    for argv in (["-q", "methods", "--json"], ["methods", "-q", "--json"]):
        code, out, _ = run(capsys, *argv)
        assert code == 0 and json.loads(out), argv
