"""Predicted against measured: step time, per-stage times and peak memory of eight plans run on
two ranks of this machine's CPU, priced by this machine's calibration (issue 29, item 4).

For every case (whole processes, the CLI as a user runs it):

1. ``dnnpart calibrate -o machine.yaml`` once (or ``--machine FILE``, a machine file of this
   machine), one thread per rank;
2. ``dnnpart plan SPEC --cluster machine.yaml ...`` (the default ``block-pipeline`` for training,
   over the model's blocks; two ranks);
3. ``dnnpart run plan.json --steps N --json``: the checked step, then ``N`` timed steps;
   per stage forward and backward over all micro-batches inside the schedule, each rank's
   allocator-level peak (``torch.profiler`` memory events), beside the prediction.

The table: per case the step's predicted and measured (median, min-max over the steps) time,
per stage the forward+backward time and the peak memory, each with its relative error
``(predicted - measured) / measured``; and the machine's speed during the case against its
speed when calibrated (:func:`reference_seconds`); then the summary the issue's acceptance reads: median
and largest |error| of step time over the cases and of peak memory over the stages, and every
pair of stages whose measured times differ by more than their repeat spread, with whether the
prediction orders them the same way.

Usage::

    PYTHONPATH=src python benchmarks/prediction_accuracy.py [CASE ...] [--machine FILE]
        [--steps 5] [--out FILE]

Writes ``bench-results/prediction_accuracy.md`` and ``.json`` (the published copy:
``docs/results/prediction-accuracy.md``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
STEP_LIMIT_S = 1800


@dataclass(frozen=True)
class Case:
    """One plan to run: ``model`` and ``plan`` arguments; what the issue names it."""

    name: str
    what: str
    model: tuple[str, ...]
    plan: tuple[str, ...]


_GPT2 = ("hf:gpt2:n_layer=6,n_embd=512,n_head=8", "--input-shape", "1,256")
_TRAIN8 = ("--training", "--microbatches", "8")
#: The issue's eight cases; batch = micro-batch x micro-batches (8 x 1 token rows of 256, 16
#: images as 8 micro-batches of 2).
CASES: tuple[Case, ...] = (
    Case("gpt2-1f1b", "GPT-2, 6 layers, hidden 512, seq 256, batch 8, training 1F1B, m=8",
         _GPT2, (*_TRAIN8, "--schedule", "1f1b")),
    Case("gpt2-gpipe", "GPT-2, 6 layers, hidden 512, seq 256, batch 8, training GPipe, m=8",
         _GPT2, (*_TRAIN8, "--schedule", "gpipe")),
    Case("bert-1f1b", "BERT, 6 layers, hidden 512, seq 256, batch 8, training 1F1B, m=8",
         ("hf:bert:num_hidden_layers=6,hidden_size=512,num_attention_heads=8,intermediate_size=2048",
          "--input-shape", "1,256"), (*_TRAIN8, "--schedule", "1f1b")),
    Case("llama-1f1b-recompute",
         "Llama, 4 layers, hidden 512, seq 256, batch 8, training 1F1B with recomputation, m=8",
         ("hf:llama:num_hidden_layers=4,hidden_size=512,num_attention_heads=8,"
          "num_key_value_heads=8,intermediate_size=1376", "--input-shape", "1,256"),
         (*_TRAIN8, "--schedule", "1f1b", "--recompute")),
    Case("vit-small-gpipe", "ViT-small (hidden 384, 12 layers, 6 heads), 224x224, batch 16, "
         "training GPipe, m=8",
         ("hf:vit:hidden_size=384,num_hidden_layers=12,num_attention_heads=6,intermediate_size=1536",
          "--input-shape", "2,3,224,224"), (*_TRAIN8, "--schedule", "gpipe")),
    Case("resnet50-1f1b", "ResNet-50, 128x128, batch 16, training 1F1B, m=8",
         ("builtin:resnet50", "--input-shape", "2,3,128,128"), (*_TRAIN8, "--schedule", "1f1b")),
    Case("convnext-tiny-1f1b", "ConvNeXt-tiny, 128x128, batch 16, training 1F1B, m=8",
         ("hf:convnext:image_size=128", "--input-shape", "2,3,128,128"),
         (*_TRAIN8, "--schedule", "1f1b")),
    Case("gpt2-inference", "GPT-2, 6 layers, hidden 512, seq 256, batch 8, inference, m=8",
         _GPT2, ("--microbatches", "8")),
)


def reference_seconds() -> float:
    """Seconds of a fixed single-thread workload (matrix products and an element-wise add),
    the median of five: timed when the machine is calibrated and before each case, so the
    table says how fast the machine ran each case relative to its calibration (a shared
    machine's speed drifts by tens of percent over minutes)."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        a, b = torch.randn(512, 512), torch.randn(512, 512)
        x, y = torch.randn(1 << 22), torch.randn(1 << 22)
        times = []
        for _ in range(5):
            start = time.perf_counter()
            for _ in range(10):
                torch.mm(a, b)
                torch.add(x, y)
            times.append(time.perf_counter() - start)
        return statistics.median(times)
    finally:
        torch.set_num_threads(threads)


def _cli(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dnnpart", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=STEP_LIMIT_S, check=False)


def _error_line(proc: subprocess.CompletedProcess[str]) -> str:
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]
    return lines[0] if lines else proc.stderr.strip().splitlines()[-1:][0] if proc.stderr.strip() else "?"


def run_case(case: Case, machine: Path, steps: int, tmp: Path, env: dict[str, str]) -> dict[str, Any]:
    """Plan and run one case; the run's ``measurement`` and what it cost."""
    plan = tmp / f"{case.name}.json"
    start = time.perf_counter()
    proc = _cli(["plan", *case.model, *case.plan, "--cluster", str(machine), "-o", str(plan),
                 "--quiet"], tmp, env)
    if proc.returncode != 0:
        return {"case": case.name, "failed": f"plan exit {proc.returncode}: {_error_line(proc)}"}
    planned = time.perf_counter() - start
    proc = _cli(["run", str(plan), "--steps", str(steps), "--json", "--quiet"], tmp, env)
    if proc.returncode != 0:
        return {"case": case.name, "failed": f"run exit {proc.returncode}: {_error_line(proc)}"}
    result = json.loads(proc.stdout)
    return {"case": case.name, "what": case.what, "plan_s": planned,
            "run_s": time.perf_counter() - start - planned, "passed": result.get("passed"),
            "measurement": result["measurement"]}


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:+.1f}%"


