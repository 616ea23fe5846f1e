"""A 17-node hand-worked example in the spirit of the paper's Fig. 2 (our own weights)."""

from __future__ import annotations

import numpy as np

from dnnpart.solvers.pardnn import Costs
from dnnpart.solvers.pardnn.mapping import lflam, prepare
from dnnpart.solvers.pardnn.slicing import slice_graph

NAMES = "ABCDEFGHIJKLMNOPQ"
EDGES = {  # (u, v): comm; every node computes for 1
    "AB": 2, "BE": 2, "EI": 2, "IM": 2, "MO": 2, "OP": 2, "PQ": 2,  # spine
    "AC": 1, "CG": 1, "GJ": 1, "JK": 1, "KP": 1,  # a side branch
    "GH": 1, "HJ": 3,  # an expensive detour inside it
    "BD": 1, "DL": 1, "LO": 1,  # three short forks of the spine
    "EF": 1, "FM": 1,
    "IN": 1, "NQ": 1,
}


def example() -> Costs:
    src = [NAMES.index(e[0]) for e in EDGES]
    dst = [NAMES.index(e[1]) for e in EDGES]
    return Costs.from_edges(17, src, dst, comp=np.ones(17), comm=list(EDGES.values()))


def names(nodes: np.ndarray) -> str:
    return "".join(NAMES[int(v)] for v in nodes)


def test_hand_derived_clusters_and_devices() -> None:
    """K = 2, every comp 1, comm as in EDGES; node ids are the letters' order (topological).

    **Slicing, primary 1.** Bottom levels (comp + comm, sink side): Q 1, P 1+2+1=4, O 7,
    N 1+1+1=3, M 10, L 1+1+7=9, K 1+1+4=6, J 8, I 1+max(2+10, 1+3)=13, H 1+3+8=12,
    G 1+max(1+8, 1+12)=14, F 1+1+10=12, E 1+max(2+13, 1+12)=16, D 1+1+9=11, C 1+1+14=16,
    B 1+max(2+16, 1+11)=19, A 1+max(2+19, 1+16)=22. Start at A (22) and follow the largest
    comm + bl: B (21 > 17), E (18 > 12), I (15 > 13), M (12 > 4), O, P, Q:
    primary 1 = ABEIMOPQ, weight 8 + 7·2 = 22.

    **Primary 2**, levels recomputed on C D F G H J K L N (live edges CG GJ JK GH HJ DL):
    bl K 1, J 1+1+1=3, H 1+3+3=7, G 1+max(1+3, 1+7)=9, C 1+1+9=11, D 3, L 1, F 1, N 1.
    Start at C (11): G, then H (1+7 > 1+3), J, K: primary 2 = CGHJK, weight 5 + 6 = 11.

    **Secondaries** (stale levels of D F L N, live edge DL): w_lvl D 0+3, L 2+1, F 0+1,
    N 0+1; order by w_lvl, then tl, then id: D, L, F, N. D walks to L: {DL}; then {F}, {N}.

    **LFLAM levels** with comm inside clusters zeroed (cut edges: AC KP BD LO EF FM IN NQ):
    tl_cl A0 B1 E2 I3 C2 G3 H4 J5 K6 D3 L4 F4 M6 N5 O7 P8 Q9; bl_cl F 1+1+4=6, L 1+1+3=5,
    N 1+1+1=3, D 1+5=6. Criticality tl(first)+Σcomp+bl(last)−comp(last): {F} 4+1+5=10,
    {DL} 3+2+4=9, {N} 5+1+2=8, so the order is F, DL, N. CCR = 30/17 < 10: only totally
    communicating clusters are eligible (all three are, with device 0). Every run lasts 1 and
    every level is an integer, so "the run [tl, tl + 1) meets the span [a, b)" is "a <= tl < b".

    **Lookahead pass 1.** {F}: span [fin E = 3, tl M = 6): loads dev0 I = 1, dev1 G H J = 3;
    unmapped in span D L N F minus F itself = 3; after = 1 + 1 = 2, needs max(0, 2 − 3) = 0
    ≤ 3: (a) holds, F → 0. {DL}: span [fin B = 2, tl O = 7): dev0 E I F M = 4, dev1 C G H J K
    = 5; unmapped N = 1; after = 4 + 2 = 6, needs 6 − 5 = 1 ≤ 1: (a) holds, DL → 0. {N}:
    span [fin I = 4, tl Q = 9): dev0 F L M O P = 5, dev1 H J K = 3, unmapped 0; after 6 needs
    3 > 0 (a fails); 6 > 3 (b fails); comm 2 ≤ 1 + 5 + 0 (c fails): N stays.
    **Pass 2** maps nothing, so the loop stops after 2 passes (≤ ⌈log₂ 17⌉ = 5).

    **Level-aware balancing.** {N}: Eq. 1 gives dev0 5 + 0 = 5 and dev1 3 + 2 = 5, a tie,
    broken towards the most communication (2 with dev0): N → 0.
    """
    c = example()
    s = slice_graph(c, 2)
    assert [names(s.members(i)) for i in range(s.n_clusters)] == ["ABEIMOPQ", "CGHJK", "DL", "F", "N"]
    state = prepare(c, s)
    assert state.tl_cl.tolist() == [0, 1, 2, 3, 2, 4, 3, 4, 3, 5, 6, 4, 6, 5, 7, 8, 9]
    assert [names(s.members(int(cl))) for cl in state.order] == ["F", "DL", "N"]
    device, info = lflam(c, s)
    assert names(np.flatnonzero(device == 0)) == "ABDEFILMNOPQ"
    assert names(np.flatnonzero(device == 1)) == "CGHJK"
    assert info["lookahead_passes"] == 2
    assert info["lookahead_mapped"] == 2
