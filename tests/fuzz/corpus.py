"""Seeded corpus of malformed and adversarial inputs, by class of issue 13.

Every generator takes a ``random.Random`` and a folder and returns :class:`Case` objects: the
files it wrote, the ``dnnpart`` argv to run, and what must come out (exit code, a field the
one-line error must name). The hardening tests (``tests/hardening``) run them in-process
through :func:`dnnpart.cli.main.main`; ``python tests/fuzz/corpus.py CLASS N DIR`` writes a
corpus to disk for manual runs.
"""

from __future__ import annotations

import json
import random
import sys
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np


@dataclass
class Case:
    """One adversarial input: run ``argv``; expect ``code`` and ``must_name`` in the error."""

    label: str
    argv: list[str]
    code: int | tuple[int, ...] = 2
    must_name: str = ""
    files: list[Path] = field(default_factory=list)


def reference_graph(n: int = 4, rng: random.Random | None = None) -> dict[str, Any]:
    """A small valid dnn-partitioning graph (a chain with one skip edge)."""
    rng = rng or random.Random(0)
    nodes = [{"id": i, "supportedOnFpga": 1, "cpuLatency": rng.randint(1, 20),
              "fpgaLatency": rng.randint(1, 9), "size": rng.randint(1, 5)} for i in range(n)]
    edges = [{"sourceId": i, "destId": i + 1, "cost": rng.randint(0, 3)} for i in range(n - 1)]
    if n > 2:
        edges.append({"sourceId": 0, "destId": n - 1, "cost": 1})
    return {"maxSizePerFPGA": 100, "maxFPGAs": 2, "maxCPUs": 1, "nodes": nodes, "edges": edges}


def hybrid_plan() -> dict[str, Any]:
    """A valid hybrid plan file's content (``plan --parallel -o``), from a synthetic profile."""
    from dnnpart.devices import reference_cluster
    from dnnpart.pricing.parallel_profile import ModelProfile, UnitProfile
    from dnnpart.solvers.hybrid import search_parallel

    unit = UnitProfile(forward_s=(1.0, 0.1), backward_s=(2.0, 0.1), weights=(8e6, 1e3),
                       stash=(4e6, 1e6), working=1e6, attention_s=0.2, attention_stash=1e6,
                       boundary=1e5)
    prof = ModelProfile(prologue=unit, block=unit, epilogue=unit, n_blocks=4, heads=4)
    r = search_parallel(prof, reference_cluster(n_accelerators=4, n_cpus=0, memory_bytes=1e9),
                        global_batch=8)
    return {"format": "dnnpart.parallel-plan", "version": 1, "model": "hf:gpt2", "cluster": "c",
            **r.to_dict(), "by_devices": {"4": r.launchable.step_s}, "exports": {}, "notes": []}


def _write(folder: Path, name: str, data: Any) -> Path:
    path = folder / name
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


INT_FIELDS = ("colorClass", "layerId", "maxFPGAs", "maxCPUs")


def _huge_int(rng: random.Random, key: str) -> int:
    """Past int64 for integer fields, past float64 (309+ digits) for numbers."""
    digits = rng.randint(20, 400) if key in INT_FIELDS else rng.randint(310, 420)
    return int("9" * digits)


def _deep(rng: random.Random) -> str:
    depth = rng.randint(2_000, 200_000)
    kind = rng.choice(("[", "{\"a\":"))
    close = "]" if kind == "[" else "}"
    return kind * depth + "1" + close * depth


# -- class 1: values that used to escape as tracebacks ------------------------------------
NUMERIC_NODE_FIELDS = ("cpuLatency", "fpgaLatency", "size", "colorClass", "layerId")


