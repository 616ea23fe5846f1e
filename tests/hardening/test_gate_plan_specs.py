"""Issue 30, item 1: one gate for specs read from files.

Seeded plan files name code (``module:`` and unknown spec kinds) in every place a plan names
a model or graph (``model.spec`` of ``plan -o`` files, ``graph.spec`` of ``solve -o`` files);
``report``, ``export`` (both kinds of format) and ``run`` refuse them without ``--trust-plan``
(exit 2, one line naming the field and ``--trust-plan``) and the module is never imported (it
writes a marker file when imported). With ``--trust-plan`` the same module is imported: the
gate is what stops it. ``simulate`` never hands a spec from a plan file to its importer. Specs
refused for their size on the command line are refused with the same message from a plan file,
and a plan's model block with mistyped fields (``input_shapes: 5``) is one ``error:`` naming the
field.
"""

from __future__ import annotations

import copy
import json
import random
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fuzz"))
from clirun import assert_one_error_line, run_cli

from dnnpart.errors import FormatError
from dnnpart.workflow.file_specs import gated_spec, runs_code

MARKER_MODULE = "dnnpart_issue30_marker"


@pytest.fixture
def marker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A module that writes a file when imported: proof that a plan ran code."""
    flag = tmp_path / "imported.flag"
    (tmp_path / f"{MARKER_MODULE}.py").write_text(
        f"open({str(flag)!r}, 'w').write('ran')\n"
        "def build():\n    raise SystemExit(0)\nmain = x = build\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop(MARKER_MODULE, None)
    yield flag
    sys.modules.pop(MARKER_MODULE, None)


@pytest.fixture(scope="module")
def solve_plan(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A valid ``solve -o`` plan of zoo:bert-3, as JSON."""
    from dnnpart.solvers import solve
    from dnnpart.workflow import load_problem
    from dnnpart.workflow.solved import solved_plan_dict

    problem = load_problem("zoo:bert-3")
    data: dict[str, Any] = solved_plan_dict(problem, solve(problem, "dp"), "zoo:bert-3")
    return data


def _code_spec(rng: random.Random) -> str:
    """A spec that would import the marker module (or a kind no file may name)."""
    fn = rng.choice(("build", "main", "x"))
    return rng.choice((f"module:{MARKER_MODULE}:{fn}", f" module:{MARKER_MODULE}:{fn}",
                       f"module:{MARKER_MODULE}:{fn}.onnx", f"MODULE:{MARKER_MODULE}:{fn}",
                       f"plugin:{MARKER_MODULE}:{fn}"))


def _commands(plan: Path, out: Path, *, model_plan: bool) -> list[list[str]]:
    cmds = [["report", str(plan), "-o", str(out / "r.html")],
            ["export", str(plan), "--format", "placement-text", "-o", str(out / "p.txt")],
            ["simulate", str(plan)]]
    if model_plan:
        cmds += [["export", str(plan), "--format", "placement", "-o", str(out / "p.json")],
                 ["export", str(plan), "--format", "pipelining", "-o", str(out / "pipe")],
                 ["run", str(plan)]]
    return cmds


def test_seeded_plans_naming_code_are_refused_everywhere(tmp_path: Path, marker: Path,
                                                         solve_plan: dict[str, Any]) -> None:
    rng = random.Random(3001)
    seen = set()
    for i in range(60):
        spec = _code_spec(rng)
        if rng.random() < 0.5:  # a solve -o plan whose graph is code
            data = copy.deepcopy(solve_plan)
            data["graph"] = {"spec": spec}
            field, model_plan = "graph.spec", False
        else:  # a plan -o plan whose model is code
            data = {"format": "dnnpart.plan", "version": 1, "devices": [],
                    "model": {"spec": spec, "cluster": "2xA100", "input_shapes": [[2, 4]]}}
            field, model_plan = "model.spec", True
        plan = tmp_path / f"plan{i}.json"
        plan.write_text(json.dumps(data))
        argv = rng.choice(_commands(plan, tmp_path, model_plan=model_plan))
        code, _, err = run_cli(argv)
        assert code == 2, (argv, spec, err)
        line = assert_one_error_line(code, err, must_name="--trust-plan")
        assert field in line, line
        assert not marker.exists(), f"{argv} imported the plan's module ({spec!r})"
        seen.add((argv[0], field))
    assert MARKER_MODULE not in sys.modules
    assert {("report", "graph.spec"), ("report", "model.spec"), ("export", "graph.spec"),
            ("export", "model.spec"), ("run", "model.spec"), ("simulate", "graph.spec")} <= seen


