"""``dnnpart reproduce parmesan``: the shapes of paper 4's Tables 1 and 2, beside its figures.

**Table 1** (two-level hierarchy, 16 devices as 4 machines x 4, ``(S, R)`` in ``{(4,4), (8,2),
(16,1)}``, 4 micro-batches, recomputation on, 1F1B): simulated throughput of "PipeDream + CS"
(1.0x), "+ our map" (PipeDream's partition mapped by Parmesan), "Ours" (``parmesan``) and
"paper alone" (``parmesan`` with ``paper_only=true``: the paper's flow, one candidate per pair),
plus the partition quality (Eq. 3 max stage time) of PipeDream's layer-level DP and ours.
"+ our map" >= 1.0 and "Ours" >= 1.0 hold by construction (CS, and PipeDream's partition with
CS, are among their candidates and the simulator keeps the best), so the tables label them so;
"paper alone" can fall below 1.0. Workloads (micro-batch of 8 samples, paper 4's mBS for BERT):
the zoo's training graphs ``resnet152`` (layer graph) and BERT-Large (the zoo's operator-level
BERT at 24 layers, hidden 1024, 16 heads, sequence 128: built from shapes, nothing downloaded)
and Swin-Large (``hf:swin:embed_dim=192,depths=[2,2,18,2],num_heads=[6,12,24,48]``, 224x224,
the autograd training graph of the ``hf`` frontend, random weights from the config; needs the
``hf`` extra, else its rows are reported as not available). ``--quick`` uses ResNet-50 and
BERT-6.

**Table 2** (speedup of our mapping over CS on the SemanticFPN-like graph of
:mod:`dnnpart.zoo.semantic_fpn`, ResNet-50 backbone, 512x512, training): 2-D mesh/torus for
``D`` in {64, 256}, 3-D for {64, 512}, ``random_blk_1/2`` and ``uniform_dist`` for all three,
three ``(S, R)`` per ``D``. One partition per ``(D, S, R)`` (phase 1 does not see the
topology), mapped by Parmesan and by CS; the speedup is the ratio of simulated times per
sample (the pipeline objective). Two of ours per cell: the paper's mapper alone (its Eq. 5
optimum under the Sec. 5.2 rule's instantiation; can be below 1.0) and the best simulated of
``parmesan``'s mapping candidates (>= 1.0 by construction: CS is one of them), with the paper
mapper's Eq. 5 ratio beside them (>= 1.0 by construction too: CS is the search's starting
point). Grids route by ``store-and-forward`` (25 GB/s links, 1 us per hop), the random complete
topologies by ``direct`` (``docs/topologies.md``). ``D = 512`` only in the full run;
``--quick`` maps a ResNet-18-backbone FPN (128x128) onto 16-device versions of the same
topologies.
"""

from __future__ import annotations

import dataclasses
import json
import math
import statistics
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from dnnpart.evaluate import evaluate
from dnnpart.graph.core import Graph
from dnnpart.io.output_files import write_output
from dnnpart.problem import Objective, Problem

if TYPE_CHECKING:
    from dnnpart.zoo.ops import OpGraph

Notify = Callable[[str], None]

PAIRS_T1 = ((4, 4), (8, 2), (16, 1))
#: Paper 4, Table 1 (speedup over PipeDream + CS): row -> model -> (S, R) -> speedup.
PAPER_TABLE1: dict[str, dict[str, dict[tuple[int, int], float]]] = {
    "+ our map": {"resnet152": {(4, 4): 7.6, (8, 2): 2.4, (16, 1): 1.0},
                  "bert-large": {(4, 4): 1.0, (8, 2): 1.0, (16, 1): 1.0},
                  "swin-large": {(4, 4): 2.5, (8, 2): 1.4, (16, 1): 1.2}},
    "ours": {"resnet152": {(4, 4): 8.1, (8, 2): 2.6, (16, 1): 1.2},
             "bert-large": {(4, 4): 1.1, (8, 2): 1.1, (16, 1): 1.0},
             "swin-large": {(4, 4): 2.5, (8, 2): 1.6, (16, 1): 1.3}},
}
#: Paper 4, Table 2 columns (D, S, R) and rows (None: the paper's "-").
T2_COLUMNS = ((64, 4, 16), (64, 8, 8), (64, 16, 4), (256, 4, 64), (256, 8, 32), (256, 16, 16),
              (512, 4, 128), (512, 8, 64), (512, 16, 32))