def _ms(x: float | None) -> str:
    return "-" if x is None else f"{1e3 * x:,.0f}"


def _stage_time(stage: dict[str, Any], key: str) -> float | None:
    parts = [stage[k][key] for k in ("forward", "backward") if stage.get(k) and stage[k].get(key) is not None]
    return float(sum(parts)) if parts else None


def _stage_repeats(stage: dict[str, Any]) -> list[float]:
    fw = stage.get("forward") or {}
    bw = stage.get("backward") or {}
    a, b = fw.get("measured_s") or [], bw.get("measured_s") or []
    if b and len(a) == len(b):
        return [x + y for x, y in zip(a, b, strict=True)]
    return list(a)


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The acceptance's figures over the cases that ran."""
    step_err, mem_err, orders = [], [], []
    for row in rows:
        m = row.get("measurement")
        if not m:
            continue
        if m["step"].get("error") is not None:
            step_err.append(abs(m["step"]["error"]))
        stages = m["stages"]
        for s in stages:
            if s["memory"].get("error") is not None:
                mem_err.append(abs(s["memory"]["error"]))
        for i in range(len(stages)):
            for j in range(i + 1, len(stages)):
                ri, rj = _stage_repeats(stages[i]), _stage_repeats(stages[j])
                pi, pj = _stage_time(stages[i], "predicted_s"), _stage_time(stages[j], "predicted_s")
                if not ri or not rj or pi is None or pj is None:
                    continue
                mi, mj = statistics.median(ri), statistics.median(rj)
                spread = max(max(ri) - min(ri), max(rj) - min(rj))
                if abs(mi - mj) > spread:
                    orders.append({"case": row["case"], "stages": (i, j),
                                   "same_order": (mi < mj) == (pi < pj)})
    return {
        "cases": len(step_err),
        "step_median_abs_error": statistics.median(step_err) if step_err else None,
        "step_max_abs_error": max(step_err) if step_err else None,
        "memory_median_abs_error": statistics.median(mem_err) if mem_err else None,
        "memory_max_abs_error": max(mem_err) if mem_err else None,
        "orders": orders,
    }


