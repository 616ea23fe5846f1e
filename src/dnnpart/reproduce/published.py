"""Published figures of paper 1 (Tarnawski et al. 2020, "Efficient algorithms for device
placement of DNN graph operators", NeurIPS 2020), typed in from the paper's tables.

Sources: Table 1 (time per sample, TPS, lower is better; DP runtimes), Table 3 (DP on the
operator graph vs on the graph contracted by layer) and Table 4 (single-sample latency).
Table 2 is Table 1 divided into the DP column, so it is derived, not typed in.
Workload keys are those of :mod:`dnnpart.reproduce.workloads`.
"""

from __future__ import annotations

from typing import Final

#: Table 1 columns, in the paper's order: key -> column title.
TABLE1_COLUMNS: Final[dict[str, str]] = {
    "dp": "DP",
    "ipc": "IP (contiguous)",
    "ipn": "IP (non-contiguous)",
    "dpl": "DPL",
    "expert": "Expert",
    "local-search": "Local search",
    "pipedream": "PipeDream",
    "scotch": "Scotch",
}

_NA = None
#: Table 1, TPS per workload and column (``None``: the paper has no figure).
TABLE1: Final[dict[str, dict[str, float | None]]] = {
    "op-bert3-inference": {"dp": 27.92, "ipc": 27.92, "ipn": 21.91, "dpl": 27.92, "expert": _NA,
                           "local-search": 24.32, "pipedream": _NA, "scotch": 35.94},
    "op-bert6-inference": {"dp": 29.58, "ipc": 29.58, "ipn": 28.33, "dpl": 29.58, "expert": _NA,
                           "local-search": 42.52, "pipedream": _NA, "scotch": 49.80},
    "op-bert12-inference": {"dp": 147.48, "ipc": 147.48, "ipn": 130.03, "dpl": 147.48, "expert": _NA,
                            "local-search": 257.38, "pipedream": _NA, "scotch": 230.12},
    "op-resnet50-inference": {"dp": 124.35, "ipc": 124.35, "ipn": 124.35, "dpl": 124.35, "expert": _NA,
                              "local-search": 250.08, "pipedream": _NA, "scotch": 197.84},
    "op-bert3-training": {"dp": 65.30, "ipc": 65.30, "ipn": 54.21, "dpl": 65.30, "expert": _NA,
                          "local-search": 66.17, "pipedream": _NA, "scotch": 416.97},
    "op-resnet50-training": {"dp": 255.19, "ipc": 255.19, "ipn": 255.19, "dpl": 255.19, "expert": _NA,
                             "local-search": 530.95, "pipedream": _NA, "scotch": 379.21},
    "layer-bert24-inference": {"dp": 17.79, "ipc": 17.79, "ipn": 17.71, "dpl": 17.79, "expert": 20.08,
                               "local-search": 17.80, "pipedream": 17.79, "scotch": 18.03},
    "layer-resnet50-inference": {"dp": 33.77, "ipc": 33.77, "ipn": 33.31, "dpl": 33.77, "expert": 43.92,
                                 "local-search": 35.63, "pipedream": 39.38, "scotch": 34.50},
    "layer-inceptionv3-inference": {"dp": 51.55, "ipc": 51.55, "ipn": 51.52, "dpl": 51.55,
                                    "expert": 102.48, "local-search": 54.03, "pipedream": 60.42,
                                    "scotch": 54.01},
    "layer-gnmt-inference": {"dp": 32.91, "ipc": 32.91, "ipn": 31.68, "dpl": 32.91, "expert": 46.21,
                             "local-search": 31.75, "pipedream": 33.03, "scotch": 34.92},
    "layer-bert24-training": {"dp": 41.75, "ipc": 41.75, "ipn": 39.79, "dpl": 41.75, "expert": 49.40,
                              "local-search": 39.93, "pipedream": 41.75, "scotch": 42.01},
    "layer-resnet50-training": {"dp": 78.63, "ipc": 78.63, "ipn": 76.65, "dpl": 78.65, "expert": 112.11,
                                "local-search": 81.32, "pipedream": 83.67, "scotch": 80.10},
    "layer-inceptionv3-training": {"dp": 122.76, "ipc": 123.35, "ipn": 117.72, "dpl": 123.93,
                                   "expert": 213.65, "local-search": 122.80, "pipedream": 128.32,
                                   "scotch": 128.32},
    "layer-gnmt-training": {"dp": 107.00, "ipc": 107.00, "ipn": 88.47, "dpl": 107.00, "expert": 137.15,
                            "local-search": 91.52, "pipedream": 107.35, "scotch": 107.00},
}