PAPER_TABLE2: dict[str, tuple[float | None, ...]] = {
    "mesh2d": (1.1, 1.0, 2.7, 5.6, 2.5, 1.4, None, None, None),
    "torus2d": (1.1, 1.0, 2.6, 1.6, 1.5, 1.0, None, None, None),
    "mesh3d": (1.0, 1.1, 1.1, None, None, None, 1.3, 1.8, 1.2),
    "torus3d": (1.0, 1.1, 1.0, None, None, None, 1.1, 1.0, 2.6),
    "random_blk_1": (1.5, 1.8, 1.5, 1.1, 1.4, 1.9, 1.1, 1.7, 1.9),
    "random_blk_2": (2.1, 1.6, 3.0, 1.4, 1.3, 3.7, 1.5, 1.6, 4.5),
    "uniform_dist": (33.5, 11.4, 6.7, 8.1, 5.1, 7.2, 23.3, 8.9, 5.5),
}
#: Samples per micro-batch (one execution of the graph): paper 4 uses mBS = 8 (BERT) and 16
#: (Swin); the batch-1 zoo graphs would make every workload all-reduce-bound.
MICRO_BATCH = 8
GRID_SPEC = "bw=25e9,latency=1e-6,routing=store-and-forward"


def table2_topology(name: str, d: int) -> str | None:
    """The ``--cluster`` spec of a Table 2 topology with ``d`` devices (``None``: no such grid).

    Examples
    --------
    >>> table2_topology("mesh2d", 64), table2_topology("mesh2d", 512)
    ('mesh2d:x=8,y=8,bw=25e9,latency=1e-6,routing=store-and-forward', None)
    >>> table2_topology("torus3d", 16)
    'torus3d:x=2,y=2,z=4,bw=25e9,latency=1e-6,routing=store-and-forward'
    """
    two = {16: (4, 4), 64: (8, 8), 256: (16, 16)}
    three = {16: (2, 2, 4), 64: (4, 4, 4), 512: (8, 8, 8)}
    if name in ("mesh2d", "torus2d"):
        if d not in two:
            return None
        x, y = two[d]
        return f"{name}:x={x},y={y},{GRID_SPEC}"
    if name in ("mesh3d", "torus3d"):
        if d not in three:
            return None
        x, y, z = three[d]
        return f"{name}:x={x},y={y},z={z},{GRID_SPEC}"
    return f"{name}:n={d},seed=0,routing=direct"


@dataclass
class ParmesanReport:
    """What :func:`reproduce_parmesan` produced."""

    table1: list[dict[str, Any]] = field(default_factory=list)
    table2: list[dict[str, Any]] = field(default_factory=list)
    ablation: list[dict[str, Any]] = field(default_factory=list)
    agreement: list[dict[str, Any]] = field(default_factory=list)
    files: list[Path] = field(default_factory=list)
    wall_time_s: float = 0.0


def _objective() -> Objective:
    return Objective(kind="pipeline", microbatches=4, recompute=True, schedule="1f1b")


#: Swin-Large (Liu et al., 2021): embedding 192, depths (2, 2, 18, 2), heads (6, 12, 24, 48).
SWIN_LARGE = "hf:swin:embed_dim=192,depths=[2,2,18,2],num_heads=[6,12,24,48]"


def _swin_large(batch: int) -> Graph:
    """Swin-L's autograd training graph (hf frontend, meta weights, nothing downloaded)."""
    from dnnpart.workflow import import_model

    return import_model(SWIN_LARGE, training=True, input_shapes=[(batch, 3, 224, 224)]).imported.graph


def with_weights(ops: OpGraph, *, training: bool = True) -> Graph:
    """The zoo graph of ``ops`` with its weights as ``param_bytes`` and its activations as
    ``output_bytes``.

    The zoo's graphs carry only ``memory_bytes`` (weights + output activation per node), which
    the simulator and phase 1 then read as the weights a stage all-reduces: ResNet-50 at 8
    samples per micro-batch would all-reduce 2.6 GB instead of its 0.1 GB of weights, and every
    workload would look all-reduce-bound (which flattened Table 1's mapping gain to 1.00x).

    Examples
    --------
    >>> from dnnpart.zoo.resnet import resnet_ops
    >>> g = with_weights(resnet_ops(50, batch=8))
    >>> round(float(g.param_bytes.sum()) / 1e6)   # ResNet-50: 25.6 M parameters (+ BN buffers)
    102
    """
    from dnnpart.graph.training import add_backward_pass

    g = ops.to_graph(training=False)
    g = dataclasses.replace(g, param_bytes=np.array([op.weight_bytes for op in ops.ops]),
                            output_bytes=np.array([op.output_bytes for op in ops.ops]))
    return add_backward_pass(g) if training else g


