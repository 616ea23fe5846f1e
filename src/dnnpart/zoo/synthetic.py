"""Seeded synthetic graphs at paper 2's scale, calibrated on our captured training graphs.

Captured aten graphs have ~10^4 nodes; PARDNN's TensorFlow graphs have 10^5-10^6. Rather than
pad captures, ``zoo:synthetic:nodes=200000,seed=1,like=word-rnn`` draws a graph whose
statistics follow a captured one (``like``), from a small table
(``zoo/calibration.json``, written by ``benchmarks/calibrate_synthetic.py`` from our captures),
so no torch is needed at run time.

What is calibrated, per memory class (normal / residual / reference / control): the class
shares, the in- and out-degree distributions (exact histograms), the backward share, and the
accelerator time, CPU time, parameter and output bytes (101 quantiles each plus the mean);
per edge the span distribution (``v - u`` in log2 buckets) and the bytes and transfer cost
(quantiles plus mean); the share of nodes in a layer and the nodes per layer.

How a graph is drawn (choices; see ``docs/models.md``):

1. each node draws its class from the shares, then its in-degree and out-degree *capacity*
   from its class's histograms, a quantile level ``q ~ U(0, 1)`` that sets all its sizes
   and times together (comonotone, so big operators are big in every respect), and whether it
   is a backward node;
2. node ``v``'s in-edges come from ``v - span`` with spans drawn from the span distribution;
   when that source has no out-capacity left, the nearest earlier node within
   :data:`SEARCH_WINDOW` that has some is taken (so out-degrees follow their histogram), and
   a source is never used twice by one target. Every edge points forward, so the graph is a
   DAG by construction;
3. sampled sizes and times are rescaled per class so their means equal the calibrated means
   (quantile interpolation alone loses tail mass, which would bias the compute/communication
   ratio);
4. ``edges=M`` scales both degree distributions by ``M / expected`` (stochastic rounding, 2%
   headroom, then a random surplus is dropped so there are exactly ``M`` edges when the
   wiring reached them), for graphs denser than the calibration graph (PARDNN's TF graphs
   have ~5 edges per node);
5. layers are consecutive blocks of ``nodes_per_layer`` nodes among those that have a layer.

The wiring loop is a numba kernel (``_wire.py_func`` is its uncompiled source); both read
the same pre-drawn uniforms, so they give identical graphs.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

import numpy as np
import numpy.typing as npt

from dnnpart._jit import kernel
from dnnpart.errors import FormatError
from dnnpart.graph.core import MEMORY_CLASSES, Graph, build_graph
from dnnpart.limits import MAX_GRAPH_BYTES, check_estimate

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

#: How far below a drawn source the wiring looks for a node with out-capacity left.
SEARCH_WINDOW = 64
CALIBRATION_FILE = "calibration.json"
MAX_NODES = 50_000_000


@dataclass(frozen=True, slots=True)
class SyntheticSpec:
    """Parameters of a synthetic graph."""

    nodes: int
    seed: int = 0
    like: str = "word-rnn"
    edges: int | None = None


def parse_synthetic(spec: str) -> SyntheticSpec:
    """``zoo:synthetic:nodes=N,seed=S,like=NAME[,edges=M]``.

    Examples
    --------
    >>> parse_synthetic("zoo:synthetic:nodes=200000,seed=1,like=word-rnn")
    SyntheticSpec(nodes=200000, seed=1, like='word-rnn', edges=None)
    >>> parse_synthetic("zoo:synthetic:nodes=0")
    Traceback (most recent call last):
    ...
    dnnpart.errors.FormatError: zoo:synthetic:nodes=0: nodes: expected an integer in 2..50000000, got 0
    """
    body = spec[4:] if spec.startswith("zoo:") else spec
    if not body.startswith("synthetic"):
        raise FormatError(f"{spec}: expected zoo:synthetic:nodes=N,seed=S,like=NAME")
    rest = body[len("synthetic") :].lstrip(":")
    values: dict[str, Any] = {}
    for item in filter(None, (s.strip() for s in rest.split(","))):
        key, eq, value = item.partition("=")
        if not eq or key not in ("nodes", "seed", "like", "edges"):
            raise FormatError(f"{spec}: {item!r}: expected nodes=N, seed=S, like=NAME or edges=M")
        if key == "like":
            if value not in calibrations():
                raise FormatError(f"{spec}: like: expected one of {', '.join(calibrations())}, got {value!r}")
            values[key] = value
            continue
        try:
            number = int(value)
        except ValueError:
            raise FormatError(f"{spec}: {key}: expected an integer, got {value!r}") from None
        low, high = {"nodes": (2, MAX_NODES), "seed": (0, 2**63 - 1), "edges": (1, 20 * MAX_NODES)}[key]
        if not low <= number <= high:
            raise FormatError(f"{spec}: {key}: expected an integer in {low}..{high}, got {number}")
        values[key] = number
    if "nodes" not in values:
        raise FormatError(f"{spec}: nodes: missing (e.g. zoo:synthetic:nodes=200000,seed=1,like=word-rnn)")
    parsed = SyntheticSpec(**values)
    check_synthetic_size(parsed, spec)
    return parsed


#: Bytes per node and per edge while a synthetic graph is drawn and built (measured peak
#: resident memory, with a margin: 264 and 175 bytes on 2 x 10^5 - 10^6 nodes).
BYTES_PER_NODE = 300
BYTES_PER_EDGE = 200


def estimated_bytes(parsed: SyntheticSpec) -> int:
    """Memory drawing ``parsed`` takes, estimated from its node and edge counts.

    Examples
    --------
    >>> estimated_bytes(SyntheticSpec(nodes=1000, edges=5000))
    1300000
    """
    edges = parsed.edges if parsed.edges is not None else round(_mean_in_degree(parsed.like) * parsed.nodes)
    return BYTES_PER_NODE * parsed.nodes + BYTES_PER_EDGE * edges


def check_synthetic_size(parsed: SyntheticSpec, spec: str = "zoo:synthetic") -> None:
    """Refuse a spec whose graph cannot exist (more ``edges`` than node pairs) or whose
    estimated memory passes :data:`~dnnpart.limits.MAX_GRAPH_BYTES`, before anything is drawn.

    Examples
    --------
    >>> check_synthetic_size(SyntheticSpec(nodes=100, edges=10**8))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    dnnpart.errors.FormatError: zoo:synthetic: edges: 100000000 edges, more than the 4,950 node pairs ...
    """
    n = parsed.nodes
    pairs = n * (n - 1) // 2  # every edge joins an earlier node to a later one, at most once
    if parsed.edges is not None and parsed.edges > pairs:
        raise FormatError(f"{spec}: edges: {parsed.edges} edges, more than the {pairs:,} node pairs "
                          f"of {n} nodes")
    field = "nodes" if parsed.edges is None else "nodes, edges"
    check_estimate(estimated_bytes(parsed), MAX_GRAPH_BYTES, f"{spec}: {field}", "graph memory",
                   "ask for fewer nodes or edges")


def _mean_in_degree(like: str) -> float:
    """Edges per node of the calibration graph ``like`` (its in-degree histograms' mean)."""
    classes = calibrations()[like]["classes"]
    total = sum(c["share"] for c in classes)
    return float(sum(c["share"] / total * sum(int(k) * v for k, v in c["indeg_hist"].items())
                     / sum(c["indeg_hist"].values()) for c in classes))


@lru_cache(maxsize=1)
def calibrations() -> dict[str, Any]:
    """The calibration table: ``like`` name -> statistics (see the module docstring)."""
    text = resources.files("dnnpart.zoo").joinpath(CALIBRATION_FILE).read_text()
    data: dict[str, Any] = json.loads(text)["models"]
    return data


def synthetic_graph(spec: SyntheticSpec | str) -> Graph:
    """Draw the graph a spec names (same spec, same graph, on any machine).

    Examples
    --------
    >>> g = synthetic_graph("zoo:synthetic:nodes=1000,seed=3,like=word-rnn")
    >>> g.n_nodes, synthetic_graph("zoo:synthetic:nodes=1000,seed=3,like=word-rnn").n_edges == g.n_edges
    (1000, True)
    """
    parsed = parse_synthetic(spec) if isinstance(spec, str) else spec
    cal = calibrations()[parsed.like]
    n = parsed.nodes
    rng = np.random.default_rng([parsed.seed, n])
    classes = cal["classes"]
    shares = np.array([c["share"] for c in classes])
    # exact class counts (largest remainder), shuffled: rare classes (a few dozen parameter
    # nodes among 10^4) keep their share instead of drifting with multinomial noise
    counts = _apportion(shares / shares.sum(), n)
    cls = rng.permutation(np.repeat(np.arange(len(classes)), counts)).astype(np.int8)

    indeg = np.zeros(n, np.int64)
    outcap = np.zeros(n, np.int64)
    for c, info in enumerate(classes):
        members = np.flatnonzero(cls == c)
        if members.size == 0:
            continue
        indeg[members] = _draw_hist(rng, info["indeg_hist"], members.size)
        outcap[members] = _draw_hist(rng, info["outdeg_hist"], members.size)
    if parsed.edges is not None:
        expected = max(float(indeg.sum()), 1.0)
        # 2% headroom: the wiring drops a repeated source now and then; the surplus is
        # trimmed below so the graph has exactly ``edges`` edges
        factor = 1.02 * parsed.edges / expected
        indeg = np.floor(indeg * factor + rng.random(n)).astype(np.int64)
        outcap = np.floor(outcap * factor + rng.random(n)).astype(np.int64)
    indeg[0] = 0
    span_cdf = np.cumsum(np.asarray(cal["span_hist"], np.float64))
    span_cdf /= span_cdf[-1]
    m_max = int(indeg.sum())
    uniforms = rng.random(2 * m_max)
    src, dst, m = _wire(indeg, outcap.copy(), span_cdf, uniforms, SEARCH_WINDOW)
    src, dst = src[:m], dst[:m]
    if parsed.edges is not None and m > parsed.edges:
        keep = np.sort(rng.choice(m, size=parsed.edges, replace=False))
        src, dst, m = src[keep], dst[keep], parsed.edges

    level = rng.random(n)
    acc = np.zeros(n)
    cpu = np.zeros(n)
    pbytes = np.zeros(n)
    obytes = np.zeros(n)
    backward = np.zeros(n, np.bool_)
    for c, info in enumerate(classes):
        members = np.flatnonzero(cls == c)
        if members.size == 0:
            continue
        q = level[members]
        acc[members] = _from_quantiles(q, info["acc"])
        cpu[members] = _from_quantiles(q, info["cpu"])
        pbytes[members] = _from_quantiles(q, info["param"])
        obytes[members] = _from_quantiles(q, info["out"])
        backward[members] = rng.random(members.size) < info["backward_share"]
    edge_level = rng.random(m)
    ebytes = _from_quantiles(edge_level, cal["edge_bytes"])
    ecost = _from_quantiles(edge_level, cal["edge_cost"])

    in_count = round(cal["layer_share"] * n)
    in_layer = np.zeros(n, np.bool_)
    in_layer[rng.permutation(n)[:in_count]] = True
    layer = np.full(n, -1, np.int64)
    n_layers = max(1, round(in_count / max(1.0, float(cal["nodes_per_layer"]))))
    layer[in_layer] = np.arange(in_count) * n_layers // max(in_count, 1)
    return build_graph(
        np.arange(n),
        src,
        dst,
        compute_time=np.column_stack((cpu, acc)),
        edge_cost=ecost,
        edge_bytes=ebytes,
        memory_bytes=pbytes + obytes,
        is_backward=backward,
        layer_id=layer,
        memory_class=cls,
        param_bytes=pbytes,
        output_bytes=obytes,
        duplicate_edges="sum",
    )


def _apportion(shares: FloatArray, n: int) -> IntArray:
    """Integer counts summing to ``n`` closest to ``shares * n`` (largest remainder).

    Examples
    --------
    >>> _apportion(np.array([0.5, 0.25, 0.25]), 5).tolist()
    [3, 1, 1]
    """
    raw = shares * n
    counts = np.floor(raw).astype(np.int64)
    left = n - int(counts.sum())
    counts[np.argsort(-(raw - counts), kind="stable")[:left]] += 1
    return counts


def _draw_hist(rng: np.random.Generator, hist: dict[str, int], size: int) -> IntArray:
    values = np.array([int(k) for k in hist], np.int64)
    counts = np.array(list(hist.values()), np.float64)
    return rng.choice(values, size=size, p=counts / counts.sum())


def _from_quantiles(level: FloatArray, info: dict[str, Any]) -> FloatArray:
    """Inverse-CDF by linear interpolation of the quantiles, rescaled to the stored mean."""
    qs = np.asarray(info["q"], np.float64)
    values: FloatArray = np.interp(level, np.linspace(0.0, 1.0, qs.size), qs)
    mean = float(info["mean"])
    got = float(values.mean()) if values.size else 0.0
    if got > 0 and mean > 0:
        values *= mean / got
    return values


@kernel
def _wire(indeg, outcap, span_cdf, uniforms, window):  # type: ignore[no-untyped-def]
    """Choose each in-edge's source (see the module docstring, step 2).

    Returns ``(src, dst, m)``: the first ``m`` entries are the edges, sorted by target.
    """
    n = indeg.shape[0]
    total = 0
    for v in range(n):
        total += indeg[v]
    src = np.empty(total, np.int64)
    dst = np.empty(total, np.int64)
    m = 0
    r = 0
    n_buckets = span_cdf.shape[0]
    for v in range(1, n):
        first = m
        for _ in range(indeg[v]):
            a = uniforms[r]
            b = uniforms[r + 1]
            r += 2
            bucket = 0
            while bucket < n_buckets - 1 and span_cdf[bucket] < a:
                bucket += 1
            low = 1 << bucket
            span = low + int(b * low)  # uniform in [2^bucket, 2^(bucket+1))
            u = v - span
            if u < 0:
                u = int(b * v)
            chosen = -1
            stop = max(-1, u - window)
            w = u
            while w > stop:
                if outcap[w] > 0:
                    dup = False
                    for e in range(first, m):
                        if src[e] == w:
                            dup = True
                            break
                    if not dup:
                        chosen = w
                        break
                w -= 1
            if chosen < 0:
                dup = False
                for e in range(first, m):
                    if src[e] == u:
                        dup = True
                        break
                if dup:
                    continue
                chosen = u
            else:
                outcap[chosen] -= 1
            src[m] = chosen
            dst[m] = v
            m += 1
    return src, dst, m


def graph_statistics(graph: Graph) -> dict[str, float]:
    """The statistics the generator is calibrated to reproduce.

    In/out-degree mean and 90th percentile, compute/communication ratio (total edge cost over
    total accelerator time), the share of each memory class, and the mean number of nodes per
    layer (among nodes with a layer).

    Examples
    --------
    >>> from dnnpart.testing import chain_graph
    >>> graph_statistics(chain_graph(4))["out_degree_mean"]
    0.75
    """
    from dnnpart.graph.algorithms import communication_to_computation_ratio

    indeg, outdeg = graph.in_degree(), graph.out_degree()
    classes = graph.memory_classes()
    layers = graph.layer_id[graph.layer_id >= 0]
    stats = {
        "in_degree_mean": float(indeg.mean()),
        "in_degree_p90": float(np.percentile(indeg, 90)),
        "out_degree_mean": float(outdeg.mean()),
        "out_degree_p90": float(np.percentile(outdeg, 90)),
        "ccr": communication_to_computation_ratio(graph),
        "nodes_per_layer": float(layers.size / np.unique(layers).size) if layers.size else 0.0,
    }
    for c, name in enumerate(MEMORY_CLASSES):
        stats[f"share_{name}"] = float(np.mean(classes == c))
    return stats


def calibrate(graph: Graph, *, source: str = "") -> dict[str, Any]:
    """The calibration entry of ``graph`` (what ``zoo/calibration.json`` stores per model).

    Examples
    --------
    >>> from dnnpart.testing import chain_graph
    >>> sorted(calibrate(chain_graph(5)))[:3]
    ['classes', 'edge_bytes', 'edge_cost']
    """
    n = graph.n_nodes
    classes = graph.memory_classes()
    indeg, outdeg = graph.in_degree(), graph.out_degree()
    acc, cpu = graph.time_on("accelerator"), graph.time_on("cpu")
    pbytes, obytes = graph.node_param_bytes(), graph.node_output_bytes()
    levels = np.linspace(0.0, 1.0, 101)

    def quantiles(values: FloatArray) -> dict[str, Any]:
        finite = np.where(np.isfinite(values), values, 0.0)
        if finite.size == 0:
            return {"q": [0.0, 0.0], "mean": 0.0}
        return {"q": np.quantile(finite, levels).tolist(), "mean": float(finite.mean())}

    def hist(values: IntArray) -> dict[str, int]:
        keys, counts = np.unique(values, return_counts=True)
        return {str(int(k)): int(c) for k, c in zip(keys, counts, strict=True)}

    entry_classes = []
    for c in range(len(MEMORY_CLASSES)):
        members = classes == c
        count = int(members.sum())
        entry_classes.append({
            "share": count / n,
            "indeg_hist": hist(indeg[members]) if count else {"0": 1},
            "outdeg_hist": hist(outdeg[members]) if count else {"0": 1},
            "backward_share": float(graph.is_backward[members].mean()) if count else 0.0,
            "acc": quantiles(acc[members]),
            "cpu": quantiles(cpu[members]),
            "param": quantiles(pbytes[members]),
            "out": quantiles(obytes[members]),
        })
    spans = (graph.succ_idx - graph.edge_sources()).astype(np.int64)
    buckets = np.floor(np.log2(np.maximum(spans, 1))).astype(np.int64)
    span_hist = np.bincount(buckets, minlength=1).tolist() if spans.size else [1]
    ebytes = np.where(np.isfinite(graph.edge_bytes), graph.edge_bytes, 0.0)
    layers = graph.layer_id[graph.layer_id >= 0]
    return {
        "source": source,
        "stats": graph_statistics(graph) | {"n_nodes": n, "n_edges": graph.n_edges},
        "classes": entry_classes,
        "span_hist": span_hist,
        "edge_bytes": quantiles(ebytes),
        "edge_cost": quantiles(graph.edge_cost),
        "layer_share": float(layers.size / n),
        "nodes_per_layer": float(layers.size / np.unique(layers).size) if layers.size else 1.0,
    }
