"""Built-in example problems ("zoo"): real-shaped DNN graphs generated in code, no data files.

Specs name a model and optionally its training variant: ``"zoo:bert-3"``,
``"zoo:bert-12-training"``, ``"zoo:resnet50"``, ``"zoo:resnet18-training"``. ``bert-<L>`` is
parsed for any ``L`` in ``1..4096`` (BERT-base width); ResNets come in depths 18, 34, 50, 101 and 152.
The ``zoo:`` prefix is optional.

Paper 2's workloads are captured from torch definitions (:mod:`dnnpart.zoo.captured`:
``zoo:word-rnn``, ``zoo:word-rnn-2``, ``zoo:char-crn``, ``zoo:wide-resnet``,
``zoo:deep-transformer``, each with ``:KEY=VALUE`` parameters; torch needed), and graphs of any
size are drawn, without torch, by ``zoo:synthetic:nodes=N,seed=S,like=NAME``
(:mod:`dnnpart.zoo.synthetic`). These get 4 accelerators of 16 GB and one CPU.

Each example comes with paper 1's deployment (section 6): 16 GB accelerators and one CPU on a
PCIe 3.0 x16 host link; 3 accelerators for the small models (BERT with up to 6 layers,
ResNet-18/34), 6 for the others. Graphs are priced by the analytic model of
:mod:`dnnpart.zoo.cost` (times in ms).

Model builders are imported on first use, so ``import dnnpart.zoo`` stays light.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dnnpart.errors import UsageError
from dnnpart.limits import check_int_range

if TYPE_CHECKING:
    from dnnpart.problem import Problem

PREFIX = "zoo:"
#: Accelerator memory of the default clusters (paper 1, section 6).
ACCELERATOR_MEMORY_BYTES = 16e9
#: Models up to this many BERT layers or ResNet blocks get 3 accelerators, larger ones 6.
_SMALL_BERT_LAYERS = 6
_SMALL_RESNETS = (18, 34)
_RESNET_DEPTHS = (18, 34, 50, 101, 152)
#: Most layers of ``zoo:bert-<L>`` (a graph of ~135,000 operators).
MAX_BERT_LAYERS = 4096
_SPEC_RE = re.compile(r"^(?:(bert)-(\d+)|(resnet)(\d+))(-training)?$")


@dataclass(frozen=True, slots=True)
class ExampleSpec:
    """A parsed example name.

    Examples
    --------
    >>> parse_spec("zoo:bert-3-training")
    ExampleSpec(family='bert', size=3, training=True)
    """

    family: str  # "bert" or "resnet"
    size: int  # transformer layers or ResNet depth
    training: bool = False

    @property
    def spec(self) -> str:
        """Canonical name, e.g. ``"zoo:resnet50-training"``."""
        sep = "-" if self.family == "bert" else ""
        return f"{PREFIX}{self.family}{sep}{self.size}" + ("-training" if self.training else "")

    @property
    def n_accelerators(self) -> int:
        small = (self.family == "bert" and self.size <= _SMALL_BERT_LAYERS) or (
            self.family == "resnet" and self.size in _SMALL_RESNETS
        )
        return 3 if small else 6

    def description(self) -> str:
        if self.family == "bert":
            model = f"BERT-base width, {self.size} transformer layers, operator graph, seq 128"
        else:
            model = f"ResNet-{self.size}, layer graph, 224x224 image"
        mode = "training (forward + backward)" if self.training else "inference"
        return f"{model}, {mode}, batch 1; {self.n_accelerators} accelerators + 1 CPU"


def _canonical() -> list[ExampleSpec]:
    out = []
    for training in (False, True):
        out += [ExampleSpec("bert", n, training) for n in (3, 6, 12, 24)]
        out += [ExampleSpec("resnet", d, training) for d in _RESNET_DEPTHS]
    return sorted(out, key=lambda e: (e.family, e.size, e.training))


#: Listed examples: canonical spec -> one-line description. ``bert-<L>`` works for any L.
EXAMPLES: dict[str, str] = {e.spec: e.description() for e in _canonical()}


def list_examples() -> list[tuple[str, str]]:
    """The listed examples as ``(spec, description)`` pairs.

    Examples
    --------
    >>> list_examples()[0][0]
    'zoo:bert-3'
    """
    return list(EXAMPLES.items())


def parse_spec(spec: str) -> ExampleSpec:
    """Parse an example name; ``ValueError`` lists the valid ones.

    Examples
    --------
    >>> parse_spec("resnet50").spec
    'zoo:resnet50'
    """
    name = spec.strip().lower()
    if name.startswith(PREFIX):
        name = name[len(PREFIX) :]
    match = _SPEC_RE.match(name)
    parsed = None
    if match:
        training = match.group(5) is not None
        if match.group(1) and int(match.group(2)) >= 1:
            layers = check_int_range(int(match.group(2)), f"{spec}: layers", 1, MAX_BERT_LAYERS,
                                     "the graph has ~33 operators per layer")
            parsed = ExampleSpec("bert", layers, training)
        elif match.group(3) and int(match.group(4)) in _RESNET_DEPTHS:
            parsed = ExampleSpec("resnet", int(match.group(4)), training)
    if parsed is None:
        raise UsageError(
            f"unknown example {spec!r}; valid examples are {', '.join(EXAMPLES)} "
            f"(and {PREFIX}bert-<L>[-training] for any number of layers L in 1..{MAX_BERT_LAYERS})"
        )
    return parsed


def load_example(spec: str) -> Problem:
    """Build an example problem: graph, default cluster, throughput objective.

    Parameters
    ----------
    spec : e.g. ``"zoo:bert-3"``, ``"zoo:bert-12-training"``, ``"zoo:resnet50"``.

    Raises
    ------
    ValueError
        Unknown spec; the message lists the valid ones.

    Examples
    --------
    >>> p = load_example("zoo:bert-3")
    >>> p.name, p.graph.n_nodes, p.cluster.n_accelerators
    ('zoo:bert-3', 99, 3)
    """
    from dnnpart.devices.presets import reference_cluster
    from dnnpart.problem import Problem

    name = spec.strip()
    body = name[len(PREFIX) :] if name.startswith(PREFIX) else name
    family = body.split(":")[0]
    if family == "synthetic" or family in _captured_names():
        if family == "synthetic":
            from dnnpart.zoo.synthetic import synthetic_graph

            graph = synthetic_graph(PREFIX + body)
        else:
            from dnnpart.zoo.captured import workload_graph

            graph = workload_graph(PREFIX + body)
        cluster = reference_cluster(n_accelerators=4, n_cpus=1, memory_bytes=ACCELERATOR_MEMORY_BYTES)
        return Problem(graph=graph, cluster=cluster, name=PREFIX + body)
    parsed = parse_spec(spec)
    if parsed.family == "bert":
        from dnnpart.zoo.bert import bert

        graph = bert(parsed.size, training=parsed.training)
    else:
        from dnnpart.zoo.resnet import resnet

        graph = resnet(parsed.size, training=parsed.training)
    cluster = reference_cluster(
        n_accelerators=parsed.n_accelerators, n_cpus=1, memory_bytes=ACCELERATOR_MEMORY_BYTES
    )
    return Problem(graph=graph, cluster=cluster, name=parsed.spec)


def _captured_names() -> tuple[str, ...]:
    from dnnpart.zoo.captured import WORKLOADS

    return tuple(WORKLOADS)


__all__ = ["EXAMPLES", "ExampleSpec", "list_examples", "load_example", "parse_spec"]
