"""The HTML report: self-contained, and rendered by headless Chromium with its key numbers.

Chromium is Debian's ``chromium`` (``.ci/run`` installs it when it can); without it the
rendering test skips with the reason.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("matplotlib", reason="the report's figures need matplotlib (pip install 'dnnpart[viz]')")

from dnnpart.plan import Plan
from dnnpart.problem import Problem
from dnnpart.testing import chain_problem
from dnnpart.viz.report import ReportInput, build_report

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
NO_CHROMIUM = ("headless Chromium is not on PATH: install the Debian package chromium "
               "(apt-get install chromium)")


def _report(tmp_path: Path) -> tuple[Path, str]:
    problem = chain_problem([1.0, 2.0, 3.0, 2.0, 1.0, 4.0], n_accelerators=3)
    text = build_report(ReportInput(problem=problem, plan=Plan(assignment=[0, 0, 1, 1, 2, 2]),
                                    meta={"method": "dp", "status": "optimal", "bound": 5.0},
                                    microbatches=4, schedule="gpipe"))
    path = tmp_path / "report.html"
    path.write_text(text, encoding="utf-8")
    step = re.search(r"step time \(gpipe, 4 micro-batches\)</th><td>([0-9.]+) ms", text)
    assert step is not None
    # by hand: stages of 3, 5 and 5 ms, no transfers; GPipe runs the 4 micro-batches through
    # the chain (3 + 5 + 5) and the slowest stage takes 5 ms more for each of the 3 others
    assert float(step.group(1)) == pytest.approx(3 + 5 + 5 + 3 * 5)
    return path, step.group(1)


def test_report_is_self_contained_with_figures(tmp_path: Path) -> None:
    path, _ = _report(tmp_path)
    text = path.read_text()
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", text)  # no network resources
    assert text.count("data:image/png;base64,") == 2  # Gantt and memory
    assert text.count("<svg") == 1 and text.count("<circle") == 6  # the placement, one dot per op
    assert "a lower bound among" in text  # the bound says what it bounds


@pytest.mark.skipif(CHROMIUM is None, reason=NO_CHROMIUM)
def test_chromium_renders_the_report(tmp_path: Path) -> None:
    from matplotlib.image import imread

    path, step = _report(tmp_path)
    base = [str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"]
    dom = subprocess.run([*base, "--dump-dom", path.as_uri()], capture_output=True, text=True,
                         timeout=60, check=True).stdout
    assert step in dom and "acc2" in dom and "Stages" in dom and "Placement" in dom
    shot = tmp_path / "shot.png"
    subprocess.run([*base, f"--screenshot={shot}", "--window-size=1100,1400", path.as_uri()],
                   capture_output=True, timeout=60, check=True)
    pixels = imread(shot)
    assert pixels.shape[0] > 100 and float(np.std(pixels[..., :3])) > 0.05  # not blank


def test_plan_report_flag_and_version(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("torch", reason="a model spec needs torch")
    from dnnpart import __version__
    from dnnpart.cli.main import main

    assert main(["--version"]) == 0 and __version__ in capsys.readouterr().out
    page = tmp_path / "r.html"
    assert main(["plan", "module:dnnpart.frontends.models:shared_relu_resnet", "--input-shape", "1,3,16,16",
                 "--training", "--cluster", "2xA100", "--schedule", "gpipe", "--microbatches", "3",
                 "--report", str(page), "-o", str(tmp_path / "p.json")]) == 0
    text = page.read_text()
    assert "gpipe, 3 micro-batches" in text and "layers." in text  # module paths, the schedule asked


@pytest.fixture(scope="module")
def cli_report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """`dnnpart plan --compare ... -o` then `dnnpart report` on a torch model with a reused ReLU."""
    pytest.importorskip("torch", reason="a model spec needs torch")
    import json

    from dnnpart.cli.main import main

    tmp = tmp_path_factory.mktemp("cli_report")
    plan = tmp / "p.json"
    assert main(["-q", "plan", "module:dnnpart.frontends.models:shared_relu_resnet", "--input-shape",
                 "1,3,16,16", "--training", "--cluster", "4xA100", "--schedule", "1f1b", "--microbatches",
                 "4", "-m", "pipeline", "--compare", "greedy,one-accelerator", "-o", str(plan)]) == 0
    page = tmp / "r.html"
    assert main(["-q", "report", str(plan), "-o", str(page), "--trust-plan"]) == 0
    return page, json.loads(plan.read_text())


@pytest.mark.skipif(CHROMIUM is None, reason=NO_CHROMIUM)
def test_chromium_shows_the_key_numbers_of_a_cli_report(cli_report: tuple[Path, dict]) -> None:
    page, plan = cli_report
    base = [str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"]
    dom = subprocess.run([*base, "--dump-dom", page.as_uri()], capture_output=True, text=True,
                         timeout=60, check=True).stdout
    assert f"{plan['objective']:.4g} ms" in dom  # the plan's objective
    rows = {r["method"]: r for r in plan["comparison"]}
    assert set(rows) == {"pipeline", "greedy", "one-accelerator"}
    for r in rows.values():  # every method's objective, in the comparison table
        assert f"<td>{r['objective']:.4g}</td>" in dom, r
    assert "1f1b, 4 micro-batches" in dom and "Methods compared" in dom and "<svg" in dom


def test_makespan_reports_get_the_op_timeline_and_memory() -> None:
    from dnnpart.problem import Objective
    from dnnpart.simulate import emulate_ops

    p = chain_problem([1.0, 2.0, 3.0, 2.0], n_accelerators=2)
    p = Problem(graph=p.graph, cluster=p.cluster, objective=Objective(kind="makespan"))
    plan = Plan(assignment=[0, 0, 1, 1])
    text = build_report(ReportInput(problem=p, plan=plan))
    span = emulate_ops(p.graph, p.cluster, plan.assignment).makespan
    assert span == pytest.approx(8.0)  # a chain runs its ops one after another, no transfer cost
    assert f"makespan (op-level emulation)</th><td>{span:.4g} ms" in text
    assert 'alt="ops Gantt"' in text and "Pipeline" not in text


def test_iteration_reports_get_the_layer_table() -> None:
    from dnnpart.cost import resolve_cluster
    from dnnpart.layerwise.graphs import layer_graph
    from dnnpart.problem import Objective
    from dnnpart.solvers import solve

    p = Problem(graph=layer_graph("lenet5"), cluster=resolve_cluster("2xP100").cluster,
                objective=Objective(kind="iteration"))
    result = solve(p, "data-parallel")
    text = build_report(ReportInput(problem=p, plan=result.require_plan()))
    table = text.split("<h2>Layers</h2>")[1].split("</table>")[0]
    assert table.count("<tr>") == p.graph.n_nodes + 1  # a row per layer under the header
    assert "Stages" not in text and "<svg" not in text


def test_big_graphs_are_drawn_contracted_with_each_box_in_its_device_colour() -> None:
    from dnnpart.viz.placement import PALETTE, placement_svg

    n = 400
    p = chain_problem([1.0] * n, n_accelerators=3)
    assignment = np.repeat([0, 1, 2], [150, 150, 100])
    modules = [f"blocks.{v // 10}.op{v % 10}" for v in range(n)]
    svg = placement_svg(p, Plan(assignment=assignment), modules=modules, max_units=60)
    fills = re.findall(r'<rect x="[0-9.]+" y="[0-9.]+" width="[0-9.]+" height="[0-9.]+" rx="4" fill="(#\w+)"',
                       svg)
    assert len(fills) == 40  # blocks.0 ... blocks.39: one box each (no block spans two devices)
    assert fills.count(PALETTE[0]) == 15 and fills.count(PALETTE[2]) == 10
    plain = placement_svg(p, Plan(assignment=assignment), max_units=60)  # no modules: device runs
    assert "<circle" not in plain and plain.count('rx="4"') <= 60


@pytest.mark.parametrize(("argv", "marker"), [
    (["zoo:bert-3", "--objective", "makespan", "-m", "round-robin"], "makespan (op-level emulation)"),
    (["builtin:lenet5", "--objective", "iteration", "--cluster", "2xP100", "-m", "data-parallel"],
     "<h2>Layers</h2>"),
    (["zoo:bert-3", "-m", "greedy"], "<h2>Pipeline</h2>"),
])
def test_report_of_a_solve_plan_follows_its_graph_and_objective(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], marker: str) -> None:
    import json

    from dnnpart.cli.main import main

    plan = tmp_path / "p.json"
    assert main(["-q", "solve", *argv, "-o", str(plan), "--json"]) == 0
    objective = json.loads(capsys.readouterr().out)["objective"]
    page = tmp_path / "r.html"
    assert main(["-q", "report", str(plan), "-o", str(page)]) == 0
    text = page.read_text()
    assert marker in text and f"{objective:.4g} ms" in text
