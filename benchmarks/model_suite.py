"""The model suite from plan to the runtimes, as a user runs it (whole processes, CLI).

For every model of :data:`dnnpart.frontends.suite.SUITE` (or those named on the command line):

1. ``dnnpart plan SPEC --training --schedule 1f1b --microbatches 4 --cluster 4xA100 -o p.json``
   (the default: ``block-pipeline`` over the model's blocks); blocks and stages from the plan;
2. ``dnnpart run p.json``: the pipelined step in gloo processes, its gradient check;
3. ``dnnpart export p.json --format pipelining -o pipe/`` and, where the export wrote a
   script, ``torchrun --nproc-per-node S pipe/run_pipeline.py --steps 1 --check`` (loss and
   gradients against the unpartitioned model);
4. ``export --format deepspeed`` (a folder whose ``pipeline_module.py`` builds the
   ``PipelineModule``; ``tests/export/test_runtime_exports.py`` builds one over gloo),
   ``megatron`` and ``torchtitan``: exit 0, or exit 2 with the reason (a runtime without the
   model's family);
5. ``dnnpart report p.json``; activation memory on every stage, from the plan's evaluation.

Usage::

    PYTHONPATH=src python benchmarks/model_suite.py [NAME ...] [--out FILE]

Writes ``bench-results/model_suite.md`` (a table; the published copy is
``docs/results/model-suite.md``). Each step has a time limit; a step that fails records its
exit code and first error line, and the run goes on.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from dnnpart.frontends.suite import SUITE  # noqa: E402

STEP_LIMIT_S = 900


def _cli(args: list[str], cwd: Path, env: dict[str, str]) -> tuple[int, float, str]:
    start = time.perf_counter()
    try:
        proc = subprocess.run([sys.executable, "-m", "dnnpart", *args], cwd=cwd, env=env,
                              capture_output=True, text=True, timeout=STEP_LIMIT_S, check=False)
    except subprocess.TimeoutExpired:
        return 124, time.perf_counter() - start, f"timed out after {STEP_LIMIT_S} s"
    return proc.returncode, time.perf_counter() - start, _first_error(proc.stderr)


def _first_error(text: str) -> str:
    return next((line for line in text.splitlines() if line.startswith("error:")), "")


def _torchrun(script: Path, n: int, env: dict[str, str]) -> tuple[int, float, str]:
    start = time.perf_counter()
    try:
        proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node",
                               str(n), str(script), "--steps", "1", "--check"], cwd=script.parent,
                              env=env, capture_output=True, text=True, timeout=STEP_LIMIT_S,
                              check=False)
    except subprocess.TimeoutExpired:
        return 124, time.perf_counter() - start, "timed out"
    tail = (proc.stdout + proc.stderr).strip().splitlines()
    return proc.returncode, time.perf_counter() - start, tail[-1] if tail else ""


def _cell(rc: int, seconds: float, why: str) -> str:
    if rc == 0:
        return f"ok {seconds:.0f} s"
    reason = why.removeprefix("error: ").replace("|", "/")[:90]
    return f"exit {rc}: {reason}" if reason else f"exit {rc}"


def run_model(name: str, spec: str, tmp: Path, env: dict[str, str]) -> dict[str, str]:
    row: dict[str, str] = {"model": name}
    plan = tmp / f"{name}.json"
    args = ["plan", spec, "--training", "--schedule", "1f1b", "--microbatches", "4",
            "--cluster", "4xA100", "-o", str(plan), "--json"]
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "dnnpart", *args], cwd=tmp, env=env,
                          capture_output=True, text=True, timeout=STEP_LIMIT_S, check=False)
    row["plan"] = _cell(proc.returncode, time.perf_counter() - start, _first_error(proc.stderr))
    if proc.returncode != 0 or not plan.exists():
        return row
    result = json.loads(proc.stdout)
    row["blocks"] = str(result.get("blocks", "?"))
    simulation = (result.get("evaluation") or {}).get("simulation") or {}
    n_stages = len(simulation.get("stages") or [])
    row["stages"] = str(n_stages)
    memory = simulation.get("memory") or []
    acts = [m.get("activations", 0.0) for m in memory]
    row["activations"] = ("all > 0 (" + ", ".join(f"{a / 1e6:.3g}" for a in acts) + " MB)"
                          if acts and all(a > 0 for a in acts) else f"NOT all > 0: {acts}")
    rc, t, why = _cli(["run", str(plan)], tmp, env)
    row["run"] = _cell(rc, t, why)
    pipe = tmp / f"{name}-pipe"
    rc, t, why = _cli(["export", str(plan), "--format", "pipelining", "-o", str(pipe)], tmp, env)
    row["export pipelining"] = _cell(rc, t, why)
    script = pipe / "run_pipeline.py"
    if rc == 0 and script.exists():
        rc, t, why = _torchrun(script, n_stages, env)
        row["torchrun"] = _cell(rc, t, why)
    for fmt in ("deepspeed", "megatron", "torchtitan"):
        target = tmp / f"{name}-{fmt}"
        rc, t, why = _cli(["export", str(plan), "--format", fmt, "-o", str(target)], tmp, env)
        row[fmt] = _cell(rc, t, why)
    rc, t, why = _cli(["report", str(plan), "-o", str(tmp / f"{name}.html")], tmp, env)
    row["report"] = _cell(rc, t, why)
    return row


COLUMNS = ("model", "blocks", "stages", "plan", "run", "export pipelining", "torchrun", "deepspeed",
           "megatron", "torchtitan", "report", "activations")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="suite members (default: all)")
    parser.add_argument("--out", default=str(REPO / "bench-results" / "model_suite.md"))
    args = parser.parse_args()
    chosen = [(n, s) for n, s in SUITE if not args.names or n in args.names]
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "OMP_NUM_THREADS": "1"}
    lines = ["# The model suite: plan -> run -> exports -> report", "",
             f"`python benchmarks/model_suite.py {' '.join(args.names)}`".replace(" `", "`"),
             f"on {os.cpu_count()} cores, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; "
             "2-layer configs of `dnnpart.frontends.suite`, `--cluster 4xA100`, 1F1B, 4 micro-batches.",
             "", "| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    tmp = Path(tempfile.mkdtemp(prefix="dnnpart-suite-"))
    try:
        for name, spec in chosen:
            row = run_model(name, spec, tmp, env)
            lines.append("| " + " | ".join(row.get(c, "-") for c in COLUMNS) + " |")
            print(lines[-1], flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n")
    print(f"table in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