def table(rows: list[dict[str, Any]], summary: dict[str, Any], header: list[str]) -> str:
    lines = [*header, "", "| case | step predicted (ms) | measured median (min-max) | error | "
             "stage: fw+bw predicted / measured (error) | stage: peak memory predicted / measured (error) "
             "| machine speed |", "|---|---|---|---|---|---|---|"]
    for row in rows:
        speed = f"{row['machine_speed']:.2f}" if "machine_speed" in row else "-"
        if "failed" in row:
            lines.append(f"| {row['case']} | {row['failed']} | | | | | {speed} |")
            continue
        m = row["measurement"]
        step = m["step"]
        times, mems = [], []
        for s in m["stages"]:
            p, q = _stage_time(s, "predicted_s"), _stage_time(s, "median_s")
            err = None if p is None or not q else (p - q) / q
            times.append(f"{s['stage']}: {_ms(p)} / {_ms(q)} ({_pct(err)})")
            mem = s["memory"]
            mems.append(f"{s['stage']}: {mem['predicted_bytes'] / 1e6:,.0f} / "
                        f"{mem['measured_bytes'] / 1e6:,.0f} MB ({_pct(mem.get('error'))})")
        lines.append(f"| {row['case']} | {_ms(step.get('predicted_s'))} | {_ms(step.get('median_s'))} "
                     f"({_ms(step.get('min_s'))}-{_ms(step.get('max_s'))}) | {_pct(step.get('error'))} | "
                     f"{'<br>'.join(times)} | {'<br>'.join(mems)} | {speed} |")
    lines += ["", "Machine speed: a fixed single-thread workload's time when the machine was "
              "calibrated over its time just before the case (1.00: as fast; below 1: slower, "
              "so its times run above what the calibration predicts).", "",
              f"Over {summary['cases']} cases: step time median |error| "
              f"{_pct(summary['step_median_abs_error'])}, largest {_pct(summary['step_max_abs_error'])}; "
              f"peak memory per stage median |error| {_pct(summary['memory_median_abs_error'])}, largest "
              f"{_pct(summary['memory_max_abs_error'])}."]
    if summary["orders"]:
        same = sum(o["same_order"] for o in summary["orders"])
        wrong = [f"{o['case']} {o['stages']}" for o in summary["orders"] if not o["same_order"]]
        lines.append(f"Stage pairs whose measured times differ by more than the repeat spread: "
                     f"{len(summary['orders'])}; ordered the same way by the prediction: {same}"
                     + (f" (not: {', '.join(wrong)})" if wrong else "") + ".")
    else:
        lines.append("No two stages' measured times differ by more than their repeat spread.")
    return "\n".join(lines) + "\n"


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="cases (default: all): " + ", ".join(c.name for c in CASES))
    parser.add_argument("--machine", help="a machine file of this machine (default: calibrate one)")
    parser.add_argument("--steps", type=int, default=5, help="timed steps per run (default 5)")
    parser.add_argument("--out", default=str(REPO / "bench-results" / "prediction_accuracy.md"))
    args = parser.parse_args()
    unknown = sorted(set(args.names) - {c.name for c in CASES})
    if unknown:
        parser.error(f"unknown case(s): {', '.join(unknown)}")
    chosen = [c for c in CASES if not args.names or c.name in args.names]
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "OMP_NUM_THREADS": "1"}
    tmp = Path(tempfile.mkdtemp(prefix="dnnpart-accuracy-"))
    load_before = os.getloadavg()
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    rows: list[dict[str, Any]] = []
    try:
        machine = Path(args.machine).resolve() if args.machine else tmp / "machine.yaml"
        calibrated_ref = reference_seconds()
        if not args.machine:
            proc = _cli(["calibrate", "-o", str(machine), "--quiet"], tmp, env)
            if proc.returncode != 0:
                print(f"calibrate failed: {_error_line(proc)}", file=sys.stderr)
                return 1
        for case in chosen:
            ref = reference_seconds()
            row = run_case(case, machine, args.steps, tmp, env)
            row["machine_speed"] = calibrated_ref / ref  # < 1: slower than when calibrated
            rows.append(row)
            step = (row.get("measurement") or {}).get("step") or {}
            print(f"{case.name}: " + (row.get("failed") or
                  f"step {_ms(step.get('predicted_s'))} ms predicted, {_ms(step.get('median_s'))} ms "
                  f"measured ({_pct(step.get('error'))})"), flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    load_after = os.getloadavg()
    summary = summarize(rows)
    header = ["# Predicted against measured: time and memory of plans run on this CPU", "",
              f"`python benchmarks/prediction_accuracy.py {' '.join(args.names)}`".replace(" `", "`")
              + f", {started}; {_cpu_model()}, {os.cpu_count()} cores; two gloo ranks of one "
              f"thread each; {args.steps} timed steps after the checked one; load average "
              f"{load_before[0]:.2f} before, {load_after[0]:.2f} after."]
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(table(rows, summary, header))
    out.with_suffix(".json").write_text(json.dumps({"rows": rows, "summary": summary}, indent=1))
    print(out.read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
