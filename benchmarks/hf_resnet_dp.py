"""Pin a HuggingFace ResNet-50 (torch.export) graph as ``.npz`` and time the exact DP on it.

Run: ``.venv/bin/python benchmarks/hf_resnet_dp.py [--graph PATH] [--time-limit S]``.
Captures ``hf:resnet-50`` (inference, the model's own input shape) with ``dnnpart import``
into ``bench-results/hf_resnet50.npz`` unless that file exists, then runs
``dnnpart solve GRAPH --method dp --json --cluster 4xA100+1cpu`` as a whole process and reports its wall time,
peak RSS, ideals, slices priced and objective. Writes ``bench-results/hf_resnet_dp.md``.
Needs the ``hf`` extra (transformers) and torch.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench-results"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--graph", type=Path, default=OUT / "hf_resnet50.npz")
    parser.add_argument("--time-limit", type=float, default=600.0)
    parser.add_argument("--cluster", default="4xA100+1cpu", help="cluster spec (default %(default)s)")
    args = parser.parse_args()
    OUT.mkdir(exist_ok=True)
    cli = [sys.executable, "-m", "dnnpart"]
    if not args.graph.exists():
        t0 = time.perf_counter()
        subprocess.run([*cli, "import", "hf:resnet-50", "--out", str(args.graph)], check=True)
        print(f"captured {args.graph} in {time.perf_counter() - t0:.1f} s")
    t0 = time.perf_counter()
    proc = subprocess.run(
        [*cli, "solve", str(args.graph), "--method", "dp", "--json", "--cluster", args.cluster,
         "--time-limit", str(args.time_limit)],
        capture_output=True, text=True, check=False,
    )
    wall = time.perf_counter() - t0
    rss_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    if proc.returncode not in (0, 1):
        print(proc.stderr, file=sys.stderr)
        return proc.returncode
    r = json.loads(proc.stdout)
    row = (f"| {args.graph.name} | {r.get('n_stage_nodes')} | {r.get('n_ideals'):,} "
           f"| {r.get('n_cover_pairs'):,} | {r['status']} | {r['objective']:.6g} "
           f"| {r.get('slices_priced'):,} | {wall:.1f} | {rss_mb:.0f} |")
    table = (f"# Exact DP on a captured HF ResNet-50 (whole process, {args.cluster})\n\n"
             "| graph | stage nodes | ideals | cover pairs | status | objective | slices priced "
             "| wall s | peak RSS MB |\n|---|---|---|---|---|---|---|---|---|\n" + row + "\n")
    (OUT / "hf_resnet_dp.md").write_text(table)
    print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
