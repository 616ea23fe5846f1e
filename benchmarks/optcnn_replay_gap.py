"""OptCNN (paper 3): where the replay of the layer-wise optimum falls below t_O, and why.

For AlexNet and VGG-16 on 1, 2, 4, 8, 16 GPUs (the paper's 4 x 4 P100 cluster, per-GPU batch
32), the layer-wise optimum of Eq. 1 is replayed three ways:

* ``replay``: the default event-driven replay (:func:`dnnpart.simulate.layerwise.replay_strategy`),
  which overlaps transfers with compute; parameter sync after the whole backward pass;
* ``eager sync``: the same tasks, each layer's parameter sync as soon as its own backward
  ends (``sync="eager"``: sync also hides behind the backward pass of earlier layers);
* ``serialised``: each device's compute and ports as one resource (``serialise=True``): nothing
  overlaps on a device, which is Eq. 1's assumption.

``serialised / t_O = 1`` shows that the replay and Eq. 1 price the same tasks with the same
costs; the gap of ``replay`` is overlap. The share of t_O that is t_C, t_X and t_S is printed
beside it. Not a timing benchmark: the figures are model outputs, independent of the machine.

Usage::

    python benchmarks/optcnn_replay_gap.py

Prints Markdown and writes it to ``bench-results/optcnn_replay_gap.md``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from dnnpart.layerwise.hardware import P100, paper_bandwidth
from dnnpart.layerwise.models import build_model
from dnnpart.layerwise.strategy import strategy_configs, strategy_time
from dnnpart.layerwise.tables import build_tables
from dnnpart.simulate.layerwise import build_replay_tasks, schedule_tasks, serialised
from dnnpart.solvers.optcnn.search import optimize_tables

REPO = Path(__file__).resolve().parent.parent


def row(model: str, devices: int) -> str:
    """One Markdown row: t_O, its terms, and the three replays as fractions of t_O."""
    bw = paper_bandwidth(devices)
    tables = build_tables(build_model(model, 32 * devices), devices, P100, bw)
    best = optimize_tables(tables)
    configs = strategy_configs(tables, best.strategy)
    t_o = strategy_time(tables.graph, configs, P100, bw)
    s = best.strategy
    t_c = sum(float(tables.t_c[i][s[i]]) for i in range(len(s)))
    t_s = sum(float(tables.t_s[i][s[i]]) for i in range(len(s)))
    t_x = sum(float(tables.t_x[e][s[p], s[j]]) for e, (p, j) in enumerate(tables.edges))
    assert abs(t_c + t_s + t_x - t_o) <= 1e-9 * t_o  # Eq. 1, term by term
    tasks = build_replay_tasks(tables.graph, configs, P100, bw)
    eager = build_replay_tasks(tables.graph, configs, P100, bw, sync="eager")
    end = {name: float(np.max(schedule_tasks(t)[1]))
           for name, t in (("replay", tasks), ("eager", eager), ("serial", serialised(tasks)))}
    return (f"| {model} | {devices} | {1e3 * t_o:.2f} | {t_c / t_o:.3f} | {t_x / t_o:.3f} | "
            f"{t_s / t_o:.3f} | {end['replay'] / t_o:.3f} | {end['eager'] / t_o:.3f} | "
            f"{end['serial'] / t_o:.6f} |")


def main() -> None:
    lines = ["| network | GPUs | t_O (ms) | t_C share | t_X share | t_S share | replay / t_O | "
             "eager sync / t_O | serialised / t_O |", "|---|---|---|---|---|---|---|---|---|"]
    lines += [row(m, d) for m in ("alexnet", "vgg16") for d in (1, 2, 4, 8, 16)]
    text = "\n".join(["# OptCNN: replay vs t_O (benchmarks/optcnn_replay_gap.py)", "", *lines, ""])
    print(text)
    out = REPO / "bench-results" / "optcnn_replay_gap.md"
    out.parent.mkdir(exist_ok=True)
    out.write_text(text)


if __name__ == "__main__":
    main()
