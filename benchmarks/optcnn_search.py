"""OptCNN (paper 3): search time of Algorithm 1, DFS baseline, VGG-16 strategy, layer-wise vs baselines.

Three tables, all under our cost model (``dnnpart.solvers.optcnn``: P100 roofline, NVLink
inside a node, 100 Gb/s EDR between nodes of 4 GPUs, per-GPU batch 32):

1. **Table 3**: cost-table construction time and Algorithm 1's search time *given the
   tables* (median of ``--repeat`` runs), K after eliminations, and the exhaustive DFS baseline
   (time budget ``--dfs-budget``) on LeNet-5 and AlexNet, for 4 GPUs in one node; Inception-v3
   and ResNet-152 also on 16 GPUs over 4 nodes. Targets: VGG-16 <= 0.2 s, Inception-v3 <= 0.5 s
   (4 GPUs), Inception-v3 <= 5 s (16 GPUs), table construction <= 30 s.
2. **Table 5**: VGG-16 on 4 GPUs, our optimal configuration per layer beside the paper's,
   with t_O of both strategies under our model (layers the paper's strategy leaves open or
   that our divisibility rule forbids are completed optimally and marked).
3. **Figs. 7-8 in numbers**: t_O of layer-wise, data, model and OWT parallelism for AlexNet,
   VGG-16 and Inception-v3 on 1, 2, 4, 8, 16 GPUs, layer-wise speedup over one GPU, and the
   bytes each strategy moves per step (transfers both ways plus parameter sync), and the
   replayed step time of the layer-wise strategy (AlexNet, VGG-16) beside t_O.

The table functions live in :mod:`dnnpart.reproduce.optcnn2018` (``dnnpart reproduce
optcnn2018`` prints the same tables); this script times them on the full configuration space.

Usage::

    python benchmarks/optcnn_search.py [--repeat 5] [--dfs-budget 60]

Prints Markdown and writes it to ``bench-results/optcnn_search.md``.
"""

from __future__ import annotations

import argparse
import os
import platform
from pathlib import Path

import numpy as np

from dnnpart.reproduce.optcnn2018 import grid, grid_cells, table3, table5

REPO = Path(__file__).resolve().parent.parent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--dfs-budget", type=float, default=60.0)
    args = ap.parse_args()
    out = ["# OptCNN search benchmark (paper 3)", "",
           f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
           f"Python {platform.python_version()}, numpy {np.__version__}.", ""]
    t3, c3 = table3(args.repeat, args.dfs_budget)
    t5, c5 = table5()
    tg, cg = grid(grid_cells(("alexnet", "vgg16", "inception_v3"), (1, 2, 4, 8, 16)))
    out += ["## Table 3: search time (Alg. 1 given the tables; tables built apart)", "", *t3, "",
            "## Table 5: VGG-16 on 4 GPUs", "", *t5, "",
            "## Layer-wise vs baselines (t_O per step, per-GPU batch 32)", "", *tg, "",
            "## Checks", "", *[f"* {c}" for c in (*c3, *c5, *cg)], ""]
    text = "\n".join(out)
    print(text)
    (REPO / "bench-results").mkdir(exist_ok=True)
    (REPO / "bench-results" / "optcnn_search.md").write_text(text)


if __name__ == "__main__":
    main()
