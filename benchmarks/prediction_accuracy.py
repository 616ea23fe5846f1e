"""Predicted against measured: step time, per-stage times and peak memory of eight plans run on
two ranks of this machine's CPU, priced by this machine's calibration (issue 29, item 4).

For every case (whole processes, the CLI as a user runs it):

1. ``dnnpart calibrate -o machine.yaml`` once (or ``--machine FILE``, a machine file of this
   machine; ``--calibrate-each``: again before every case), one thread per rank;
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
        [--calibrate-each] [--steps 5] [--out FILE]

Writes ``bench-results/prediction_accuracy.md`` and ``.json`` (the published copy:
``docs/results/prediction-accuracy.md``).

On a GPU (``--device cuda --ranks 1``): the same cases on one rank, ``cuda:0``, calibrated by
``dnnpart calibrate --device cuda`` and run by ``dnnpart run --device cuda`` (peak memory from
``torch.cuda.max_memory_allocated``); the machine file is kept beside the table
(``bench-results/prediction_accuracy_cuda_machine.yaml``; published:
``docs/results/prediction-accuracy-gpu.md``).
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


def cluster_args(machine: Path, ranks: int | None) -> list[str]:
    """``--cluster`` for the machine file's own cluster (two ranks), or ``ranks`` of its device."""
    if ranks is None:
        return ["--cluster", str(machine)]
    return ["--specs", str(machine), "--cluster", f"{ranks}x{machine_device(machine)}"]


def machine_device(machine: Path) -> str:
    """The device a machine file describes (its first)."""
    import yaml

    data = yaml.safe_load(machine.read_text())
    return str(next(iter(data["devices"])))


def run_case(case: Case, machine: Path, steps: int, tmp: Path, env: dict[str, str], *,
             ranks: int | None = None, device: str = "cpu") -> dict[str, Any]:
    """Plan and run one case; the run's ``measurement`` and what it cost."""
    plan = tmp / f"{case.name}.json"
    start = time.perf_counter()
    proc = _cli(["plan", *case.model, *case.plan, *cluster_args(machine, ranks), "-o", str(plan),
                 "--quiet"], tmp, env)
    if proc.returncode != 0:
        return {"case": case.name, "failed": f"plan exit {proc.returncode}: {_error_line(proc)}"}
    planned = time.perf_counter() - start
    proc = _cli(["run", str(plan), "--steps", str(steps), "--json", "--quiet", "--device", device],
                tmp, env)
    # exit 1: a training check that failed its tolerance (on a GPU, against the CPU); the
    # measurement is still there, with passed: false
    if proc.returncode not in (0, 1) or not proc.stdout.strip():
        return {"case": case.name, "failed": f"run exit {proc.returncode}: {_error_line(proc)}"}
    result = json.loads(proc.stdout)
    return {"case": case.name, "what": case.what, "plan_s": planned,
            "run_s": time.perf_counter() - start - planned, "passed": result.get("passed"),
            "measurement": result["measurement"]}


def reprice_case(row: dict[str, Any], cluster: list[str], tmp: Path, env: dict[str, str]) -> dict[str, Any]:
    """``row`` (a case measured elsewhere, e.g. on a GPU) with its predictions made again here,
    by this checkout's capture and cost model, for the cluster ``cluster`` names: the plan is
    made with those arguments and priced as ``run`` prices it
    (:func:`dnnpart.workflow.running.predict_plan_run`); the measurements are the row's."""
    from dnnpart.export.measuring import RankMeasure
    from dnnpart.workflow import load_planned_model
    from dnnpart.workflow.measured import RunComparison
    from dnnpart.workflow.running import predict_plan_run, priced_by

    case = next(c for c in CASES if c.name == row["case"])
    plan = tmp / f"{case.name}-reprice.json"
    proc = _cli(["plan", *case.model, *case.plan, *cluster, "-o", str(plan), "--quiet"], tmp, env)
    if proc.returncode != 0:
        return {**row, "failed": f"plan exit {proc.returncode}: {_error_line(proc)}"}
    planned = load_planned_model(plan, trust=True, runnable=True)
    m = row["measurement"]
    prediction, order = predict_plan_run(planned, microbatches=None)
    data, source = 0.0, m["memory_measured"]
    if source == OLD_CUDA_MEMORY:  # measured before run subtracted the step's data
        data = step_data_bytes(planned, None, training=m["training"])
        source += (f", less the data run had copied to the GPU before the step ({data / 1e6:,.0f} MB: "
                   "micro-batches, targets, example tensors; from their shapes)")
    measured = [RankMeasure(forward_s=s["forward"]["measured_s"],
                            backward_s=(s.get("backward") or {}).get("measured_s", [0.0] * m["steps"]),
                            step_s=m["step"]["measured_s"], peak_bytes=s["memory"]["measured_bytes"] - data,
                            held_bytes=s["memory"]["held_bytes"], memory_source=source)
                for s in m["stages"]]
    comparison = RunComparison(prediction=prediction, measured=measured, step_s=m["step"]["measured_s"],
                               training=m["training"], priced_by=priced_by(planned, order))
    return {**row, "measurement": comparison.to_dict(), "repriced_by": " ".join(cluster)}


