"""The arrays PARDNN works on, taken from a :class:`~dnnpart.graph.Graph`.

The adjacency is the graph's own CSR arrays, not copies (the same dtypes: ``int64`` offsets,
``int32`` node ids), so a 1M-edge graph costs PARDNN no second adjacency and the kernels
compile once for graphs and for the small hand-made inputs of :meth:`Costs.from_edges`.

``comp`` is each node's time on the (identical) accelerators; where a node cannot run on an
accelerator its CPU time is used instead (it will be pinned anyway). ``comm`` is the edge's
transfer time at the reference link, except that edges leaving a ``control`` node carry no
data and cost 0 (paper 2, §2: control dependencies only order nodes).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from dnnpart.graph import CONTROL, Graph

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
Int32Array = npt.NDArray[np.int32]


@dataclass(frozen=True, slots=True, eq=False)
class Costs:
    """CSR adjacency plus node weights and edge costs (the inputs of every PARDNN step).

    Examples
    --------
    >>> c = Costs.from_edges(3, [0, 1], [1, 2], comp=[1.0, 2.0, 3.0], comm=[0.5, 0.5])
    >>> c.n, c.succ_idx.tolist(), c.pred_idx.tolist()
    (3, [1, 2], [0, 1])
    """

    succ_ptr: IntArray
    succ_idx: Int32Array
    pred_ptr: IntArray
    pred_idx: Int32Array
    pred_edge: IntArray
    comp: FloatArray
    comm: FloatArray

    @property
    def n(self) -> int:
        return int(self.comp.shape[0])

    def edge_sources(self) -> IntArray:
        return np.repeat(np.arange(self.n, dtype=np.int64), np.diff(self.succ_ptr))

    @staticmethod
    def from_edges(
        n: int,
        src: npt.ArrayLike,
        dst: npt.ArrayLike,
        *,
        comp: npt.ArrayLike,
        comm: npt.ArrayLike,
    ) -> Costs:
        """Build from an edge list over topologically numbered nodes (``src < dst``)."""
        s = np.asarray(src, dtype=np.int64).reshape(-1)
        d = np.asarray(dst, dtype=np.int64).reshape(-1)
        w = np.asarray(comm, dtype=np.float64).reshape(-1)
        if np.any(s >= d):
            raise ValueError("edges must point forward (src < dst)")
        order = np.lexsort((d, s))
        s, d, w = s[order], d[order], w[order]
        succ_ptr = np.zeros(n + 1, np.int64)
        np.cumsum(np.bincount(s, minlength=n), out=succ_ptr[1:])
        porder = np.lexsort((s, d))
        pred_ptr = np.zeros(n + 1, np.int64)
        np.cumsum(np.bincount(d, minlength=n), out=pred_ptr[1:])
        return Costs(
            succ_ptr=succ_ptr,
            succ_idx=d.astype(np.int32),
            pred_ptr=pred_ptr,
            pred_idx=s[porder].astype(np.int32),
            pred_edge=porder.astype(np.int64),
            comp=np.asarray(comp, dtype=np.float64).reshape(-1).copy(),
            comm=w.copy(),
        )

    @staticmethod
    def from_graph(graph: Graph, kind: str = "accelerator") -> Costs:
        """PARDNN's view of ``graph`` on devices of ``kind``: the graph's adjacency arrays
        themselves, its node times on ``kind`` and its edge costs.

        Examples
        --------
        >>> from dnnpart.testing import chain_graph
        >>> g = chain_graph(3)
        >>> Costs.from_graph(g).succ_idx is g.succ_idx
        True
        """
        comp = graph.time_on(kind).astype(np.float64).copy()
        bad = ~np.isfinite(comp)
        if np.any(bad):
            comp[bad] = graph.compute_time[bad].min(axis=1)
        comp[~np.isfinite(comp)] = 0.0
        comm = graph.edge_cost.astype(np.float64).copy()
        comm[graph.memory_classes()[graph.edge_sources()] == CONTROL] = 0.0
        return Costs(
            succ_ptr=graph.succ_ptr,
            succ_idx=graph.succ_idx,
            pred_ptr=graph.pred_ptr,
            pred_idx=graph.pred_idx,
            pred_edge=graph.pred_edge,
            comp=comp,
            comm=comm,
        )
