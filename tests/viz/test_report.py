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
from dnnpart.testing import chain_problem
from dnnpart.viz.report import ReportInput, build_report

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def _report(tmp_path: Path) -> tuple[Path, str]:
    problem = chain_problem([1.0, 2.0, 3.0, 2.0, 1.0, 4.0], n_accelerators=3)
    text = build_report(ReportInput(problem=problem, plan=Plan(assignment=[0, 0, 1, 1, 2, 2]),
                                    meta={"method": "dp", "status": "optimal", "bound": 5.0},
                                    microbatches=4, schedule="gpipe"))
    path = tmp_path / "report.html"
    path.write_text(text, encoding="utf-8")
    step = re.search(r"step time \(gpipe, 4 micro-batches\)</th><td>([0-9.]+) ms", text)
    assert step is not None
    return path, step.group(1)


def test_report_is_self_contained_with_figures(tmp_path: Path) -> None:
    path, _ = _report(tmp_path)
    text = path.read_text()
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", text)  # no network resources
    assert text.count("data:image/png;base64,") == 2  # Gantt and memory
    assert "a lower bound among" in text  # the bound says what it bounds


@pytest.mark.skipif(CHROMIUM is None, reason="headless Chromium (Debian package chromium) is not installed")
def test_chromium_renders_the_report(tmp_path: Path) -> None:
    from matplotlib.image import imread

    path, step = _report(tmp_path)
    base = [str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"]
    dom = subprocess.run([*base, "--dump-dom", path.as_uri()], capture_output=True, text=True,
                         timeout=60, check=True).stdout
    assert step in dom and "acc2" in dom and "Stages" in dom
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