def tracebacks(rng: random.Random, folder: Path, i: int) -> Case:
    """Overflowing numbers, deep nesting, file-system errors, bad .npz members, bad --set."""
    kind = rng.randrange(9)
    g = reference_graph(rng.randint(3, 8), rng)
    if kind == 0:  # an integer too big for float64/int64 in a node field
        key = rng.choice(NUMERIC_NODE_FIELDS)
        node = rng.randrange(len(g["nodes"]))
        g["nodes"][node][key] = _huge_int(rng, key)
        p = _write(folder, f"big{i}.json", g)
        return Case("huge-int", ["info", str(p)], 2, key, [p])
    if kind == 1:  # in the cluster fields or an edge
        key = rng.choice(("maxFPGAs", "maxCPUs", "maxSizePerFPGA", "cost"))
        if key == "cost":
            g["edges"][0]["cost"] = _huge_int(rng, key)
        else:
            g[key] = _huge_int(rng, key)
        p = _write(folder, f"bigc{i}.json", g)
        return Case("huge-int-cluster", ["info", str(p)], 2, key, [p])
    if kind == 2:  # deeply nested JSON (graph, plan or cluster file)
        p = _write(folder, f"deep{i}.json", _deep(rng))
        g_path = _write(folder, f"ok{i}.json", g)
        which = rng.randrange(3)
        if which == 0:
            return Case("deep-graph", ["info", str(p)], 2, str(p), [p])
        if which == 1:
            return Case("deep-plan", ["evaluate", str(g_path), str(p)], 2, str(p), [p, g_path])
        return Case("deep-cluster", ["info", str(g_path), "--cluster", str(p)], 2, str(p), [p, g_path])
    if kind == 3:  # deep YAML cluster
        p = _write(folder, f"deep{i}.yaml", rng.choice(("[", "{a: ", "- [")) * rng.randint(201, 50_000))
        g_path = _write(folder, f"ok{i}.json", g)
        return Case("deep-yaml", ["info", str(g_path), "--cluster", str(p)], 2, str(p), [p, g_path])
    if kind == 4:  # --out into a missing folder or onto a folder
        g_path = _write(folder, f"ok{i}.json", g)
        target = rng.choice((str(folder / f"missing{i}" / "plan.json"), str(folder), ""))
        method = rng.choice(("dp", "greedy", "one-accelerator", "dpl"))
        return Case("bad-out", ["solve", str(g_path), "-m", method, "-o", target], 2,
                    "--out" if not target else target, [g_path])
    if kind == 5:  # cluster or graph path that is a folder or missing
        g_path = _write(folder, f"ok{i}.json", g)
        sub = folder / f"dir{i}.npz"
        sub.mkdir(exist_ok=True)
        which = rng.randrange(4)
        if which == 0:
            return Case("graph-folder", ["info", str(sub)], 2, str(sub), [g_path])
        if which == 1:
            return Case("cluster-folder", ["info", str(g_path), "--cluster", str(sub)], 2, str(sub))
        if which == 2:
            missing = str(folder / f"nothere{i}.yaml")
            return Case("cluster-missing", ["info", str(g_path), "--cluster", missing], 2, missing)
        missing = str(folder / f"nothere{i}.npz")
        return Case("npz-missing", ["info", missing], 2, missing)
    if kind == 6:  # an .npz whose member is not an array
        p = folder / f"bad{i}.npz"
        with zipfile.ZipFile(p, "w") as z:
            z.writestr("format.npy", rng.choice((b"not an array", b"\x93NUMPY\x01\x00garbage",
                                                 bytes(rng.randrange(256) for _ in range(64)))))
        cluster = _write(folder, f"cl{i}.json", {"preset": "reference", "accelerators": 2, "cpus": 1})
        return Case("npz-member", ["info", str(p), "--cluster", str(cluster)], 2, "format", [p])
    if kind == 7:  # a --set value of the wrong type for a method that takes the option
        g_path = _write(folder, f"ok{i}.json", g)
        method, key = rng.choice((("local-search", "restarts"), ("local-search", "seed"),
                                  ("brute-force", "max_assignments"), ("dp", "max_ideals"),
                                  ("dp", "replication"), ("ip", "gap"), ("ip", "threads"),
                                  ("expert", "fill_by_colocation"), ("graph-partitioner", "tool")))
        value = rng.choice(("abc", "1.5", "-3", "1e400", "nan", "[1]", "9" * 30, "", "true"))
        return Case("set-type", ["solve", str(g_path), "-m", method, "--set", f"{key}={value}"],
                    (0, 2), key, [g_path])
    # a graph file that is not a regular file or not text
    p = _write(folder, f"bin{i}.json", "")
    p.write_bytes(bytes(rng.randrange(256) for _ in range(rng.randint(1, 200))))
    return Case("binary", ["info", str(p)], 2, str(p), [p])


