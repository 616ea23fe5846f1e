"""Acceptance of issue 14: ``dnnpart plan`` then ``dnnpart run`` for the full-size model suite.

For gpt2, bert, llama (8 layers, hidden 1024), t5-small, swin-tiny, resnet-50 and vit-base at
their default inputs: plan with ``dnnpart plan``'s default method (the exact DP where its
lattice fits, else DPL: the DP refuses most of these wide aten graphs), run the plan in gloo
processes and compare with the unpartitioned model (max |diff| <= 1e-5 * max |reference|, fp32).

Usage::

    PYTHONPATH=src python benchmarks/plan_run_suite.py

Writes ``bench-results/plan_run.md``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from models import REPO, SUITE

TOLERANCE = 1e-5


def main() -> int:
    env = {"PYTHONPATH": str(REPO / "src"), "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"}
    lines = [
        "# plan + run of the model suite (issue 14 acceptance)",
        "",
        "| model | plan (s) | run (s) | devices used | stages | max abs diff | max abs ref | "
        "relative | holds |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        for name, (spec, _) in SUITE.items():
            plan = Path(tmp) / f"{name}.json"
            start = time.perf_counter()
            subprocess.run([sys.executable, "-m", "dnnpart", "plan", spec, "-o", str(plan),
                            "--json"], check=True, capture_output=True, env=env)
            mid = time.perf_counter()
            out = subprocess.run([sys.executable, "-m", "dnnpart", "run", str(plan), "--microbatches", "2",
                                  "--json"], check=True, capture_output=True, text=True, env=env)
            end = time.perf_counter()
            res = json.loads(out.stdout)
            holds = res["max_abs_diff"] <= TOLERANCE * res["max_abs_reference"]
            ok &= holds
            method = json.loads(plan.read_text())["method"]
            lines.append(
                f"| {name} ({method}) | {mid - start:.0f} | {end - mid:.0f} | {len(res['devices_used'])} | "
                f"{res['stages']} | {res['max_abs_diff']:.3g} | {res['max_abs_reference']:.3g} | "
                f"{res['relative_diff']:.3g} | {'yes' if holds else 'NO'} |"
            )
            print(lines[-1], file=sys.stderr)
    (REPO / "bench-results").mkdir(exist_ok=True)
    (REPO / "bench-results" / "plan_run.md").write_text("\n".join(lines) + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
