"""The exact DP on real captured graphs with 10^5 ideals and more (issue 20), whole process.

Run: ``PYTHONPATH=src python benchmarks/dp_big_lattice.py [--only NAME ...] [--src DIR]
[--set KEY=VALUE ...] [--time-limit S]``.

Each graph is a ``torch.export`` capture of a HuggingFace model built from its config
(nothing downloaded), pinned as ``bench-results/<name>.npz`` by ``dnnpart import`` the first
time (needs torch and the ``hf`` extra). The pinned one is BERT with 4 layers (130 stage
nodes, 148,200 ideals, about the 148,750 of the HF ResNet-50 capture of issue 20, which
today's frontend captures with 240 ideals: its graph no longer has the side branches that
made it wide). Each solve is ``dnnpart solve GRAPH --method dp --json --cluster
4xA100+1cpu`` in a fresh process (wall time and peak RSS are the whole process's: start-up,
import of the graph, enumeration, DPL, DP). ``--src`` runs another checkout's sources (the
speed-up table of issue 20 runs this script with ``--src`` pointing at the commit before);
``--set`` passes method options (``work_bound=false threads=1`` is the DP before issue 20).
Writes ``bench-results/dp_big_lattice.md`` (or ``--out``) and prints it.

``--before DIR`` (another checkout's ``src``, e.g. a git worktree of the commit before) runs
each graph with both sources, alternating, ``--repeat`` times each, and writes the before /
after table instead: best wall time of each, the speed-up, slices priced, peak RSS, and
whether both report the same optimum.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from solve_process import run_solve  # noqa: E402  (a sibling script, not a package)

OUT = ROOT / "bench-results"
CLUSTER = "4xA100+1cpu"

#: name -> (model spec, what it is)
GRAPHS = {
    "hf_bert_4layers": ("hf:bert:num_hidden_layers=4", "BERT-base, 4 layers (pinned)"),
    "hf_resnet50": ("hf:resnet-50", "ResNet-50"),
    "hf_bert_2layers": ("hf:bert:num_hidden_layers=2", "BERT-base, 2 layers"),
    "hf_vit_base": ("hf:vit-base", "ViT-base"),
    "hf_bert": ("hf:bert", "BERT-base, 12 layers"),
    "hf_bert_24layers": ("hf:bert:num_hidden_layers=24", "BERT-base, 24 layers"),
    "hf_bert_48layers": ("hf:bert:num_hidden_layers=48", "BERT-base, 48 layers"),
    "hf_gpt2": ("hf:gpt2", "GPT-2 (above the default max_ideals)"),
}
#: what runs without --only (the others take minutes each)
DEFAULT = ("hf_bert_4layers", "hf_resnet50")


def capture(name: str, env: dict[str, str]) -> Path:
    """The pinned ``.npz`` of ``name`` (captured with this checkout's frontend if missing)."""
    path = OUT / f"{name}.npz"
    if not path.exists():
        spec = GRAPHS[name][0]
        subprocess.run([sys.executable, "-m", "dnnpart", "import", spec, "--out", str(path),
                        "--quiet"], check=True, env=env)
    return path


def _formatter(result: dict[str, object]) -> Callable[..., str]:
    def num(key: str, fmt: str = ",") -> str:
        v = result.get(key)
        return "-" if v is None else format(v, fmt)

    return num


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", default=list(DEFAULT),
                        help=f"graph names to run, of {', '.join(GRAPHS)} (default: %(default)s)")
    parser.add_argument("--src", type=Path, default=ROOT / "src", help="sources to solve with")
    parser.add_argument("--set", dest="options", nargs="*", default=[], metavar="KEY=VALUE")
    parser.add_argument("--time-limit", type=float, default=600.0)
    parser.add_argument("--out", type=Path, default=OUT / "dp_big_lattice.md")
    parser.add_argument("--before", type=Path, default=None,
                        help="sources of the code before: a before / after table")
    parser.add_argument("--repeat", type=int, default=1, help="runs per source (best wall)")
    args = parser.parse_args()
    OUT.mkdir(exist_ok=True)
    if args.before is not None:
        return compare(args)
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    header = (f"# Exact DP on captured real graphs (whole process, {CLUSTER})\n\n"
              f"sources: `{args.src}`; options: {' '.join(args.options) or 'defaults'}; "
              f"time limit {args.time_limit:g} s; load average before: "
              f"{os.getloadavg()[0]:.1f}\n\n"
              "| graph | stage nodes | ideals | cover pairs | status | objective | DPL bound "
              "| slices priced | threads | wall s | peak RSS MB |\n"
              "|---|---|---|---|---|---|---|---|---|---|---|")
    print(header, flush=True)
    rows = []
    for name, (_spec, label) in GRAPHS.items():
        if name not in args.only:
            continue
        try:
            path = capture(name, env)
        except subprocess.CalledProcessError:
            print(f"skipped {name}: capture failed (needs torch and the hf extra)")
            continue
        r = _solve_in_child(_solve_argv(path, args), args.src, args)
        status = str(r.get("status"))
        if r.get("timed_out"):
            status += " (time limit)"
        num = _formatter(r)
        row = (f"| {label} | {num('n_stage_nodes')} | {num('n_ideals')} | {num('n_cover_pairs')} "
               f"| {status} | {num('objective', '.6g')} | {num('upper_bound', '.6g')} "
               f"| {num('slices_priced')} | {r.get('threads', 1)} | {num('wall_s', '.1f')} "
               f"| {num('rss_mb', '.0f')} |")
        rows.append(row)
        print(row, flush=True)
    args.out.write_text(header + "\n" + "\n".join(rows) + "\n")
    print(f"\nwritten to {args.out}")
    return 0