#: How a GPU run measured memory before it subtracted what the step's data held.
OLD_CUDA_MEMORY = "torch.cuda.max_memory_allocated"


def step_data_bytes(planned: Any, microbatches: int | None, *, training: bool) -> float:
    """Bytes ``run`` copies to a one-rank GPU before the step (and the old measurement
    counted): the micro-batches, and for training the targets and the stage's example input
    and output (``(m + 1) x (input + output)``); for inference the micro-batches."""
    import torch

    from dnnpart.export.training_run import main_output
    from dnnpart.frontends.sources import example_inputs
    from dnnpart.workflow.running import planned_microbatches

    run = planned.runnable
    source = run.source
    m = planned_microbatches(planned, microbatches)
    example = example_inputs(source.input_shapes, source.input_dtype, seed=1, module=source.module)
    inputs = float(sum(x.numel() * x.element_size() for x in example))
    if not training:
        return m * inputs
    with torch.no_grad():
        out = main_output(run.module(*example))
    return (m + 1) * (inputs + float(out.numel() * out.element_size()))


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


def _gpu_name(machine: Path) -> str:
    """The GPU a machine file was calibrated on (``calibration.machine.gpu``)."""
    import yaml

    try:
        data = yaml.safe_load(machine.read_text())
        return str(data["calibration"]["machine"].get("gpu", "a GPU"))
    except (OSError, KeyError, TypeError, AttributeError):
        return "a GPU"


def refit_queued(machine: Path, out: Path) -> Path:
    """A GPU machine file whose samples hold synchronised times only (written before
    ``calibrate`` timed each operator's launch), refitted as ``calibrate`` now fits a GPU
    (:func:`dnnpart.workflow.calibrating.queued_samples`), with the launch times it lacks
    estimated from what it recorded:

    * an operator that launches a kernel: ``dispatch_s``, the launch of a one-element add
      queued back to back (``measure_dispatch``);
    * a view or shape query (no kernel): its synchronised time less the wait on an idle GPU,
      taken as the median time of the shape queries (class ``meta``: their own host cost,
      under a microsecond, neglected);
    * the wait a synchronised kernel adds: the one-element add's synchronised time less
      ``dispatch_s``.

    Writes the refitted file at ``out``, its device renamed to the file's stem.
    """
    import yaml

    from dnnpart.devices.specs import op_classes_to_dict
    from dnnpart.workflow.calibrating import fit_samples

    data = yaml.safe_load(machine.read_text())
    cal = data["calibration"]
    queued, dispatch, idle = estimated_queued(cal)
    fits, _ = fit_samples(queued)
    (name, device), = data["devices"].items()
    device = {**device, "launch_overhead_s": dispatch,
              "op_classes": op_classes_to_dict(tuple(f.op_class(c) for c, f in sorted(fits.items())))}
    new_name = out.stem
    data["devices"] = {new_name: device}
    data["cluster"] = data["cluster"].replace(name, new_name)
    cal["refitted"] = (f"queued costs refitted offline from {machine.name}: launch times estimated "
                       f"(dispatch {dispatch * 1e6:.1f} us, idle wait {idle * 1e6:.1f} us)")
    out.write_text(yaml.safe_dump(data, sort_keys=False))
    return out


def estimated_queued(cal: dict[str, Any]) -> tuple[list[Any], float, float]:
    """A GPU calibration's samples (synchronised times only) as queued costs, with the
    launch times :func:`refit_queued` describes estimated; and the dispatch and idle-wait
    seconds used."""
    from dnnpart.workflow.calibrating import NO_KERNEL_CLASSES, Sample, queued_samples

    dispatch = float(cal["dispatch_s"])
    rows = cal["samples"]
    idle = statistics.median(r[4] for r in rows if r[0].partition(":")[0] == "meta")
    samples = []
    for key, op, flops, nbytes, seconds, *_ in rows:
        klass = key.partition(":")[0]
        host = max(seconds - idle, 0.0) if klass in NO_KERNEL_CLASSES else dispatch
        samples.append(Sample(klass, op, flops, nbytes, seconds, key, host_seconds=host))
    return queued_samples(samples, float(cal["overhead_s"]) - dispatch), dispatch, idle