# -- class 2: sizes ------------------------------------------------------------------------
def sizes(rng: random.Random, folder: Path, i: int) -> Case:
    """Device counts past the cap, zip bombs, oversized members."""
    kind = rng.randrange(4)
    if kind == 0:
        g = reference_graph(rng.randint(2, 6), rng)
        key = rng.choice(("maxFPGAs", "maxCPUs"))
        g[key] = rng.choice((5_000, 10_000, 10**6, 10**9, 2**62))
        p = _write(folder, f"dev{i}.json", g)
        return Case("devices", ["info", str(p)], 2, "maxFPGAs + maxCPUs", [p])
    if kind == 1:
        g = _write(folder, f"ok{i}.json", reference_graph(3, rng))
        count = rng.choice((5_000, 10**5, 10**9))
        which = rng.randrange(3)
        if which == 0:
            c = {"preset": "reference", "accelerators": count, "cpus": 1}
            where = "accelerators + cpus"
        elif which == 1:
            c = {"preset": "two-level", "groups": count, "accelerators_per_group": 2,
                 "intra_bandwidth": 1e9, "inter_bandwidth": 1e8}
            where = "groups x accelerators"
        else:
            c = {"devices": [{"name": "a", "kind": "accelerator", "count": count}]}
            where = "devices[0].count"
        p = _write(folder, f"cl{i}.json", c)
        return Case("cluster-devices", ["info", str(g), "--cluster", str(p)], 2, where, [p, g])
    if kind == 2:  # zip bomb: a small compressed member that claims (and holds) huge data
        p = folder / f"bomb{i}.npz"
        n = rng.choice((1 << 28, 1 << 29, 1 << 31))
        header = np.lib.format.header_data_from_array_1_0(np.zeros(1))
        header["shape"] = (n,)
        with zipfile.ZipFile(p, "w", compression=zipfile.ZIP_DEFLATED) as z:
            with z.open("format.npy", "w") as member:
                np.lib.format.write_array_header_1_0(member, header)
                member.write(b"\0" * rng.randint(0, 1 << 16))
        cluster = _write(folder, f"cl{i}.json", {"preset": "reference", "accelerators": 2, "cpus": 1})
        return Case("zip-bomb", ["info", str(p), "--cluster", str(cluster)], 2, "format", [p])
    # the DP's memory estimate: isolated nodes have 2**n ideals
    n = rng.randint(40, 400)
    g = {"maxSizePerFPGA": 1e9, "maxFPGAs": 2, "maxCPUs": 1, "edges": [],
         "nodes": [{"id": j, "supportedOnFpga": 1, "cpuLatency": 1, "fpgaLatency": 1, "size": 1}
                   for j in range(n)]}
    p = _write(folder, f"iso{i}.json", g)
    # small budgets keep the corpus fast; the default budget is measured in the README
    cap = f"max_memory_bytes={rng.choice((10**5, 10**6, 3 * 10**6, 10**7))}"
    return Case("dp-memory", ["solve", str(p), "-m", "dp", "--set", cap], 1, "ideals", [p])