#: Table 1, runtime of the authors' single-threaded C++ DP, seconds ("0s" is below 0.5 s).
TABLE1_DP_RUNTIME_S: Final[dict[str, float]] = {
    "op-bert3-inference": 1, "op-bert6-inference": 5, "op-bert12-inference": 19,
    "op-resnet50-inference": 0, "op-bert3-training": 8, "op-resnet50-training": 2,
    "layer-bert24-inference": 0, "layer-resnet50-inference": 0,
    "layer-inceptionv3-inference": 32 * 60, "layer-gnmt-inference": 29,
    "layer-bert24-training": 0, "layer-resnet50-training": 1,
    "layer-inceptionv3-training": 58 * 60, "layer-gnmt-training": 42,
}

#: Table 3: (DP on the operator graph, DP on the graph contracted by layer), TPS.
TABLE3: Final[dict[str, tuple[float, float]]] = {
    "op-bert3-inference": (27.92, 27.92),
    "op-bert6-inference": (29.58, 29.58),
    "op-bert12-inference": (147.48, 159.43),
    "op-resnet50-inference": (124.35, 129.15),
    "op-bert3-training": (65.30, 65.30),
    "op-resnet50-training": (255.19, 269.63),
}

#: Table 4 columns: key -> column title.
TABLE4_COLUMNS: Final[dict[str, str]] = {
    "greedy": "Greedy",
    "maxload-dp": "Max-load DP",
    "scotch": "Scotch",
    "expert": "Expert",
    "ip": "IP",
}

#: Table 4, single-sample latency. A note marks the paper's daggers (memory exceeded by
#: 20-34 %) and "OOM" (exceeded more than 3x; no latency given).
TABLE4: Final[dict[str, dict[str, float | None]]] = {
    "op-bert3-inference": {"greedy": 416.20, "maxload-dp": 415.90, "scotch": 497.75, "expert": _NA,
                           "ip": 408.47},
    "op-bert6-inference": {"greedy": 494.13, "maxload-dp": 445.48, "scotch": 564.61, "expert": _NA,
                           "ip": 438.06},
    "op-bert12-inference": {"greedy": 867.84, "maxload-dp": 1327.03, "scotch": 1755.41, "expert": _NA,
                            "ip": 729.56},
    "op-resnet50-inference": {"greedy": 839.54, "maxload-dp": 1123.65, "scotch": 857.73, "expert": _NA,
                              "ip": 672.06},
    "layer-bert24-inference": {"greedy": 100.22, "maxload-dp": 108.03, "scotch": 108.03,
                               "expert": 111.94, "ip": 100.22},
    "layer-resnet50-inference": {"greedy": 4197.06, "maxload-dp": 1443.79, "scotch": 3610.87,
                                 "expert": _NA, "ip": 1191.02},
    "layer-inceptionv3-inference": {"greedy": 2485.24, "maxload-dp": 1621.74, "scotch": 3068.00,
                                    "expert": _NA, "ip": 1318.08},
    "layer-gnmt-inference": {"greedy": 268.50, "maxload-dp": 244.33, "scotch": 636.91,
                             "expert": 293.40, "ip": 225.6},
}

#: Table 4 marks: (workload, column) -> the paper's annotation.
TABLE4_MARKS: Final[dict[tuple[str, str], str]] = {
    ("layer-resnet50-inference", "scotch"): "†",
    ("layer-inceptionv3-inference", "scotch"): "†",
    ("layer-gnmt-inference", "scotch"): "†",
    ("layer-gnmt-inference", "expert"): "†",
    ("layer-resnet50-inference", "expert"): "OOM",
    ("layer-inceptionv3-inference", "expert"): "OOM",
}
