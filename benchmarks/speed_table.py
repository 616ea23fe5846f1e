"""Issue 32's speed table: each row's solve timed as a whole process beside its reference.

Run: ``PYTHONPATH=src .venv/bin/python benchmarks/speed_table.py [--rows 1,2,3] [--repeat 3]
[--quick] [--ref-timeout 120] [--out FILE]``. Writes ``bench-results/speed_table.md`` (the
published copy goes to ``docs/results/``) and prints it.

Every figure is the wall time and peak RSS (``/usr/bin/time``) of one whole CLI process
(``python -m dnnpart ...`` with ``PYTHONPATH=src``), after one untimed warm-up run per row that
fills numba's cache. Where a row has a reference program, ours and the reference alternate in
pairs, ``--repeat`` times; the table gives medians, their ratio and whether the row's target
is met. ``--quick``: one repeat of the smallest case per row. Rows: (1) ``solve --method dp``
on paper 1's 14 shared graphs vs the authors' C++ DP; (2) ``--method pardnn`` on op BERT-6
training (the authors' ``bert_l-6_training.json``: 1,071 nodes), K = 4, 8, 16 V100s, and (3) on
``zoo:synthetic`` 200k / 1M, both ``memory_heuristic=none``, vs ParDNN's C++; (4) ``optcnn``
on Inception-v3, ``16xP100`` and ``4xP100``; (5) ``map`` on Table 2's 15 ``D = 512`` cells
(stage graphs partitioned as ``dnnpart reproduce parmesan`` does, untimed); (6) ``solve
--method dp`` on the model suite's captures (``dnnpart.frontends.suite``, untimed), the IP
asked for a bound where the DP does not finish. No test reads these times.

References are the authors' C++ programs, built ``-O2`` into a temporary folder from the
checkout (or ``git archive`` extract) that an environment variable names; never from this
repository. ``DNNPART_REF_DNN_PARTITIONING``: msr-fiddle/dnn-partitioning (``throughput-dp/
dp.cpp``, reads the shared JSON graphs on stdin; its ``bert_l-6_training.json`` is row 2's
graph). ``DNNPART_REF_PARDNN``: ParCoreLab/pardnn (``src/*.cpp``; its input files are written
from our PARDNN costs: a ``.dot`` graph with ``src``/``snk``, integer node times and
per-node edge costs, no memory balancing; its preprocessing call runs an empty stub). A
variable unset, a build that fails or a missing input skips that reference (or row) with
the reason. A reference killed at ``--ref-timeout`` shows ``> T`` and a bound on the ratio.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from dp_suite import SUITE, WORKLOADS  # noqa: E402  (a sibling script, not a package)

OUT = ROOT / "bench-results" / "speed_table.md"
REF_DP, REF_PARDNN = "DNNPART_REF_DNN_PARTITIONING", "DNNPART_REF_PARDNN"
SMALLEST_DP = "op BERT-3 inference"
SYNTHETIC = "zoo:synthetic:nodes=200000,edges=1000000,seed=0,like=word-rnn"
T2_CELLS = ((512, 4, 128), (512, 8, 64), (512, 16, 32))
T2_TOPOLOGIES = ("mesh3d", "torus3d", "random_blk_1", "random_blk_2", "uniform_dist")
ROW6_CLUSTER = "4xA100+1cpu"
_GRAPHS: dict[str, Any] = {}  # spec -> Graph, for the PARDNN reference's inputs
#: per row, an untimed first run that loads (or fills) numba's cache; None: the row's first case
WARM_UP: dict[int, tuple[str, ...]] = {
    3: ("solve", "zoo:synthetic:nodes=20000,edges=100000,seed=0,like=word-rnn", "--cluster", "4xV100",
        "--objective", "makespan", "--method", "pardnn", "--set", "memory_heuristic=none", "-q"),
    6: ("solve", "zoo:bert-3", "--method", "dp", "-q"),
}


@dataclass
class Run:
    """One whole process: wall seconds, peak RSS, exit code, stdout and the last stderr line."""

    wall: float
    rss_mb: float
    rc: int
    out: str
    err: str
    killed: bool = False


@dataclass
class Case:
    """One line of the table."""

    row: int
    name: str
    ours: list[str]
    ref: list[str] | None = None  # argv of the reference, None: no reference run
    ref_cwd: Path | None = None
    ref_stdin: Path | None = None
    ref_note: str = ""  # why the reference is skipped, or what it is (quoted)
    limit: float = 600.0
    runs: list[Run] = field(default_factory=list)
    ref_runs: list[Run] = field(default_factory=list)


def timed(argv: list[str], env: dict[str, str], timeout: float, *, cwd: Path | None = None,
          stdin: Path | None = None) -> Run:
    """Run ``argv`` to its end (its process group killed after ``timeout``): wall time and peak
    RSS. The RSS comes from ``/usr/bin/time`` (a small process between: a child forked from
    this one would report at least this one's RSS); without it, 0."""
    with tempfile.TemporaryDirectory() as scratch, open(stdin or os.devnull, "rb") as inp, \
            open(Path(scratch) / "out", "w+b") as out, open(Path(scratch) / "err", "w+b") as err:
        rss_file = Path(scratch) / "rss"
        wrap = ["/usr/bin/time", "-f", "%M", "-o", str(rss_file)] if Path("/usr/bin/time").exists() else []
        t0 = time.perf_counter()
        proc = subprocess.Popen([*wrap, *argv], stdin=inp, stdout=out, stderr=err, env=env, cwd=cwd,
                                start_new_session=True)
        try:
            rc, killed = proc.wait(timeout), False
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            rc, killed = proc.wait(), True
        finally:  # interrupted: its own session would outlive this process
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
        wall = time.perf_counter() - t0
        out.seek(0)
        err.seek(0)
        text = out.read().decode(errors="replace")
        tail = err.read().decode(errors="replace").strip().splitlines()[-1:]
        rss = rss_file.read_text().strip().splitlines()[-1:] if rss_file.exists() else []
    kb = float(rss[0]) if rss and rss[0].isdigit() else 0.0
    return Run(wall, kb / 1024, rc, text, (tail or [""])[0][:100], killed)


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "dnnpart", *args]