# -- class 5: plan files and printed names ------------------------------------------------
def code_plan(rng: random.Random, folder: Path, i: int, marker_module: str) -> Case:
    """A plan whose model spec would import (and run) a module."""
    callable_ = rng.choice(("main", "build", "x", "sys:exit", "os:getcwd"))
    spec = rng.choice(("module:", " module:", "module:")) + f"{marker_module}:{callable_}"
    plan = {"format": "dnnpart.plan", "version": 1, "devices": [],
            "model": {"spec": spec, "cluster": "2xA100"}}
    p = _write(folder, f"plan{i}.json", plan)
    command = rng.choice((["export", str(p), "--format", "placement", "-o", str(folder / "x.json")],
                          ["export", str(p), "--format", "pipelining", "-o", str(folder / "pipe")],
                          ["run", str(p)], ["simulate", str(p)]))
    return Case("code-plan", command, 2, "model.spec", [p])


CONTROL = ["\x1b[2J", "\x1b]0;pwned\x07", "\r", "\x08", "\x00", "\x9b31m", "\x1b[31m", "\u202e"]


def control_names(rng: random.Random, folder: Path, i: int) -> tuple[Case, str]:
    """A cluster file whose device names carry terminal control characters."""
    bad = "".join(rng.choice(CONTROL) + rng.choice("abc") for _ in range(rng.randint(1, 4)))
    devices = [{"name": f"acc{bad}", "kind": "accelerator", "memory_bytes": 1e9},
               {"name": "cpu", "kind": "cpu"}]
    c = _write(folder, f"names{i}.json", {"devices": devices})
    g = _write(folder, f"ok{i}.json", reference_graph(4, rng))
    method = rng.choice(("dp", "greedy", "one-accelerator"))
    return Case("names", ["solve", str(g), "--cluster", str(c), "-m", method], (0, 1)), bad


# -- class 6: silent nonsense -------------------------------------------------------------
def nonsense(rng: random.Random, folder: Path, i: int) -> Case:
    """Sums overflowing to inf, duplicate ids, empty --out, bogus reproduce columns."""
    kind = rng.randrange(4)
    if kind == 0:
        g = reference_graph(rng.randint(3, 8), rng)
        key = rng.choice(("cpuLatency", "fpgaLatency", "size"))
        for node in g["nodes"]:
            node[key] = rng.choice((1e308, 1.7e308, 9e307))
        p = _write(folder, f"inf{i}.json", g)
        method = rng.choice(("greedy", "graph-partitioner", "dp", "one-accelerator", "dpl"))
        return Case("overflow", ["solve", str(p), "-m", method], 2, "sum past", [p])
    if kind == 1:
        from dnnpart.io.native import save_graph
        from dnnpart.testing import chain_graph

        n = rng.randint(2, 12)
        graph = chain_graph(n)
        ids = np.arange(n, dtype=np.int64)
        a, b = rng.sample(range(n), 2)
        ids[a] = ids[b]
        object.__setattr__(graph, "original_ids", ids)
        p = folder / f"dup{i}.npz"
        save_graph(graph, p)
        cluster = _write(folder, f"cl{i}.json", {"preset": "reference", "accelerators": 2, "cpus": 1})
        return Case("dup-ids", ["info", str(p), "--cluster", str(cluster)], 2, "original_ids", [p])
    if kind == 2:
        g = _write(folder, f"ok{i}.json", reference_graph(4, rng))
        blank = rng.choice(("", " ", "   "))
        return Case("empty-out", ["solve", str(g), "-m", "dp", "-o", blank], 2, "--out", [g])
    bogus = rng.choice(("bogus", "dpp", "IP", "scoth", "x" * rng.randint(1, 30)))
    return Case("reproduce-methods", ["reproduce", "tarnawski2020", "--workloads", str(folder),
                                      "--methods", bogus, "--out", str(folder / "r")], 2, "")


GENERATORS: dict[str, Callable[[random.Random, Path, int], Case]] = {
    "tracebacks": tracebacks, "sizes": sizes, "nonsense": nonsense,
}