def op_class_table(machine: Path, preset: str) -> str:
    """Per operator class of a GPU machine file's samples: the measured queued cost (its fits'
    data, :func:`refit_queued` where the file lacks launch times) against the roofline of the
    device preset ``preset`` (``max(FLOPs / (peak x eff), bytes / (bandwidth x eff)) +
    launch``), as the median and range of roofline / measured, and the sizes they span."""
    import yaml

    from dnnpart.cost import load_catalog
    from dnnpart.cost.model import roofline_time_s

    cal = yaml.safe_load(machine.read_text())["calibration"]
    rows = cal["samples"]
    # synchronised times only: the estimated launch times of refit_queued
    queued = [q.seconds for q in estimated_queued(cal)[0]] if len(rows[0]) < 7 else [r[4] for r in rows]
    spec = load_catalog().device(preset)
    groups: dict[str, list[tuple[float, float, float]]] = {}
    for r, q in zip(rows, queued, strict=True):
        if q <= 0:  # a shape query whose whole time was the wait
            continue
        roof = float(roofline_time_s(r[2], r[3], spec))
        groups.setdefault(r[0].partition(":")[0], []).append((roof / q, q, r[2]))
    lines = [f"| class | samples | measured (us, min-max) | {preset} roofline / measured: median (min-max) |",
             "|---|---|---|---|"]
    for klass in sorted(groups):
        got = groups[klass]
        ratios = [g[0] for g in got]
        times = [g[1] * 1e6 for g in got]
        lines.append(f"| {klass} | {len(got)} | {min(times):,.1f}-{max(times):,.1f} | "
                     f"{statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f}) |")
    return "\n".join(lines) + "\n"