def _solve_argv(path: Path, args: argparse.Namespace) -> list[str]:
    return [sys.executable, "-m", "dnnpart", "solve", str(path), "--method", "dp", "--json",
            "--cluster", CLUSTER, "--time-limit", str(args.time_limit),
            *[x for kv in args.options for x in ("--set", kv)]]


def _solve_in_child(argv: list[str], src: Path, args: argparse.Namespace) -> dict[str, object]:
    """``argv`` as a whole process with ``src`` on the path (``solve_process.run_solve``)."""
    env = dict(os.environ, PYTHONPATH=str(src.resolve()))
    return run_solve(argv, env, args.time_limit + 60)


def compare(args: argparse.Namespace) -> int:
    """Before / after: each graph solved by both sources, alternating, best wall of each."""
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    header = (f"# Exact DP on captured real graphs, before / after (whole process, {CLUSTER})\n\n"
              f"before: `{args.before}`; after: `{args.src}`; options: "
              f"{' '.join(args.options) or 'defaults'}; best of {args.repeat} each, "
              f"alternating; time limit {args.time_limit:g} s\n\n"
              "| graph | ideals | before: wall s (best), slices, RSS MB | after: wall s (best), "
              "slices, RSS MB | speed-up | same optimum | objective | load avg |\n"
              "|---|---|---|---|---|---|---|---|")
    print(header, flush=True)
    rows = []
    for name, (_spec, label) in GRAPHS.items():
        if name not in args.only:
            continue
        path = capture(name, env)
        argv = _solve_argv(path, args)
        runs: dict[str, list[dict[str, object]]] = {"before": [], "after": []}
        loads = []
        for _ in range(args.repeat):
            for key, src in (("before", args.before), ("after", args.src)):
                loads.append(os.getloadavg()[0])
                runs[key].append(_solve_in_child(argv, src, args))
        cells = []
        best = {}
        for key in ("before", "after"):
            done = [r for r in runs[key] if r.get("status") == "optimal"]
            if not done:
                cells.append(f"{runs[key][0].get('status')}")
                best[key] = float("nan")
                continue
            fastest = min(done, key=lambda r: float(str(r["wall_s"])))
            best[key] = float(str(fastest["wall_s"]))
            cells.append(f"{best[key]:.1f}, {int(str(fastest['slices_priced'])):,}, "
                         f"{float(str(fastest['rss_mb'])):.0f}")
        objs = {float(str(r["objective"])) for k in runs for r in runs[k]
                if r.get("status") == "optimal"}
        same = "yes" if objs and max(objs) - min(objs) <= 1e-9 * max(objs) else "no"
        ideals = runs["after"][0].get("n_ideals")
        row = (f"| {label} | {ideals:,} | {cells[0]} | {cells[1]} "
               f"| {best['before'] / best['after']:.1f}x | {same} "
               f"| {min(objs) if objs else float('nan'):.6g} "
               f"| {min(loads):.1f}-{max(loads):.1f} |")
        rows.append(row)
        print(row, flush=True)
    args.out.write_text(header + "\n" + "\n".join(rows) + "\n")
    print(f"\nwritten to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