def _table1_graphs(quick: bool, notify: Notify) -> list[tuple[str, str, Graph | None]]:
    from dnnpart.errors import MissingDependencyError
    from dnnpart.zoo.bert import bert_ops
    from dnnpart.zoo.resnet import resnet_ops

    b = MICRO_BATCH
    if quick:
        return [("resnet152", "ResNet-50 (quick)", with_weights(resnet_ops(50, batch=b))),
                ("bert-large", "BERT-6 (quick)", with_weights(bert_ops(6, batch=b)))]
    out: list[tuple[str, str, Graph | None]] = [
        ("resnet152", "ResNet-152 (zoo, layer graph)", with_weights(resnet_ops(152, batch=b))),
        ("bert-large", "BERT-Large (zoo, 24 x 1024, 16 heads)",
         with_weights(bert_ops(24, hidden=1024, heads=16, batch=b)))]
    try:
        out.append(("swin-large", "Swin-L (hf, autograd)", _swin_large(b)))
    except MissingDependencyError as exc:
        notify(f"table 1 Swin-L: not available ({exc})")
        out.append(("swin-large", "Swin-L (needs the hf extra)", None))
    return out


def run_table1(*, quick: bool, time_limit: float, notify: Notify) -> list[dict[str, Any]]:
    """One row per (model, S, R): simulated times, speedups, Eq. 3 quality, paper figures."""
    from dnnpart.cost import resolve_cluster
    from dnnpart.solvers import solve

    cluster = resolve_cluster("two-level:nodes=4,gpus=4").cluster
    # ``time_limit`` is per mapping search; a whole method runs phase 1, several searches and
    # the simulator, so it gets a generous cap of its own (under load, the per-search limit
    # alone left the method without a plan; so did 10x it for Swin-L at load 9 on 2 cores);
    # the quick graphs partition in about a second, so their searches get less
    method_limit = max(10.0, 10 * time_limit) if quick else max(30.0, 20 * time_limit)
    rows: list[dict[str, Any]] = []
    for key, label, graph in _table1_graphs(quick, notify):
        if graph is None:
            rows += [{"model": key, "graph": label, "S": s_n, "R": r_n, "available": False,
                      "paper_our_map": PAPER_TABLE1["+ our map"][key][(s_n, r_n)],
                      "paper_ours": PAPER_TABLE1["ours"][key][(s_n, r_n)]}
                     for s_n, r_n in PAIRS_T1]
            continue
        problem = Problem(graph=graph, cluster=cluster, objective=_objective(), name=label)
        for s_n, r_n in PAIRS_T1:
            t0 = time.perf_counter()
            pd = solve(problem, "pipedream", stages=s_n, replicas=r_n)
            pd_map = solve(problem, "pipedream", stages=s_n, replicas=r_n, mapping="parmesan",
                           time_limit=method_limit)
            ours = solve(problem, "parmesan", stages=s_n, replicas=r_n, time_limit=method_limit)
            alone = solve(problem, "parmesan", stages=s_n, replicas=r_n, paper_only=True,
                          time_limit=method_limit)
            row = {
                "model": key, "graph": label, "S": s_n, "R": r_n, "available": True,
                "pipedream_cs": pd.objective, "pipedream_our_map": pd_map.objective,
                "ours": ours.objective, "paper_only": alone.objective,
                "speedup_our_map": _ratio(pd.objective, pd_map.objective),
                "speedup_ours": _ratio(pd.objective, ours.objective),
                "speedup_paper_only": _ratio(pd.objective, alone.objective),
                "ours_status": ours.status.value, "paper_only_status": alone.status.value,
                "eq3_paper_only": alone.stats.get("eq3_max_stage_time"),
                "paper_only_mapping": alone.stats.get("mapping_pick"),
                "ours_provenance": ours.provenance,
                "eq3_pipedream": pd.stats.get("eq3_max_stage_time"),
                "eq3_ours": ours.stats.get("eq3_max_stage_time"),
                "eq3_op_level": ours.stats.get("eq3_op_level"),
                "eq3_layer_level": ours.stats.get("eq3_layer_level"),
                "ours_hyper_ops": ours.stats.get("hyper_ops"),
                "ours_coarsenings": ours.stats.get("coarsenings"),
                "pipedream_lattice": pd.stats.get("lattice"),
                "ours_partition_from": ours.stats.get("partition_from"),
                "ours_mapping": ours.stats.get("mapping_pick"),
                "paper_our_map": PAPER_TABLE1["+ our map"][key][(s_n, r_n)],
                "paper_ours": PAPER_TABLE1["ours"][key][(s_n, r_n)],
                "seconds": time.perf_counter() - t0,
            }
            rows.append(row)
            notify(f"table 1 {label} ({s_n},{r_n}): + our map "
                   f"{_x(_ratio(pd.objective, pd_map.objective))}, ours "
                   f"{_x(_ratio(pd.objective, ours.objective))}, paper alone "
                   f"{_x(_ratio(pd.objective, alone.objective))}")
    return rows