def reprice(args: argparse.Namespace) -> int:
    """``--reprice``: the table of a measured run, its predictions made again here."""
    measured = json.loads(Path(args.reprice).read_text())
    if args.cluster:
        cluster = ["--cluster", args.cluster]
    elif args.machine:
        cluster = cluster_args(Path(args.machine).resolve(), args.ranks)
    else:
        raise SystemExit("--reprice needs --machine FILE or --cluster SPEC")
    path = os.pathsep.join(x for x in (str(REPO / "src"), os.environ.get("PYTHONPATH")) if x)
    env = {**os.environ, "PYTHONPATH": path}
    tmp = Path(tempfile.mkdtemp(prefix="dnnpart-reprice-"))
    rows = []
    try:
        for row in measured["rows"]:
            if args.names and row["case"] not in args.names:
                continue
            rows.append(reprice_case(row, cluster, tmp, env) if "measurement" in row else row)
            step = (rows[-1].get("measurement") or {}).get("step") or {}
            print(f"{row['case']}: " + (rows[-1].get("failed") or
                  f"step {_ms(step.get('predicted_s'))} ms predicted, {_ms(step.get('median_s'))} ms "
                  f"measured ({_pct(step.get('error'))})"), flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    summary = summarize(rows)
    header = [f"# Measured in {Path(args.reprice).name}, predicted here for {' '.join(cluster)}", "",
              f"`python benchmarks/prediction_accuracy.py {' '.join(sys.argv[1:])}`, "
              + time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())]
    out = Path(args.out or REPO / "bench-results" / "prediction_accuracy_repriced.md")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(table(rows, summary, header))
    out.with_suffix(".json").write_text(json.dumps({"rows": rows, "summary": summary,
                                                    "repriced_by": cluster}, indent=1))
    print(out.read_text())
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="cases (default: all): " + ", ".join(c.name for c in CASES))
    parser.add_argument("--machine", help="a machine file of this machine (default: calibrate one)")
    parser.add_argument("--steps", type=int, default=5, help="timed steps per run (default 5)")
    parser.add_argument("--calibrate-each", action="store_true",
                        help="calibrate again just before every case (a shared machine's speed drifts "
                        "over the minutes a run of the eight cases takes); not with --machine")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                        help="where the ranks run and what is calibrated (default cpu)")
    parser.add_argument("--ranks", type=int, help="ranks of the machine file's device (default: "
                        "its own cluster, two ranks)")
    parser.add_argument("--out", help="table (default bench-results/prediction_accuracy[_cuda].md)")
    parser.add_argument("--reprice", metavar="JSON", help="price again, here, the cases a run of this "
                        "benchmark measured (its .json), for --machine (with --ranks) or --cluster")
    parser.add_argument("--cluster", help="with --reprice: a cluster spec (e.g. 1xH100, a roofline preset)")
    parser.add_argument("--refit-queued", nargs=2, metavar=("IN", "OUT"), help="refit a GPU machine "
                        "file written without launch times as calibrate now fits a GPU (refit_queued)")
    parser.add_argument("--op-classes", nargs=2, metavar=("MACHINE", "PRESET"), help="a GPU machine "
                        "file's operator costs against a device preset's roofline, per class")
    args = parser.parse_args()
    if args.op_classes:
        print(op_class_table(Path(args.op_classes[0]), args.op_classes[1]), end="")
        return 0
    if args.refit_queued:
        print(refit_queued(Path(args.refit_queued[0]), Path(args.refit_queued[1])))
        return 0
    if args.reprice:
        return reprice(args)
    args.out = args.out or str(REPO / "bench-results" / (
        "prediction_accuracy.md" if args.device == "cpu" else "prediction_accuracy_cuda.md"))
    if args.calibrate_each and args.machine:
        parser.error("--calibrate-each calibrates: not with --machine")
    unknown = sorted(set(args.names) - {c.name for c in CASES})
    if unknown:
        parser.error(f"unknown case(s): {', '.join(unknown)}")
    chosen = [c for c in CASES if not args.names or c.name in args.names]
    path = os.pathsep.join(x for x in (str(REPO / "src"), os.environ.get("PYTHONPATH")) if x)
    env = {**os.environ, "PYTHONPATH": path, "OMP_NUM_THREADS": "1"}
    tmp = Path(tempfile.mkdtemp(prefix="dnnpart-accuracy-"))
    load_before = os.getloadavg()
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    rows: list[dict[str, Any]] = []
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    command = f"`python benchmarks/prediction_accuracy.py {' '.join(sys.argv[1:])}`".replace(" `", "`")
    machine = Path(args.machine).resolve() if args.machine else tmp / (
        "machine.yaml" if args.device == "cpu" else "gpu.yaml")

    def write(final: bool) -> None:  # after every case: a run cut short keeps what it measured
        load_after = os.getloadavg()
        if args.device == "cpu":
            title = "# Predicted against measured: time and memory of plans run on this CPU"
            where = (f"{_cpu_model()}, {os.cpu_count()} cores; two gloo ranks of one thread each")
        else:
            title = f"# Predicted against measured: time and memory of plans run on {_gpu_name(machine)}"
            where = (f"{_gpu_name(machine)}, {args.ranks or 2} rank(s) (cuda:0...), float32 with TF32 "
                     f"off; host {_cpu_model()}, {os.cpu_count()} cores")
        header = [title, "", command + f", {started}; {where}; {args.steps} timed steps after the "
                  f"checked one; load average {load_before[0]:.2f} before, {load_after[0]:.2f} "
                  + ("after." if final else "now (incomplete: cases still running).")]
        summary = summarize(rows)
        out.write_text(table(rows, summary, header))
        out.with_suffix(".json").write_text(json.dumps(
            {"rows": rows, "summary": summary, "device": args.device, "ranks": args.ranks}, indent=1))

    def calibrate() -> float | None:
        """Calibrate the machine file; the reference workload's time then (None: failed)."""
        ref = reference_seconds()
        if args.machine:
            return ref
        proc = _cli(["calibrate", "-o", str(machine), "--quiet", "--device", args.device], tmp, env)
        if proc.returncode != 0:
            print(f"calibrate failed: {_error_line(proc)}", file=sys.stderr)
            return None
        if args.device != "cpu":  # kept: the GPU's calibration is published with its table
            shutil.copy(machine, out.with_name(out.stem + "_machine.yaml"))
        return ref

    try:
        calibrated_ref = calibrate()
        if calibrated_ref is None:
            return 1
        for n, case in enumerate(chosen):
            if args.calibrate_each and n > 0:
                calibrated_ref = calibrate()
                if calibrated_ref is None:
                    return 1
            ref = reference_seconds()
            row = run_case(case, machine, args.steps, tmp, env, ranks=args.ranks, device=args.device)
            row["machine_speed"] = calibrated_ref / ref  # < 1: slower than when calibrated
            rows.append(row)
            step = (row.get("measurement") or {}).get("step") or {}
            print(f"{case.name}: " + (row.get("failed") or
                  f"step {_ms(step.get('predicted_s'))} ms predicted, {_ms(step.get('median_s'))} ms "
                  f"measured ({_pct(step.get('error'))})"), flush=True)
            write(final=False)
        write(final=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(out.read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
