"""Paper 1's workloads as they lie in a dnn-partitioning folder (``throughput/``, ``human-experts/``).

The files are never part of this repository; callers pass the folder (by default
``../shared/workloads/dnn-partitioning`` beside the checkout).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, slots=True, kw_only=True)
class Workload:
    """One workload of paper 1, Table 1.

    Attributes
    ----------
    key : stable name, e.g. ``"layer-gnmt-training"``.
    title : the paper's row name, e.g. ``"GNMT"``.
    granularity : ``"operator"`` or ``"layer"``.
    mode : ``"inference"`` or ``"training"``.
    graph_file : path inside the workloads folder.
    expert_file : human-expert split, ``None`` without one.
    """

    key: str
    title: str
    granularity: str
    mode: str
    graph_file: str
    expert_file: str | None = None

    @property
    def group(self) -> str:
        """The paper's row group, e.g. ``"layer inference"``."""
        return f"{self.granularity} {self.mode}"


def _op(key: str, title: str, stem: str, mode: str) -> Workload:
    return Workload(key=key, title=title, granularity="operator", mode=mode,
                    graph_file=f"throughput/OperatorGraphs/{stem}_{mode}.json")


def _layer(key: str, title: str, stem: str, mode: str, expert: str) -> Workload:
    return Workload(key=key, title=title, granularity="layer", mode=mode,
                    graph_file=f"throughput/LayerGraphs/{stem}_{mode}.json",
                    expert_file=f"human-experts/{expert}_expert.json")


#: Table 1's workloads that the public dnn-partitioning data carries, in the paper's order
#: (operator-graph BERT-6 and BERT-12 training are not in it). Training graphs without a
#: training expert split use the inference split, filled through colocation.
WORKLOADS: tuple[Workload, ...] = (
    _op("op-bert3-inference", "BERT-3", "bert_l-3", "inference"),
    _op("op-bert6-inference", "BERT-6", "bert_l-6", "inference"),
    _op("op-bert12-inference", "BERT-12", "bert_l-12", "inference"),
    _op("op-resnet50-inference", "ResNet50", "resnet50", "inference"),
    _op("op-bert3-training", "BERT-3", "bert_l-3", "training"),
    _op("op-resnet50-training", "ResNet50", "resnet50", "training"),
    _layer("layer-bert24-inference", "BERT-24", "bert24", "inference", "bert24_inference"),
    _layer("layer-resnet50-inference", "ResNet50", "resnet50", "inference", "resnet50_inference"),
    _layer("layer-inceptionv3-inference", "InceptionV3", "inceptionv3", "inference",
           "inceptionv3_inference"),
    _layer("layer-gnmt-inference", "GNMT", "gnmt", "inference", "gnmt_inference"),
    _layer("layer-bert24-training", "BERT-24", "bert24", "training", "bert24_training"),
    _layer("layer-resnet50-training", "ResNet50", "resnet50", "training", "resnet50_inference"),
    _layer("layer-inceptionv3-training", "InceptionV3", "inceptionv3", "training",
           "inceptionv3_inference"),
    _layer("layer-gnmt-training", "GNMT", "gnmt", "training", "gnmt_training"),
)


def find_workloads(folder: str | Path, only: list[str] | None = None) -> list[tuple[Workload, Path]]:
    """The workloads whose graph file exists under ``folder``, with their graph paths.

    ``only`` keeps those whose key contains one of the given substrings.

    Examples
    --------
    >>> find_workloads("/nonexistent")
    []
    """
    root = Path(folder)
    found = []
    for w in WORKLOADS:
        if only and not any(s in w.key for s in only):
            continue
        path = root / w.graph_file
        if path.is_file():
            found.append((w, path))
    return found