def payload(run: Run) -> dict[str, Any]:
    """The JSON object a run printed (ours with ``--json``, the DP's result), ``{}`` when none."""
    text = run.out.strip()
    for chunk in (text, text[text.rfind("\n{") + 1:]):  # the whole output, or its last object
        with contextlib.suppress(json.JSONDecodeError):
            value = json.loads(chunk)
            return value if isinstance(value, dict) else {}
    return {}


def build(name: str, var: str, tmp: Path, sources: list[str]) -> tuple[Path | None, str]:
    """Build a reference with ``g++ -O2`` into ``tmp``: (program, note) or (None, reason)."""
    folder = os.environ.get(var)
    if not folder:
        return None, f"{name} reference skipped: {var} is not set"
    src = Path(folder)
    files = [p for pattern in sources for p in sorted(src.glob(pattern))]
    if not files:
        return None, f"{name} reference skipped: no {' '.join(sources)} under {src}"
    exe = tmp / name
    argv = ["g++", "-O2", "-std=c++17", "-w", *map(str, files), "-o", str(exe)]
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"{name} reference skipped: build failed ({exc})"
    if proc.returncode != 0:
        why = next((ln for ln in proc.stderr.splitlines() if "error" in ln), "")[:100].replace("|", "/")
        return None, f"{name} reference skipped: build failed ({why})"
    commit = subprocess.run(["git", "-C", str(src), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True, check=False).stdout.strip()
    digest = hashlib.sha256(b"".join(p.read_bytes() for p in files)).hexdigest()[:12]
    return exe, (f"{name}: `g++ -O2 -std=c++17 {' '.join(sources)}` from {src} "
                 f"({'commit ' + commit + ', ' if commit else ''}sources sha256 {digest})")


def pardnn_input(spec: str, k: int, folder: Path) -> Path:
    """Write ParCoreLab/pardnn's input files for ``spec`` on ``k`` V100s (our PARDNN costs,
    scaled to integers summing to ~1e8) and its ``settings.json``; the folder to run it in."""
    import numpy as np

    from dnnpart import Objective, Problem
    from dnnpart.cost import resolve_cluster
    from dnnpart.solvers.pardnn.method import problem_costs
    from dnnpart.workflow import load_problem

    if spec not in _GRAPHS:  # one load per graph: the cluster only changes the costs
        _GRAPHS[spec] = load_problem(spec).graph
    problem = Problem(graph=_GRAPHS[spec], cluster=resolve_cluster(f"{k}xV100").cluster,
                      objective=Objective(kind="makespan"))
    costs, _ = problem_costs(problem)
    src = costs.edge_sources()
    out_cost = np.zeros(costs.n)
    np.maximum.at(out_cost, src, costs.comm)
    scale = 1e8 / max(float(costs.comp.sum() + out_cost.sum()), 1e-300)
    folder.mkdir(parents=True, exist_ok=True)
    no_in = np.diff(costs.pred_ptr) == 0
    no_out = np.diff(costs.succ_ptr) == 0
    with open(folder / "graph.dot", "w") as f:
        f.write("digraph G {\n")
        f.writelines(f"src -> n{i}\n" for i in np.flatnonzero(no_in))
        f.writelines(f"n{a} -> n{b}\n" for a, b in zip(src.tolist(), costs.succ_idx.tolist(), strict=True))
        f.writelines(f"n{i} -> snk\n" for i in np.flatnonzero(no_out))
        f.write("}\n")
    comp = np.rint(costs.comp * scale).astype(np.int64)
    (folder / "weights.txt").write_text("".join(f"n{i}::{c}\n" for i, c in enumerate(comp.tolist())))
    nbytes = np.rint(out_cost * scale * 1000).astype(np.int64)  # rate 1: weight = bytes / 1000
    (folder / "edges.txt").write_text("".join(f"n{i}::{b}\n" for i, b in enumerate(nbytes.tolist())))
    (folder / "src" / "preprocessing").mkdir(parents=True, exist_ok=True)
    (folder / "src" / "preprocessing" / "prepare_it.py").write_text("")
    empty = ("var_nodes", "ref_nodes", "no_ops", "cpu_nodes", "vanilla_cleaned")
    files = {"graph": "graph.dot", "nodes_weights": "weights.txt", "edges_costs": "edges.txt",
             **{key: f"{key}.txt" for key in empty}}
    for key in empty:  # no variables, reference ops, no-ops or CPU placements
        (folder / files[key]).write_text("")
    (folder / "settings.json").write_text(json.dumps({"folder": ".", "K": k, "COMM_LATENCY": 0,
                                                      "COMM_TRANSFER_RATE": 1, "BALANCE_MEMORY": False,
                                                      **files}))
    return folder


def stage_files(folder: Path, cells: tuple[tuple[int, int, int], ...]) -> dict[tuple[int, int], Path]:
    """Table 2's phase-1 stage graphs (SemanticFPN-50, 512x512, as ``dnnpart reproduce
    parmesan`` partitions them) as ``dnnpart map`` stage files."""
    from dnnpart import Problem
    from dnnpart.cost import resolve_cluster
    from dnnpart.reproduce.parmesan import _fpn, _objective, table2_topology
    from dnnpart.solvers.parmesan.phase1 import partition_ops, pipeline_stages
    from dnnpart.solvers.parmesan.solver import memory_model, stages_in_seconds

    graph = _fpn(False)
    cluster = resolve_cluster(table2_topology("mesh2d", 16) or "").cluster
    problem = Problem(graph=graph, cluster=cluster, objective=_objective())
    mem = memory_model(problem, 2.0)
    files = {}
    for d, s_n, r_n in cells:
        part = partition_ops(graph, s_n, d, replicas=r_n, k=64, memory=mem)
        if part.atom_stage is None:
            continue
        st = stages_in_seconds(pipeline_stages(part.dag, part.atom_stage, r_n, memory=mem),
                               cluster.time_unit_s)
        doc: dict[str, Any] = {"format": "dnnpart.stages", "version": 1, "replicas": r_n,
                               "compute": st.compute.tolist(), "param_bytes": st.param_bytes.tolist(),
                               "comm_bytes": st.comm_bytes.tolist()}
        if st.memory_bytes is not None:
            doc["memory_bytes"] = st.memory_bytes.tolist()
        files[(s_n, r_n)] = folder / f"stages_{d}_{s_n}x{r_n}.json"
        files[(s_n, r_n)].write_text(json.dumps(doc))
    return files


def cases(rows: set[int], quick: bool, tmp: Path, env: dict[str, str]) -> tuple[list[Case], list[str]]:
    """The cases of the chosen rows, with their references built; plus notes (skips, builds)."""
    notes: list[str] = []
    out: list[Case] = []
    dp_exe, dp_note = build("dp", REF_DP, tmp, ["throughput-dp/dp.cpp"]) if rows & {1} else (None, "")
    par_exe, par_note = (build("pardnn", REF_PARDNN, tmp, ["src/*.cpp"]) if rows & {2, 3}
                         else (None, ""))
    notes += [n for n in (dp_note, par_note) if n]
    if 1 in rows:
        if not WORKLOADS.exists():
            notes.append(f"row 1 skipped: {WORKLOADS} not found")
        for folder, stem, label, *_ in SUITE:
            if not WORKLOADS.exists() or (quick and label != SMALLEST_DP):
                continue
            path = WORKLOADS / folder / f"{stem}.json"
            out.append(Case(1, label, cli("solve", str(path), "--method", "dp", "--json", "-q"),
                            [str(dp_exe)] if dp_exe else None, ref_stdin=path,
                            ref_note="" if dp_exe else dp_note, limit=120))
    ks = (4,) if quick else (4, 8, 16)
    pardnn = ("--objective", "makespan", "--method", "pardnn", "--set", "memory_heuristic=none",
              "--json", "-q")
    if 2 in rows:
        graph = WORKLOADS / "OperatorGraphs" / "bert_l-6_training.json"  # not in ../shared today
        if not graph.exists():
            graph = Path(os.environ.get(REF_DP) or "/nonexistent") / "throughput-inputs" / graph.relative_to(
                WORKLOADS)
        if not graph.exists():
            notes.append(f"row 2 skipped: op BERT-6 training is in neither {WORKLOADS} nor ${REF_DP}'s "
                         "throughput-inputs/")
        else:
            out += [_pardnn_case(2, f"op BERT-6 training, K = {k}", str(graph), k, par_exe, par_note,
                                 tmp, pardnn) for k in ks]
    if 3 in rows:
        out += [_pardnn_case(3, f"synthetic 200k / 1M (word-rnn), K = {k}", SYNTHETIC, k, par_exe, par_note,
                             tmp, pardnn) for k in ks]
    if 4 in rows:
        for n in (4,) if quick else (16, 4):
            out.append(Case(4, f"builtin:inception_v3, {n}xP100", cli(
                "solve", "builtin:inception_v3", "--objective", "iteration", "--method", "optcnn",
                "--cluster", f"{n}xP100", "--json", "-q"),
                ref_note="paper 3: 0.4 s for 4 GPUs (quoted, not run)" if n == 4 else "-"))
    if 5 in rows:
        from dnnpart.reproduce.parmesan import table2_topology

        files = stage_files(tmp, T2_CELLS[-1:] if quick else T2_CELLS)
        for (s_n, r_n), path in files.items():
            for name in T2_TOPOLOGIES[:1] if quick else T2_TOPOLOGIES:
                out.append(Case(5, f"{name} D = 512 ({s_n},{r_n})", cli(
                    "map", str(path), "--cluster", table2_topology(name, 512) or "", "--time-limit", "60",
                    "--json", "-q"), ref_note="paper 4: \"acceptable\" (quoted)", limit=120))
    if 6 in rows:
        out += _model_cases(quick, tmp, env, notes)
    return out, notes


def _pardnn_case(row: int, name: str, spec: str, k: int, exe: Path | None, note: str, tmp: Path,
                 flags: tuple[str, ...]) -> Case:
    case = Case(row, name, cli("solve", spec, "--cluster", f"{k}xV100", *flags), ref_note=note,
                limit=300 if row == 3 else 600)
    if exe is not None:
        case.ref, case.ref_cwd = [str(exe)], pardnn_input(spec, k, tmp / f"pardnn_{row}_{k}")
    return case


def _model_cases(quick: bool, tmp: Path, env: dict[str, str], notes: list[str]) -> list[Case]:
    """Row 6: the model suite's test-size configs captured once (untimed) to ``.npz``."""
    try:
        from dnnpart.frontends.suite import SUITE as MODELS
    except ImportError as exc:
        notes.append(f"row 6 skipped: {exc}")
        return []
    out = []
    for name, spec in MODELS:
        if quick and name != "bert":
            continue
        path = tmp / f"{name}.npz"
        cap = timed(cli("import", spec, "--out", str(path), "--quiet"), env, 600)
        if cap.rc != 0:
            notes.append(f"row 6 {name} skipped: capture exit {cap.rc} ({cap.err}; "
                         "needs torch and the hf extra)")
            continue
        out.append(Case(6, name, cli("solve", str(path), "--cluster", ROW6_CLUSTER, "--method", "dp",
                                     "--time-limit", "60", "--json", "-q"), ref_note="-", limit=120))
    return out


def measure(case: Case, repeat: int, ref_timeout: float, env: dict[str, str]) -> None:
    """Ours and the reference in alternation; a reference killed once is not run again."""
    for _ in range(repeat):
        case.runs.append(timed(case.ours, env, case.limit))
        if case.ref and not any(r.killed for r in case.ref_runs):
            case.ref_runs.append(timed(case.ref, env, ref_timeout, cwd=case.ref_cwd, stdin=case.ref_stdin))
    if case.row == 6 and payload(case.runs[-1]).get("status") != "optimal":  # certify by the IP
        ip = [*case.ours[:case.ours.index("--method")], "--method", "ip", "--gap", "0.01",
              "--time-limit", "60", "--json", "-q"]
        case.ref_runs.append(timed(ip, env, case.limit))


def _med(runs: list[Run]) -> float:
    return statistics.median(r.wall for r in runs)


def verdict(case: Case) -> tuple[str, str, str]:
    """(reference column, ratio, target met?) of one case."""
    ours = _med(case.runs)
    res = payload(case.runs[-1])
    if any(r.rc not in (0, 1) or r.killed for r in case.runs):
        return case.ref_note or "-", "-", f"no: ours failed ({case.runs[-1].err or 'killed'})"
    if case.row == 6:
        if res.get("status") == "optimal":
            return "-", "-", "yes (exact)" if ours <= 60 else "no: > 60 s"
        ip = payload(case.ref_runs[-1]) if case.ref_runs else {}
        bound, obj = ip.get("bound"), res.get("objective")
        ok = bound and obj and obj <= 1.01 * bound
        return f"IP bound {bound} ({case.ref_runs[-1].wall:.1f} s)" if case.ref_runs else "-", "-", \
            f"{'yes' if ok else 'no'}: {res.get('status')}, objective {obj}"
    if case.row == 4:
        cap = 2.0 if "16x" in case.name else 0.5
        return case.ref_note, "-", f"{'yes' if ours <= cap else 'no'} (≤ {cap:g} s)"
    if case.row == 5:
        ok = res.get("status") == "optimal" and ours <= 60
        return case.ref_note, "-", f"{'yes' if ok else 'no'}: {res.get('status')}"
    if not case.ref_runs:
        if case.row == 3:
            return case.ref_note, "-", f"{'yes' if ours <= 10 else 'no'} (≤ 10 s)"
        if case.name == SMALLEST_DP:
            return case.ref_note, "-", f"{'yes' if ours <= 0.25 else 'no'} (≤ 0.25 s; no reference for ≥ 3x)"
        return case.ref_note, "-", "- (no reference)"
    ref_killed = any(r.killed for r in case.ref_runs)
    ok_ref = [r for r in case.ref_runs if r.rc == 0 and not r.killed]
    if not ok_ref and not ref_killed:
        return f"failed: exit {case.ref_runs[-1].rc} ({case.ref_runs[-1].err})", "-", "-"
    ref = case.ref_runs[-1].wall if ref_killed else _med(ok_ref)
    rss = max(r.rss_mb for r in case.ref_runs)
    ref_col = (f"> {ref:.0f} (killed)" if ref_killed else f"{ref:.3f}") + (f", {rss:.0f} MB" if rss else "")
    ratio = f"{'> ' if ref_killed else ''}{ref / ours:.3g}x"
    if case.row == 1:
        same = _same_dp(case)
        ok = ref / ours >= 3 and (case.name != SMALLEST_DP or ours <= 0.25)
        goal = "≥ 3x" + (", ≤ 0.25 s" if case.name == SMALLEST_DP else "")
        return ref_col, ratio, f"{'yes' if ok else 'no'} ({goal}){same}"
    if case.row == 2:
        return ref_col, ratio, f"{'yes' if ours <= ref + 0.3 else 'no'} (≤ ref + 0.3 s)"
    return ref_col, ratio, f"{'yes' if ours <= 10 else 'no'} (≤ 10 s)"


def _same_dp(case: Case) -> str:
    ours = payload(case.runs[-1]).get("objective")
    ref = ([None] + [payload(r).get("maxLoad") for r in case.ref_runs if r.rc == 0 and not r.killed])[-1]
    if ours is None or ref is None:
        return ""
    return "; same optimum" if abs(ref - ours) <= 1e-6 * abs(ours) else f"; ref {ref:.6g} vs {ours:.6g}"


def machine() -> str:
    model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("model name")), "") if Path("/proc/cpuinfo").exists() else ""
    return f"{model or platform.processor() or platform.machine()}, {os.cpu_count()} cores"