def test_trust_plan_is_what_lets_the_code_in(tmp_path: Path, marker: Path,
                                              solve_plan: dict[str, Any]) -> None:
    data = copy.deepcopy(solve_plan)
    data["graph"] = {"spec": f"module:{MARKER_MODULE}:build"}
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(data))
    code, _, _ = run_cli(["report", str(plan), "-o", str(tmp_path / "r.html")])
    assert code == 2 and not marker.exists()
    run_cli(["report", str(plan), "--trust-plan", "-o", str(tmp_path / "r.html")])
    assert marker.exists()  # the gate, not chance, kept it out above


def test_simulate_with_its_graph_never_follows_the_plans_specs(tmp_path: Path, marker: Path,
                                                                solve_plan: dict[str, Any]) -> None:
    data = copy.deepcopy(solve_plan)
    data["graph"] = {"spec": f"module:{MARKER_MODULE}:build"}
    data["model"] = {"spec": f"module:{MARKER_MODULE}:build", "cluster": "2xA100"}
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(data))
    code, _, err = run_cli(["simulate", "zoo:bert-3", str(plan)])
    assert code == 0, err
    code, _, err = run_cli(["simulate", str(plan)])
    assert code == 2
    assert_one_error_line(code, err, must_name="--trust-plan")
    assert not marker.exists()


def test_the_gate_refuses_kinds_it_does_not_know() -> None:
    for spec in ("module:a:b", "Module:a:b", "plugin:x", "live:123", " module:a:b"):
        assert runs_code(spec)
        with pytest.raises(FormatError, match=r"p\.json: graph\.spec"):
            gated_spec(spec, "p.json", "graph.spec")
    for spec in ("zoo:bert-3", "builtin:lenet5", "hf:gpt2", "torchvision:resnet18", "g.json",
                 "/abs/model.onnx"):
        assert gated_spec(spec, "p.json", "graph.spec") == spec
    assert gated_spec(5, "p.json", "x", model="zoo:bert-3") == "zoo:bert-3"


SIZE_SPECS = [
    pytest.param("zoo:synthetic:nodes=50000001", "graph", id="synthetic-nodes"),
    pytest.param("zoo:synthetic:nodes=10,edges=1000000001", "graph", id="synthetic-edges"),
    pytest.param("zoo:synthetic:nodes=50000000", "graph", id="synthetic-50M"),
    pytest.param("hf:gpt2:n_layer=1000000000", "model", id="hf-layers"),
    pytest.param("hf:gpt2:n_layer=-1", "model", id="hf-negative"),
]


@pytest.mark.parametrize("spec,where", SIZE_SPECS)
def test_size_guards_apply_to_specs_from_files(spec: str, where: str, tmp_path: Path,
                                               solve_plan: dict[str, Any]) -> None:
    code, _, err = run_cli(["info", spec])
    assert code == 2
    cli_line = assert_one_error_line(code, err)
    if where == "graph":
        data = copy.deepcopy(solve_plan)
        data["graph"] = {"spec": spec}
    else:
        data = {"format": "dnnpart.plan", "version": 1, "devices": [],
                "model": {"spec": spec, "cluster": "2xA100"}}
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(data))
    for argv in (["report", str(plan), "-o", str(tmp_path / "r.html")], ["simulate", str(plan)]):
        code, _, err = run_cli(argv)
        assert code == 2, (argv, err)
        line = assert_one_error_line(code, err)
        assert cli_line.removeprefix("error: ") in line, (cli_line, line)
    assert not (tmp_path / "r.html").exists()


@pytest.mark.parametrize("field,value", [
    ("input_shapes", 5), ("input_shapes", [["a", 3]]), ("input_shapes", [[0, 3]]), ("input_shapes", [[]]),
    ("input_dtype", 5), ("config", ["x"]), ("specs", 7), ("optimizer", {}), ("granularity", "x"),
    ("microbatches", "x"), ("training", "yes"),
])
def test_mistyped_model_fields_are_one_error_naming_the_field(field: str, value: Any,
                                                               tmp_path: Path) -> None:
    data = {"format": "dnnpart.plan", "version": 1, "devices": [],
            "model": {"spec": "builtin:resnet50", "cluster": "2xA100", field: value}}
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(data))
    for argv in (["export", str(plan), "-o", str(tmp_path / "p.json")], ["run", str(plan)]):
        code, _, err = run_cli(argv)
        assert code == 2, (argv, err)
        assert_one_error_line(code, err, must_name=f"model.{field}")
