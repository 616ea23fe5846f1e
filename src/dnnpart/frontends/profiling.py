"""Measured operator times on the local machine (CPU): medians over repeated runs.

* torch.fx graphs: every node is run and timed by an ``fx.Interpreter`` (``perf_counter``
  around each node's call), ``warmup`` untimed passes, then ``repeats`` timed ones
  (:func:`time_fx_nodes`; ``dnnpart calibrate`` times its micro-benchmarks the same way).
* ONNX models: onnxruntime's per-node profiler, with graph optimisations off so that every
  node of the file keeps its name (fused kernels would hide the operators we place).

The medians replace the CPU column of the graph (``price_model(..., cpu_times_ms=...)``);
the accelerator column stays estimated.
"""

from __future__ import annotations

import gc
import json
import statistics
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from dnnpart._optional import require
from dnnpart.errors import UsageError
from dnnpart.frontends.build import ImportedModel
from dnnpart.frontends.ir import ModelIR

if TYPE_CHECKING:
    from torch import fx

FloatArray = npt.NDArray[np.float64]


def profile_fx(
    gm: fx.GraphModule, example_inputs: Sequence[Any], ir: ModelIR, *, repeats: int = 10, warmup: int = 3
) -> FloatArray:
    """Median time in ms of each operator of ``ir`` (fx node names) on the local CPU."""
    times = time_fx_nodes(gm, example_inputs, repeats=repeats, warmup=warmup)
    return np.array([times.get(op.name, 0.0) for op in ir.ops], dtype=np.float64)


def time_fx_nodes(
    gm: fx.GraphModule, example_inputs: Sequence[Any], *, repeats: int = 10, warmup: int = 3,
    sync: Callable[[], Any] | None = None,
    host: dict[str, float] | None = None,
    before_pass: Callable[[], Any] | None = None,
) -> dict[str, float]:
    """Median time in ms of every node of ``gm`` that ran, by node name (module docstring).

    ``sync`` is called before and after each node (``torch.cuda.synchronize`` to time a GPU);
    with it, ``host`` (when given) receives each node's median ms until its call returned,
    before the wait for its kernels: the host's launch cost. ``before_pass`` is called, untimed,
    before each pass over the graph.
    """
    torch = require("torch", extra="torch", caller="profiling")
    from torch import fx

    if repeats < 1 or warmup < 0:
        raise UsageError(f"repeats must be >= 1 and warmup >= 0, got {repeats}, {warmup}")
    samples: dict[str, list[float]] = defaultdict(list)
    launched: dict[str, list[float]] = defaultdict(list)

    class Timer(fx.Interpreter):
        record = False

        def run_node(self, n: fx.Node) -> Any:
            # the clock runs around the node's own call only: fetching its arguments from the
            # interpreter's environment is the interpreter's cost, not the operator's (a
            # GraphModule's generated code, which runs the model, passes them directly)
            args, kwargs = self.fetch_args_kwargs_from_env(n)
            call = getattr(self, n.op)
            if sync is not None:
                sync()
            start = time.perf_counter()
            result = call(n.target, args, kwargs)
            if sync is not None:
                returned = time.perf_counter()
                sync()
                if self.record:
                    launched[n.name].append((returned - start) * 1e3)
            if self.record:
                samples[n.name].append((time.perf_counter() - start) * 1e3)
            return result

    interp = Timer(gm)
    # Python's cyclic collector runs after a fixed number of allocations, so at the same node
    # of every pass: it would charge one operator (a view, say) with its pause and with the
    # tensors it frees. Off while timing (reference counting still frees every tensor; a full
    # collection between passes would cost more than the passes of a small graph).
    enabled = gc.isenabled()
    gc.disable()
    try:
        with torch.no_grad():
            for i in range(warmup + repeats):
                interp.record = i >= warmup
                if before_pass is not None:
                    before_pass()
                interp.run(*example_inputs)
    finally:
        if enabled:
            gc.enable()
    if host is not None:
        host.update({name: statistics.median(got) for name, got in launched.items()})
    return {name: statistics.median(got) for name, got in samples.items()}


def profile_onnx(
    path: str | Path,
    imported: ImportedModel,
    *,
    repeats: int = 10,
    warmup: int = 3,
    seed: int = 0,
) -> FloatArray:
    """Median time in ms of each operator of an ONNX model under onnxruntime on the CPU.

    Nodes onnxruntime reports no kernel for (folded constants) get 0.
    """
    ort = require("onnxruntime", extra="onnx", caller="ONNX profiling")
    if repeats < 1 or warmup < 0:
        raise UsageError(f"repeats must be >= 1 and warmup >= 0, got {repeats}, {warmup}")
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    opts.enable_profiling = True
    opts.intra_op_num_threads = 1
    session = ort.InferenceSession(str(path), sess_options=opts, providers=["CPUExecutionProvider"])
    feeds = _random_feeds(session, imported, seed)
    for _ in range(warmup + repeats):
        session.run(None, feeds)
    trace_file = session.end_profiling()
    try:
        events = json.loads(Path(trace_file).read_text())
    finally:
        Path(trace_file).unlink(missing_ok=True)
    runs: dict[str, list[float]] = defaultdict(list)
    for ev in events:
        if ev.get("cat") == "Node" and str(ev.get("name", "")).endswith("_kernel_time"):
            runs[ev["name"][: -len("_kernel_time")]].append(ev["dur"] / 1e3)  # us -> ms
    out = []
    for op in imported.ir.ops:
        got = runs.get(op.name, [])[warmup:]
        out.append(statistics.median(got) if got else 0.0)
    return np.array(out, dtype=np.float64)


def _random_feeds(session: Any, imported: ImportedModel, seed: int) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    feeds: dict[str, Any] = {}
    shapes = {op_in: None for op_in in imported.ir.graph_inputs}
    for inp in session.get_inputs():
        if inp.name not in shapes:
            continue
        dims = [d if isinstance(d, int) else 1 for d in inp.shape]
        if "int" in inp.type:
            feeds[inp.name] = rng.integers(0, 2, size=dims).astype(np.int64 if "64" in inp.type else np.int32)
        else:
            feeds[inp.name] = rng.standard_normal(dims).astype(np.float32)
    return feeds