def commit() -> str:
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True,
                              check=False).stdout.strip()

    dirty = git("status", "--porcelain", "--untracked-files=no")
    return git("rev-parse", "--short", "HEAD") + (" + uncommitted changes" if dirty else "")


def table(done: list[Case], notes: list[str], head: list[str]) -> str:
    lines = [*head, "", "| row | case | ours s (median, min-max) | ours peak RSS MB | objective "
             "| reference s | ratio ref / ours | target met |", "|---|---|---|---|---|---|---|---|"]
    for c in done:
        walls = [r.wall for r in c.runs]
        res = payload(c.runs[-1])
        obj = "-" if res.get("objective") is None else f"{res['objective']:.6g} {res.get('status', '')}"
        over = " (over memory)" if "memory" in str(res.get("violations")) else ""
        ref_col, ratio, ok = verdict(c)
        lines.append(f"| {c.row} | {c.name} | {_med(c.runs):.3f} ({min(walls):.3f}-{max(walls):.3f}) "
                     f"| {max(r.rss_mb for r in c.runs):.0f} | {obj}{over} | {ref_col} | {ratio} | {ok} |")
    first = {c.row: c for c in reversed(done)}
    met = [(c.row, verdict(c)[2].startswith("yes")) for c in done]
    lines += ["", *[f"* row {row}: target met in {sum(ok for r, ok in met if r == row)} of "
                    f"{sum(r == row for r, _ in met)} case(s)" for row in sorted(first)],
              "", "Commands (ours; `python` is this interpreter, `PYTHONPATH=src`):", "",
              *[f"* row {row}: `{' '.join(['python', *first[row].ours[1:]])}`" for row in sorted(first)]]
    return "\n".join([*lines, "", *[f"* {n}" for n in notes], ""])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default="1,2,3,4,5,6", help="comma-separated rows of the table")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each process (medians)")
    parser.add_argument("--quick", action="store_true", help="one repeat, the smallest case per row")
    parser.add_argument("--ref-timeout", type=float, default=120.0, help="seconds per reference run")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    rows = {int(r) for r in args.rows.split(",") if r.strip()}
    repeat = 1 if args.quick else args.repeat
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    # a user's Python caches compiled modules: without the cache every process compiles ~60
    # of ours again (0.1-0.2 s here); the warm-up run writes it
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    load0, started = os.getloadavg(), time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    done: list[Case] = []
    args.out.parent.mkdir(parents=True, exist_ok=True)

    def write(final: bool) -> str:  # after every case: a run cut short keeps what it measured
        load1 = os.getloadavg()
        head = ["# Speed table (issue 32): whole processes against their references", "",
                "- Command: `" + " ".join(["python benchmarks/speed_table.py", *sys.argv[1:]]) + "`",
                f"- Date: {started}; commit {commit()}; machine: {machine()}, Python "
                f"{platform.python_version()}",
                f"- Load average (1/5/15 min): {'/'.join(f'{x:.2f}' for x in load0)} before, "
                f"{'/'.join(f'{x:.2f}' for x in load1)} " + ("after" if final else "now (incomplete)"),
                f"- {repeat} run(s) per process, ours and the reference alternating; reference runs "
                f"killed at {args.ref_timeout:g} s; one untimed warm-up run per row first, which "
                "writes Python's compiled-module cache (PYTHONDONTWRITEBYTECODE unset for the runs)."]
        text = table(done, notes, head).replace(tmp, "$TMP")
        args.out.write_text(text)
        return text

    with tempfile.TemporaryDirectory(prefix="dnnpart-speed-") as tmp:
        todo, notes = cases(rows, args.quick, Path(tmp), env)
        for row in sorted({c.row for c in todo}):  # untimed: fills numba's cache, loads the OS's
            warm = cli(*WARM_UP[row]) if row in WARM_UP else next(c for c in todo if c.row == row).ours
            timed(warm, env, 600)
        for case in todo:
            measure(case, repeat, args.ref_timeout, env)
            done.append(case)
            print(f"row {case.row} {case.name}: {_med(case.runs):.3f} s; {' / '.join(verdict(case))}",
                  flush=True)
            write(final=False)
        print(write(final=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
