"""Paper 1's methods on captured real models (issue 20, item 5): ideals, DP time and memory,
and the non-contiguous IP's objective, bound and gap at 120 s.

Run: ``PYTHONPATH=src python benchmarks/paper1_real_models.py [--only NAME ...]
[--dp-limit S] [--ip-limit S] [--training-only | --inference-only] [--skip dp|ip]``.

Each model is a ``torch.export`` capture (``dnnpart import SPEC [--training]``; HuggingFace
models built from their configs, nothing downloaded), pinned as
``bench-results/p1_<name>[_training].npz`` the first time (needs torch and the ``hf``
extra). On ``4xA100+1cpu`` (paper 1's throughput setting: 4 accelerators and a CPU) it runs,
each as a whole ``dnnpart solve`` process:

* ``dp`` with ``--time-limit`` ``--dp-limit`` (default 60 s): status, ideals, objective,
  wall seconds and the process's peak RSS (``solve_process.run_solve``); a graph whose
  lattice is over the ``max_ideals`` guard is refused in bounded time and reported as such;
* ``ip-noncontig --deterministic --threads 2 --time-limit`` ``--ip-limit`` (default 120):
  objective, bound, gap (CP-SAT's deterministic time, so the figures do not depend on the
  machine's load; the wall time does).

Writes ``bench-results/paper1_real_models.md`` (or ``--out``) and prints it. Not part of
``make bench``'s quick set: the full table takes about 30 minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from solve_process import run_solve  # noqa: E402  (a sibling script, not a package)

OUT = ROOT / "bench-results"
CLUSTER = "4xA100+1cpu"

#: name -> model spec (small configs where the full model's capture would dominate)
MODELS = {
    "resnet50": "hf:resnet-50",
    "bert": "hf:bert",
    "gpt2": "hf:gpt2",
    "llama-8x1024": ("hf:llama:num_hidden_layers=8,hidden_size=1024,num_attention_heads=16,"
                     "num_key_value_heads=16,intermediate_size=2816"),
    "swin-tiny": "hf:swin-tiny",
}


def pinned(name: str, training: bool, env: dict[str, str]) -> Path:
    """The pinned capture of ``name`` (captured with this checkout if missing)."""
    path = OUT / f"p1_{name}{'_training' if training else ''}.npz"
    if not path.exists():
        argv = [sys.executable, "-m", "dnnpart", "import", MODELS[name], "--out", str(path), "--quiet"]
        subprocess.run(argv + (["--training"] if training else []), check=True, env=env)
    return path


def fmt(value: Any, spec: str) -> str:
    """``value`` formatted, ``-`` where missing."""
    return "-" if value is None else format(value, spec)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", default=list(MODELS), help="of " + ", ".join(MODELS))
    parser.add_argument("--dp-limit", type=float, default=60.0)
    parser.add_argument("--ip-limit", type=float, default=120.0)
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--inference-only", action="store_true")
    mode.add_argument("--training-only", action="store_true")
    parser.add_argument("--skip", choices=("dp", "ip"), help="leave one method's columns empty")
    parser.add_argument("--out", type=Path, default=OUT / "paper1_real_models.md")
    args = parser.parse_args()
    OUT.mkdir(exist_ok=True)
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    trainings = [False] if args.inference_only else [True] if args.training_only else [False, True]
    header = (f"# Paper 1's methods on captured real models ({CLUSTER})\n\n"
              f"dp: whole process, time limit {args.dp_limit:g} s; ip-noncontig: --deterministic, "
              f"2 threads, {args.ip_limit:g} s of CP-SAT deterministic time; load average before: "
              f"{os.getloadavg()[0]:.1f}\n\n"
              "| model | graph | stage nodes | ideals | dp status | dp objective | dp wall s "
              "| dp peak RSS MB | IP objective | IP bound | IP gap | IP status | IP wall s |\n"
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    print(header, flush=True)
    rows = []
    for name in args.only:
        for training in trainings:
            kind = "training" if training else "inference"
            try:
                path = pinned(name, training, env)
            except subprocess.CalledProcessError:
                print(f"skipped {name} {kind}: capture failed (needs torch and the hf extra)")
                continue
            common = [sys.executable, "-m", "dnnpart", "solve", str(path), "--json", "--cluster", CLUSTER]
            dp: dict[str, Any] = {"status": "skipped"}
            ip: dict[str, Any] = {"status": "skipped"}
            if args.skip != "dp":
                dp = run_solve([*common, "--method", "dp", "--time-limit", str(args.dp_limit)], env,
                               args.dp_limit + 120)
            if args.skip != "ip":
                ip = run_solve([*common, "--method", "ip-noncontig", "--deterministic", "--threads", "2",
                                "--time-limit", str(args.ip_limit)], env, 4 * args.ip_limit + 300)
            dp_status = str(dp.get("status"))
            if "too many ideals" in dp_status:  # refused before allocating: say so briefly
                dp_status = "refused: ideals over the memory guard"
            if dp.get("timed_out"):
                dp_status += " (time limit)"
            row = (f"| {name} | {kind} | {fmt(dp.get('n_stage_nodes'), ',')} "
                   f"| {fmt(dp.get('n_ideals'), ',')} | {dp_status} | {fmt(dp.get('objective'), '.6g')} "
                   f"| {fmt(dp.get('wall_s'), '.1f')} | {fmt(dp.get('rss_mb'), '.0f')} "
                   f"| {fmt(ip.get('objective'), '.6g')} | {fmt(ip.get('bound'), '.6g')} "
                   f"| {fmt(None if ip.get('gap') is None else 100 * ip['gap'], '.2f')}% "
                   f"| {ip.get('status')} | {fmt(ip.get('wall_s'), '.1f')} |")
            rows.append(row)
            print(row, flush=True)
    args.out.write_text(header + "\n" + "\n".join(rows) + "\n")
    print(f"\nwritten to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
