"""``run --steps`` and ``report --run`` meet the hardening promises: a bad value or file is
one ``error:`` line, exit 2, before any model is captured or run; a good measurement is
printed and reported as a table of predicted against measured."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fuzz"))
from clirun import assert_one_error_line, run_cli

from dnnpart.evaluate.run_prediction import RunPrediction, StagePrediction
from dnnpart.export.measuring import RankMeasure
from dnnpart.workflow.measured import RunComparison


@pytest.mark.parametrize("steps", ["0", "-1", "1001", str(10**12)])
def test_bad_steps_are_one_error_line_before_anything_runs(tmp_path: Path, steps: str) -> None:
    plan = tmp_path / "p.json"  # never read: the option is refused first
    start = time.perf_counter()
    code, _, err = run_cli(["run", str(plan), "--steps", steps])
    assert code == 2 and time.perf_counter() - start < 30
    assert_one_error_line(code, err, must_name="--steps")


@pytest.mark.parametrize("steps", ["abc", "1.5", ""])
def test_untyped_steps_are_usage_errors(tmp_path: Path, steps: str) -> None:
    code, _, err = run_cli(["run", str(tmp_path / "p.json"), "--steps", steps])
    assert code == 2 and "Traceback" not in err and "--steps" in err


def _comparison() -> RunComparison:
    prediction = RunPrediction(
        stages=[StagePrediction(device=d, name=f"acc{d}", forward_s=0.01 * (d + 1), backward_s=0.02,
                                memory={"weights": 100.0, "gradients": 100.0, "activations": 800.0})
                for d in range(2)],
        step_s=0.1, calibrated=True, devices=["acc0", "acc1"])
    measured = [RankMeasure(forward_s=[0.011, 0.012], backward_s=[0.02, 0.021], step_s=[0.09, 0.11],
                            peak_bytes=1000.0 + d, held_bytes=100.0, memory_source="profiler")
                for d in range(2)]
    return RunComparison(prediction=prediction, measured=measured, step_s=[0.09, 0.11],
                         training=True, priced_by=["box", "box"])


def test_a_measurement_is_printed_and_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import dnnpart.workflow as workflow
    from dnnpart.export.training_run import TrainingRun
    from dnnpart.workflow import TrainingRunResult

    m = _comparison().to_dict()
    assert m["step"]["error"] == pytest.approx(0.0) and m["step"]["median_s"] == pytest.approx(0.1)
    assert m["stages"][1]["forward"]["error"] == pytest.approx(0.02 / 0.0115 - 1)
    assert m["stages"][1]["memory"]["error"] == pytest.approx(1000 / 1001 - 1)
    assert "calibrated device box" in m["note"]
    step = TrainingRun(schedule="1f1b", microbatches=2, stages=2, losses=[1.0, 1.0],
                       reference_losses=[1.0, 1.0], grad_max_abs_diff=0.0, grad_max_abs_reference=1.0,
                       loss_max_abs_diff=0.0, n_parameters_checked=3, worst_parameter="w")
    canned = TrainingRunResult(model="m", devices=("acc0", "acc1"), operators_moved=0, operators=(5, 5),
                               run=step, measurement=_comparison())
    monkeypatch.setattr(workflow, "run_plan", lambda *a, **k: canned)
    code, out, _ = run_cli(["run", "p.json"])
    assert code == 0 and "stage 1 acc1 forward" in out and "+73.9%" in out and "calibrated device box" in out
    code, out, _ = run_cli(["run", "p.json", "--json"])
    run = tmp_path / "run.json"
    run.write_text(out)
    assert json.loads(out)["measurement"] == json.loads(json.dumps(m))
    plan = tmp_path / "p.json"
    assert run_cli(["solve", "zoo:bert-3", "-m", "dp", "-o", str(plan)])[0] == 0
    html = tmp_path / "r.html"
    code, _, err = run_cli(["report", str(plan), "-o", str(html), "--run", str(run)])
    assert code == 0, err
    text = html.read_text()
    assert "Predicted against measured" in text and "stage 1 acc1 peak memory" in text and "+73.9%" in text


@pytest.mark.parametrize("content", ["not json", json.dumps({"passed": True}),
                                     json.dumps({"measurement": {"steps": 2}}),
                                     json.dumps({"measurement": {"step": {}, "stages": []}})])
def test_report_refuses_a_file_that_is_no_run_output(tmp_path: Path, content: str) -> None:
    plan = tmp_path / "p.json"
    assert run_cli(["solve", "zoo:bert-3", "-m", "dp", "-o", str(plan)])[0] == 0
    run = tmp_path / "run.json"
    run.write_text(content)
    code, _, err = run_cli(["report", str(plan), "-o", str(tmp_path / "r.html"), "--run", str(run)])
    assert code == 2
    assert_one_error_line(code, err, must_name=str(run))
    assert not (tmp_path / "r.html").exists()