#: Table 1's mapping ablation: inter-machine bandwidths (intra stays 150 GB/s).
ABLATION_INTER = (12.5e9, 1.25e9, 0.125e9)


def run_mapping_ablation(*, quick: bool, time_limit: float, notify: Notify) -> list[dict[str, Any]]:
    """Where "+ our map" gains: PipeDream's partition of ResNet mapped by CS, by the paper's
    mapper alone (the Sec. 5.2 rule's Eq. 5 optimum) and by ours (default: the simulator's pick
    of the candidates, then its swap search), switching one modelling choice at a time: the
    weights a stage all-reduces (the zoo's ``memory_bytes`` vs the real weights), samples per
    micro-batch, and the inter-machine bandwidth of the 4 x 4 hierarchy."""
    from dnnpart.cost import resolve_cluster
    from dnnpart.solvers import solve
    from dnnpart.zoo.resnet import resnet, resnet_ops

    depth, batches = (50, (MICRO_BATCH,)) if quick else (152, (MICRO_BATCH, 32))
    inters = ABLATION_INTER[:2] if quick else ABLATION_INTER
    pairs = ((4, 4),) if quick else ((4, 4), (8, 2))
    limit = max(10.0, 10 * time_limit)
    rows: list[dict[str, Any]] = []
    for mb in batches:
        graphs = {"memory_bytes (zoo)": resnet(depth, batch=mb, training=True),
                  "weights": with_weights(resnet_ops(depth, batch=mb))}
        for weights, graph in graphs.items():
            for inter in inters:
                spec = f"two-level:nodes=4,gpus=4,intra=150e9,inter={inter:g}"
                problem = Problem(graph=graph, cluster=resolve_cluster(spec).cluster,
                                  objective=_objective(), name=f"ResNet-{depth}")
                for s_n, r_n in pairs:
                    cs = solve(problem, "pipedream", stages=s_n, replicas=r_n)
                    ours = solve(problem, "pipedream", stages=s_n, replicas=r_n,
                                 mapping="parmesan", time_limit=limit)
                    rule = ours.stats.get("rule_instantiation")
                    paper = ours.stats.get(f"simulated_parmesan-{rule}", math.inf)
                    row = {"model": f"ResNet-{depth}", "micro_batch": mb, "weights": weights,
                           "inter": inter, "S": s_n, "R": r_n, "rule": rule,
                           "simulated_cs": cs.objective, "simulated_paper_map": paper,
                           "simulated_our_map": ours.objective,
                           "simulated_eq6": ours.stats.get("simulated_parmesan-p2p"),
                           "simulated_eq7": ours.stats.get("simulated_parmesan-allreduce"),
                           "speedup_paper_map": _ratio(cs.objective, paper),
                           "speedup_our_map": _ratio(cs.objective, ours.objective),
                           "our_pick": ours.stats.get("mapping_pick")}
                    rows.append(row)
                    notify(f"mapping ablation ResNet-{depth} mb={mb} {weights} inter="
                           f"{inter / 1e9:g} GB/s ({s_n},{r_n}): paper's mapper "
                           f"{_x(row['speedup_paper_map'])}, ours {_x(row['speedup_our_map'])}")
    return rows


