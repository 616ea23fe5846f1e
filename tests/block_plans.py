"""Block-aligned pipeline plans built by hand, for the run and export tests.

A model's units are its prologue (operators before the first block), its blocks (the numbered
children of its module lists: ``transformer.h.1``, ``layers.0``, ``layer2.0``, by
:func:`dnnpart.frontends.ir.layer_key`) and its epilogue, in forward order; stage ``k`` gets
a contiguous range of units (as equal as the count allows) and runs on device ``devices[k]``.
Forward operators outside every block belong to the prologue (before the first block, in
capture order), the epilogue (after the last) or, between blocks, their latest producer's unit;
parameters outside every block go with their earliest consumer, backward operators with the
forward operator they differentiate.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from dnnpart.frontends.ir import layer_key
from dnnpart.plan import Plan


def _block(path: str) -> str | None:
    key = layer_key(path.replace("/", "."))
    return key if any(p.isdigit() for p in key.split(".")) else None


def block_assignment(planned: Any, devices: Sequence[int]) -> np.ndarray:
    """Device of every node of ``planned``'s graph: stage ``k`` of the block split on
    ``devices[k]``."""
    g = planned.problem.graph
    order = [_block(op.module_path) for op in planned.imported.ir.ops]
    blocks = list(dict.fromkeys(k for k in order if k))
    n_units, n_stages = len(blocks) + 2, len(devices)
    assert 1 <= n_stages <= n_units, (n_stages, n_units)
    bounds = np.linspace(0, n_units, n_stages + 1).round().astype(int)
    stage_of_unit = np.searchsorted(bounds[1:], np.arange(n_units), side="right")
    unit_of_block = {b: i + 1 for i, b in enumerate(blocks)}
    paths = g.module_paths if g.module_paths is not None else ("",) * g.n_nodes
    bw = g.is_backward
    topo = np.argsort(g.original_ids, kind="stable")
    a = np.full(g.n_nodes, -1, np.int64)

    def preds(v: int) -> list[int]:
        return [int(u) for u in g.pred_idx[g.pred_ptr[v]:g.pred_ptr[v + 1]]]

    def succs(v: int) -> list[int]:
        return [int(w) for w in g.succ_idx[g.succ_ptr[v]:g.succ_ptr[v + 1]]]

    fwd = [int(v) for v in topo if not bw[v]]
    unit = np.full(g.n_nodes, -1, np.int64)
    keyed = [i for i, v in enumerate(fwd) if _block(paths[v]) in unit_of_block]
    params = set(np.flatnonzero(np.asarray(g.op_types or ("",) * g.n_nodes) == "parameter").tolist())
    for i, v in enumerate(fwd):
        b = _block(paths[v])
        if b in unit_of_block:
            unit[v] = unit_of_block[b]
        elif v in params:
            continue
        elif i < keyed[0]:  # before the first block: the prologue
            unit[v] = 0
        elif i > keyed[-1]:  # after the last: the epilogue
            unit[v] = n_units - 1
        else:  # between blocks: with the latest producer
            unit[v] = max((unit[u] for u in preds(v) if not bw[u] and unit[u] >= 0), default=0)
    for v in fwd:  # parameters outside every block: with their earliest consumer
        if unit[v] < 0:
            unit[v] = min((unit[w] for w in succs(v) if not bw[w] and unit[w] >= 0), default=0)
    a[fwd] = stage_of_unit[unit[fwd]]
    of = g.forward_of
    for v in (int(v) for v in topo if bw[v]):
        if of is not None and of[v] >= 0:
            a[v] = a[of[v]]
        else:
            a[v] = min((a[u] for u in preds(v) if a[u] >= 0), default=n_stages - 1)
    return np.asarray(devices)[a]


def block_plan(spec: str, path: Path, devices: Sequence[int], *, training: bool = True,
               cluster: str = "4xA100", schedule: str | None = "1f1b", microbatches: int = 4,
               input_shapes: Sequence[Sequence[int]] = ()) -> Path:
    """Plan ``spec`` (any method), replace the plan by the block split on ``devices`` and write
    the plan file to ``path``."""
    from dnnpart.workflow import plan_model

    planned = plan_model(spec, cluster=cluster, training=training, microbatches=microbatches,
                         schedule=schedule if training else None, input_shapes=input_shapes,
                         method="greedy" if not training else None)
    plan = Plan(assignment=block_assignment(planned, devices))
    dataclasses.replace(planned, plan=plan).write(path)
    return path