def generate(kind: str, n: int, folder: Path, seed: int = 13) -> list[Case]:
    """``n`` cases of class ``kind``, reproducible from ``seed``."""
    rng = random.Random(seed)
    return [GENERATORS[kind](rng, folder, i) for i in range(n)]


if __name__ == "__main__":
    kind, count, out = sys.argv[1], int(sys.argv[2]), Path(sys.argv[3])
    out.mkdir(parents=True, exist_ok=True)
    for case in generate(kind, count, out):
        print(case.label, " ".join(case.argv))


# --- issue 30, item 3: sizes bounded before allocation (appended) ---------------------------


def bounds(rng: random.Random, folder: Path, i: int) -> Case:
    """A size past its documented bound on one surface (model specs, shapes, counts); the
    bounds come from the modules that own them, so new fields join the corpus."""
    from dnnpart.limits import MAX_BATCH, MAX_MICROBATCHES, max_threads
    from dnnpart.zoo import MAX_BERT_LAYERS
    from dnnpart.zoo.captured import PARAMETER_BOUNDS, WORKLOADS

    stages = _write(folder, f"st{i}.json", {"compute": [0.1, 0.2], "param_bytes": [0, 0],
                                            "comm_bytes": [[0, 1, 5.0]], "replicas": 1})
    kind = rng.choice(["synthetic-nodes", "synthetic-edges", "bert", "workload", "microbatches",
                       "batch", "threads", "seed", "hf"])
    if kind == "synthetic-nodes":
        n = rng.randint(3_000_000, 50_000_000)
        return Case(kind, ["info", f"zoo:synthetic:nodes={n}"], must_name="nodes")
    if kind == "synthetic-edges":
        n = rng.randint(2, 300)
        return Case(kind, ["info", f"zoo:synthetic:nodes={n},edges={n * n + rng.randint(0, 10**8)}"],
                    must_name="edges")
    if kind == "bert":
        return Case(kind, ["info", f"zoo:bert-{MAX_BERT_LAYERS + rng.randint(1, 10**9)}"], must_name="layers")
    if kind == "workload":
        name = rng.choice(sorted(WORKLOADS))
        keys = [k for k in WORKLOADS[name].defaults if k in PARAMETER_BOUNDS]
        key = rng.choice(keys)
        high = PARAMETER_BOUNDS[key][1]
        return Case(kind, ["info", f"zoo:{name}:{key}={high + rng.randint(1, 10**12)}"], must_name=key)
    if kind == "microbatches":
        value = rng.choice([0, -rng.randint(1, 9), MAX_MICROBATCHES + rng.randint(1, 10**9)])
        return Case(kind, ["evaluate", "zoo:bert-3", "--objective", "pipeline", "--microbatches",
                           str(value), _write(folder, f"p{i}.json", {}).as_posix()],
                    must_name="--microbatches")
    if kind == "batch":
        value = rng.choice([0, MAX_BATCH + 1, 2**70, 2**64 + rng.randint(0, 99)])
        return Case(kind, ["info", "builtin:alexnet", "--objective", "iteration", "--cluster", "4xV100",
                           "--batch", str(value)], must_name="--batch")
    if kind == "threads":
        return Case(kind, ["map", str(stages), "--cluster", "2xA100", "--threads",
                           str(max_threads() + rng.randint(1, 10**6))], must_name="--threads")
    if kind == "seed":
        return Case(kind, ["map", str(stages), "--cluster", "2xA100", "--seed",
                           str(-rng.randint(1, 2**63))], must_name="--seed")
    field = rng.choice(["n_layer", "n_head", "n_embd", "vocab_size", "n_positions"])
    value = rng.choice([-rng.randint(1, 10**9), 0, 10**9 + rng.randint(0, 10**9)])
    return Case(kind, ["info", f"hf:gpt2:{field}={value}"], must_name=field)