def ablation_markdown(rows: list[dict[str, Any]]) -> str:
    """Markdown of the mapping ablation: speedups over CS on PipeDream's partition."""
    lines = ["| model | samples / micro-batch | all-reduced bytes | inter GB/s | (S,R) | "
             "Sec. 5.2 rule | paper's mapper alone | Eq. 6 optimum | Eq. 7 optimum | "
             "ours (default) | ours picked | paper (ResNet-152) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        paper = PAPER_TABLE1["+ our map"]["resnet152"].get((r["S"], r["R"]))
        cs = r["simulated_cs"]
        lines.append(f"| {r['model']} | {r['micro_batch']} | {r['weights']} "
                     f"| {r['inter'] / 1e9:g} | ({r['S']},{r['R']}) | {r['rule']} "
                     f"| {_x(r['speedup_paper_map'])} "
                     f"| {_x(_ratio(cs, r.get('simulated_eq6') or math.inf))} "
                     f"| {_x(_ratio(cs, r.get('simulated_eq7') or math.inf))} "
                     f"| {_x(r['speedup_our_map'])} | {r['our_pick']} | {_x(paper)} |")
    return "\n".join(lines) + "\n"


#: Objectives whose ranking of mappings is compared with the simulator's.
AGREEMENT_KINDS = ("p2p", "allreduce", "rule", "full", "sim-swaps")


def run_agreement(*, quick: bool, time_limit: float, notify: Notify,
                  n_random: int = 16) -> list[dict[str, Any]]:
    """Spearman rank correlation between the simulated time per sample and each mapping
    objective (Eq. 6, Eq. 7, the Sec. 5.2 rule's pick, the "theoretically exact" sum
    ``c_u + c_m + c_AR``, and ours: the simulated objective of the swap search) over CS,
    p2p-first, both Eq. 5 optima, the swap search's result and ``n_random`` seeded random
    mappings of one op-level partition of ResNet (weights as ``param_bytes``), on two-level
    4 x 4 hierarchies with slow inter-machine links."""
    from scipy.stats import spearmanr

    from dnnpart.cost import resolve_cluster
    from dnnpart.pricing.pairs import Topology
    from dnnpart.pricing.stages import max_stage_time
    from dnnpart.solvers.parmesan.baselines import cs_mapping, p2p_first_mapping, random_mapping
    from dnnpart.solvers.parmesan.cost import choose_instantiation
    from dnnpart.solvers.parmesan.phase1 import partition_ops, pipeline_stages
    from dnnpart.solvers.parmesan.search import map_stages
    from dnnpart.solvers.parmesan.simscore import MappingSimulator, swap_search
    from dnnpart.solvers.parmesan.solver import memory_model, plan_from_mapping, stages_in_seconds
    from dnnpart.zoo.resnet import resnet_ops

    depth = 50 if quick else 152
    graph = with_weights(resnet_ops(depth, batch=MICRO_BATCH))
    rows: list[dict[str, Any]] = []
    for inter in ABLATION_INTER[:1] if quick else ABLATION_INTER[:2]:
        spec = f"two-level:nodes=4,gpus=4,intra=150e9,inter={inter:g}"
        cluster = resolve_cluster(spec).cluster
        problem = Problem(graph=graph, cluster=cluster, objective=_objective())
        topo = Topology.from_cluster(cluster)
        for s_n, r_n in PAIRS_T1:
            mem = memory_model(problem, 2.0, replicas=r_n, n_devices=s_n * r_n)
            part = partition_ops(graph, s_n, s_n * r_n, replicas=r_n, k=128, memory=mem)
            if part.stage_of is None or part.atom_stage is None:
                continue
            st = stages_in_seconds(pipeline_stages(part.dag, part.atom_stage, r_n, memory=mem),
                                   cluster.time_unit_s)
            maps = {"cs": cs_mapping(st), "p2p-first": p2p_first_mapping(st)}
            for kind in ("p2p", "allreduce"):
                res = map_stages(st, topo, instantiation=kind,
                                 time_limit=time_limit)
                if res.device_of is not None:
                    maps[f"eq5-{kind}"] = res.device_of
            sim = MappingSimulator(problem, part.stage_of, maps["cs"], plan_from_mapping)
            start = min(maps.values(), key=sim.score)
            maps["sim-swaps"], _, _ = swap_search(sim.score, start, time_limit=10 * time_limit)
            for i in range(n_random // 2 if quick else n_random):
                maps[f"random-{i}"] = random_mapping(st, i)
            rule = choose_instantiation(st)
            simulated = [evaluate(problem, plan_from_mapping(problem, part.stage_of, m)).objective
                         for m in maps.values()]
            scores = {k: [sim.score(m) if k == "sim-swaps" else max_stage_time(
                st, topo, m, rule if k == "rule" else k)  # type: ignore[arg-type]
                for m in maps.values()] for k in AGREEMENT_KINDS}
            row: dict[str, Any] = {"model": f"ResNet-{depth}", "inter": inter, "S": s_n,
                                   "R": r_n, "rule": rule, "mappings": len(maps)}
            for k, v in scores.items():
                with warnings.catch_warnings():  # Eq. 7 is constant without replicas
                    warnings.simplefilter("ignore")
                    rho = spearmanr(simulated, v).statistic
                row[f"rho_{k}"] = None if not math.isfinite(rho) else float(rho)
            named = dict(zip(maps, simulated, strict=True))
            row.update({f"simulated_{k}": named.get(k) for k in
                        ("cs", "p2p-first", "eq5-p2p", "eq5-allreduce", "sim-swaps")})
            rows.append(row)
            notify(f"agreement ResNet-{depth} inter={inter / 1e9:g} GB/s ({s_n},{r_n}): rho "
                   + ", ".join(f"{k} {_g(row[f'rho_{k}'])}" for k in AGREEMENT_KINDS))
    return rows


def agreement_markdown(rows: list[dict[str, Any]]) -> str:
    """Markdown of :func:`run_agreement`: rank correlations and the named mappings' times."""
    lines = ["| model | inter GB/s | (S,R) | rule | mappings | rho Eq. 6 | rho Eq. 7 | rho rule "
             "| rho c_u+c_m+c_AR | rho ours (simulated) [1 by construction] | sim CS "
             "| sim p2p-first | sim Eq. 6 opt "
             "| sim Eq. 7 opt | sim ours |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['model']} | {r['inter'] / 1e9:g} | ({r['S']},{r['R']}) | {r['rule']} "
                     f"| {r['mappings']} | "
                     + " | ".join(_rho(r[f"rho_{k}"]) for k in AGREEMENT_KINDS) + " | "
                     + " | ".join(_g(r[f"simulated_{k}"]) for k in
                                  ("cs", "p2p-first", "eq5-p2p", "eq5-allreduce", "sim-swaps"))
                     + " |")
    return "\n".join(lines) + "\n"


def _rho(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}"


def _fpn(quick: bool) -> Graph:
    from dnnpart.zoo.semantic_fpn import semantic_fpn

    b = MICRO_BATCH
    return semantic_fpn(18, image=128, batch=b, training=True) if quick else semantic_fpn(
        50, image=512, batch=b, training=True)


def run_table2(*, quick: bool, time_limit: float, notify: Notify,
               only_d: tuple[int, ...] | None = None) -> list[dict[str, Any]]:
    """One row per (topology, D, S, R): our mapping vs CS on the same partition."""
    from dnnpart.cost import resolve_cluster
    from dnnpart.solvers.parmesan import Topology
    from dnnpart.solvers.parmesan.baselines import cs_mapping
    from dnnpart.solvers.parmesan.cost import choose_instantiation
    from dnnpart.solvers.parmesan.phase1 import partition_ops, pipeline_stages
    from dnnpart.solvers.parmesan.solver import (
        map_with,
        memory_model,
        plan_from_mapping,
        stages_in_seconds,
    )

    graph = _fpn(quick)
    obj = _objective()
    columns: tuple[tuple[int, int, int], ...] = (
        ((16, 2, 8), (16, 4, 4), (16, 8, 2)) if quick else T2_COLUMNS)
    if only_d is not None:
        columns = tuple(c for c in columns if c[0] in only_d)
    rows: list[dict[str, Any]] = []
    for col, (d, s_n, r_n) in enumerate(columns):
        problem0 = Problem(graph=graph, cluster=resolve_cluster(table2_topology("mesh2d", 16)
                                                                or "").cluster, objective=obj)
        mem = memory_model(problem0, 2.0)
        t0 = time.perf_counter()
        part = partition_ops(graph, s_n, d, replicas=r_n, k=64, memory=mem)
        t_part = time.perf_counter() - t0
        if part.stage_of is None or part.atom_stage is None:
            notify(f"table 2 D={d} ({s_n},{r_n}): no partition")
            continue
        stages = stages_in_seconds(pipeline_stages(part.dag, part.atom_stage, r_n, memory=mem),
                                   problem0.cluster.time_unit_s)
        for name in PAPER_TABLE2:
            spec = table2_topology(name, d)
            if spec is None:
                continue
            cluster = resolve_cluster(spec).cluster
            problem = Problem(graph=graph, cluster=cluster, objective=obj)
            topo = Topology.from_cluster(cluster)
            t1 = time.perf_counter()
            cands = map_with(stages, topo, "parmesan", time_limit=time_limit)
            t_map = time.perf_counter() - t1
            cs = cs_mapping(stages)
            sim_cs = evaluate(problem, plan_from_mapping(problem, part.stage_of, cs)).objective
            sims = {n: evaluate(problem, plan_from_mapping(problem, part.stage_of, m)).objective
                    for n, m, _ in cands}
            best = min(sims, key=lambda n: sims[n])
            # the paper's mapper alone: its optimum under the Sec. 5.2 rule's instantiation
            rule = f"parmesan-{choose_instantiation(stages)}"
            first = next((info for n, _, info in cands if n == rule), {})
            eq5_cs = first.get("eq5_cs", math.nan)
            paper = PAPER_TABLE2[name][T2_COLUMNS.index((d, s_n, r_n))] \
                if (d, s_n, r_n) in T2_COLUMNS else None
            row = {"topology": name, "spec": spec, "D": d, "S": s_n, "R": r_n,
                   "simulated_cs": sim_cs, "simulated_ours": sims[best], "pick": best,
                   "speedup": sim_cs / sims[best],
                   "simulated_paper_only": sims.get(rule, math.inf),
                   "speedup_paper_only": sim_cs / sims[rule] if rule in sims else None,
                   "eq5_speedup": eq5_cs / first["eq5_max_stage_time"] if first else None,
                   "instantiation": first.get("instantiation"),
                   "mapping_status": first.get("mapping_status"),
                   "mapping_gap": first.get("mapping_gap"), "map_seconds": t_map,
                   "partition_seconds": t_part, "paper": paper}
            rows.append(row)
            notify(f"table 2 {name} D={d} ({s_n},{r_n}): paper's mapper "
                   f"{row['speedup_paper_only'] or math.nan:.3f}x, ours {row['speedup']:.3f}x "
                   f"(Eq. 5 {row['eq5_speedup'] or math.nan:.3f}x, {row['mapping_status']}, "
                   f"{t_map:.1f} s)")
        del col
    return rows


def _ratio(base: float, ours: float) -> float | None:
    """``base / ours``; ``None`` when either run found no plan."""
    return base / ours if math.isfinite(base) and math.isfinite(ours) and ours > 0 else None


def _x(v: float | None) -> str:
    return "-" if v is None or not math.isfinite(v) else f"{v:.2f}x"


def _g(v: float | None) -> str:
    # a method cut by its time limit before any plan leaves its Eq. 3 figure unset
    return "-" if v is None or not math.isfinite(v) else f"{v:.4g}"


def table1_markdown(rows: list[dict[str, Any]]) -> str:
    """Markdown of Table 1's shape: speedups over PipeDream + CS, the paper's figure beside.

    "+ our map" and "Ours" cannot fall below 1.0 (their candidates include CS and PipeDream's
    partition); "paper alone" (``paper_only``) can, and carries the paper's "Ours" figure.
    """
    lines = ["| model | (S,R) | PipeDream + CS | + our map (paper) [>= 1 by construction] | "
             "Ours [>= 1 by construction] | paper alone (paper's Ours) | Eq. 3 PipeDream | "
             "Eq. 3 op-level phase 1 | Eq. 3 paper alone | Eq. 3 ours (picked) | ours from |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if not r.get("available", True):
            lines.append(f"| {r['graph']} | ({r['S']},{r['R']}) | not available | "
                         f"- ({_x(r['paper_our_map'])}) | - | - ({_x(r['paper_ours'])}) "
                         "| | | | | |")
            continue
        lines.append(f"| {r['graph']} | ({r['S']},{r['R']}) | 1.00x | {_x(r['speedup_our_map'])} "
                     f"({_x(r['paper_our_map'])}) | {_x(r['speedup_ours'])} "
                     f"| {_x(r.get('speedup_paper_only'))} ({_x(r['paper_ours'])}) "
                     f"| {_g(r['eq3_pipedream'])} | {_g(r['eq3_op_level'])} "
                     f"| {_g(r.get('eq3_paper_only'))} | {_g(r['eq3_ours'])} "
                     f"| {r['ours_partition_from'] or 'no plan: ' + str(r.get('ours_status'))} |")
    done = [r for r in rows if r.get("available", True)]
    if done:
        tol = 1e-9

        def count(key: str, ok: Callable[[dict[str, Any]], bool] | None = None) -> str:
            have = [r for r in done if r.get(key) is not None]
            hits = sum((ok(r) if ok else r[key] >= 1 - tol) for r in have)
            return f"{hits} of {len(have)}"

        alone = [r["speedup_paper_only"] for r in done
                 if r.get("speedup_paper_only") is not None]
        missing = [f"{r['graph']} ({r['S']},{r['R']})" for r in done if r["speedup_ours"] is None]
        lines.append(
            f"\nPaper alone (``paper_only``) >= PipeDream + CS in "
            f"{count('speedup_paper_only')} cells with a plan"
            + (f" (range {min(alone):.3f}-{max(alone):.3f}x)" if alone else "")
            + f". By construction, not evidence: Ours >= PipeDream + CS in "
            f"{count('speedup_ours')} and + our map >= CS in {count('speedup_our_map')} "
            "(CS and PipeDream's partition are among their candidates); op-level phase 1 max "
            "stage time <= the layer-level DP's in "
            f"{count('eq3_op_level', lambda r: _le(r['eq3_op_level'], r['eq3_pipedream']))} "
            "(clustering respects the layer partition)."
            + (f" No plan within the method's time limit: Ours in {', '.join(missing)}."
               if missing else ""))
    return "\n".join(lines) + "\n"


def _le(a: float | None, b: float | None) -> bool:
    return a is not None and b is not None and a <= b * (1 + 1e-9)


def table2_markdown(rows: list[dict[str, Any]]) -> str:
    """Markdown of Table 2's shape, one line per cell: the paper's mapper alone and the best of
    ``parmesan``'s candidates over CS (simulated), the paper's figure, the Eq. 5 ratio."""
    lines = ["| topology | D | (S,R) | paper's mapper alone | ours [>= 1 by construction] | "
             "paper | Eq. 5 (paper's mapper) [>= 1 by construction] | mapping status |",
             "|---|---|---|---|---|---|---|---|"]
    order = {name: i for i, name in enumerate(PAPER_TABLE2)}
    for r in sorted(rows, key=lambda r: (order.get(r["topology"], 99), r["D"], r["S"])):
        lines.append(f"| {r['topology']} | {r['D']} | ({r['S']},{r['R']}) "
                     f"| {_x(r.get('speedup_paper_only'))} | {_x(r['speedup'])} "
                     f"| {_x(r['paper'])} | {_x(r['eq5_speedup'])} | {r['mapping_status']} |")
    alone = [r["speedup_paper_only"] for r in rows if r.get("speedup_paper_only") is not None]
    if alone:
        lines.append(f"\nPaper's mapper alone over CS: minimum {min(alone):.3f}x, below 1.0 in "
                     f"{sum(a < 1 - 1e-9 for a in alone)} of {len(alone)} cells, median "
                     f"{statistics.median(alone):.2f}x.")
    uni = [r for r in rows if r["topology"] == "uniform_dist"]
    if uni:
        uni_alone = [r["speedup_paper_only"] for r in uni if r.get("speedup_paper_only")]
        lines.append(
            "uniform_dist median speedup: paper's mapper alone "
            + (f"{statistics.median(uni_alone):.2f}x" if uni_alone else "-")
            + f", ours {statistics.median(r['speedup'] for r in uni):.2f}x (paper: 5.1-33.5x). "
            f"Ours' minimum over all cells {min(r['speedup'] for r in rows):.3f}x holds by "
            "construction (CS is a candidate).")
    return "\n".join(lines) + "\n"


def reproduce_parmesan(out: str | Path, *, quick: bool = False, time_limit: float | None = None,
                       tables: tuple[str, ...] = ("1", "2"), notify: Notify | None = None,
                       only_d: tuple[int, ...] | None = None) -> ParmesanReport:
    """Run Tables 1 and 2 and write ``table1.md``, ``table2.md``, ``parmesan.json``.

    ``time_limit``: seconds per mapping search (default 60, 2 with ``quick``).
    """
    say = notify or (lambda _m: None)
    limit = time_limit if time_limit is not None else (2.0 if quick else 60.0)
    folder = Path(out) / "parmesan"
    folder.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    report = ParmesanReport()
    if "1" in tables:
        report.table1 = run_table1(quick=quick, time_limit=limit, notify=say)
        path = folder / "table1.md"
        write_output(table1_markdown(report.table1), path)
        report.files.append(path)
        report.agreement = run_agreement(quick=quick, time_limit=limit, notify=say)
        path = folder / "mapping_agreement.md"
        write_output(agreement_markdown(report.agreement), path)
        report.files.append(path)
        report.ablation = run_mapping_ablation(quick=quick, time_limit=limit, notify=say)
        path = folder / "table1_mapping_ablation.md"
        write_output(ablation_markdown(report.ablation), path)
        report.files.append(path)
    if "2" in tables:
        report.table2 = run_table2(quick=quick, time_limit=limit, notify=say, only_d=only_d)
        path = folder / "table2.md"
        write_output(table2_markdown(report.table2), path)
        report.files.append(path)
    report.wall_time_s = time.perf_counter() - t0
    path = folder / "parmesan.json"
    write_output(json.dumps({"quick": quick, "time_limit_s": limit, "table1": report.table1,
                             "table2": report.table2, "mapping_ablation": report.ablation,
                             "mapping_agreement": report.agreement,
                             "wall_time_s": report.wall_time_s},
                            indent=1, default=str), path)
    report.files.append(path)
    return report
