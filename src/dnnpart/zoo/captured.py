"""Workloads at paper 2's (PARDNN) scale, defined here in torch and captured by our frontend.

``zoo:NAME[:KEY=VALUE,...]`` names one of :data:`WORKLOADS`; values are integers (or
``training=0/1``, ``optimizer=sgd|adam``). Each is captured with ``torch.export`` on the meta
device and, by default, as a real **training** graph from autograd
(:mod:`dnnpart.frontends.training`), since paper 2 partitions training graphs.

* ``word-rnn`` -- the Word-RNN of paper 2: an LSTM language model *unrolled* over the
  sequence (one cell per layer and step, as TensorFlow's static RNN builds it): 8 layers,
  hidden 2048, sequence 28, vocabulary 10,000, batch 32 (vocabulary and batch are ours: the
  paper states layers, width and length). ``word-rnn-2``: 32 layers, sequence 25.
* ``char-crn`` -- a character-level recurrent convolutional net in the spirit of paper 2's
  Char-CRN: character embedding (98 symbols, width 256), 4 convolutions (width 1024, kernel 3),
  an unrolled 2-layer LSTM (hidden 1024) over 64 steps, a per-step classifier.
* ``wide-resnet`` -- WRN-d-k on 32x32 images (Zagoruyko & Komodakis): ``depth=28``,
  ``widen=10`` by default; ``depth`` must be ``6n + 4`` (up to ~600), ``widen`` up to 14+.
* ``deep-transformer`` -- GPT-2 with 48 layers (``n_embd=1600, n_head=25``, GPT-2 1.5 B
  shape), 128 tokens; the parameters ``layers``, ``width``, ``heads``, ``inner`` (the
  feed-forward width; 0, the default: four times ``width``) and ``seq`` change it. Paper 2's
  TRN (its Table 3: 52 layers, inner 4,096 -- printed 4098 -- model dimension 2,048, 1.99 B
  parameters) is ``zoo:deep-transformer:layers=52,width=2048,heads=16,inner=4096`` (1.85 B
  with GPT-2's vocabulary).

Model sizes are whatever the parameters say; capture runs on fake tensors, so nothing of the
model's size is allocated.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dnnpart.errors import FormatError
from dnnpart.limits import check_int_range

if TYPE_CHECKING:
    from dnnpart.frontends.sources import ModelSource
    from dnnpart.graph.core import Graph


@dataclass(frozen=True, slots=True)
class Workload:
    """A captured workload's defaults and description."""

    defaults: dict[str, Any]
    description: str


WORKLOADS: dict[str, Workload] = {
    "word-rnn": Workload(
        {"layers": 8, "hidden": 2048, "seq": 28, "vocab": 10000, "batch": 32},
        "Word-RNN: unrolled 8-layer LSTM, hidden 2048, sequence 28 (paper 2)",
    ),
    "word-rnn-2": Workload(
        {"layers": 32, "hidden": 2048, "seq": 25, "vocab": 10000, "batch": 32},
        "Word-RNN-2: unrolled 32-layer LSTM, hidden 2048, sequence 25 (paper 2)",
    ),
    "char-crn": Workload(
        {"layers": 2, "hidden": 1024, "seq": 64, "vocab": 98, "batch": 32, "convs": 4, "channels": 1024},
        "Char-CRN-like: char embedding, 4 convolutions, unrolled 2-layer LSTM over 64 steps",
    ),
    "wide-resnet": Workload(
        {"depth": 28, "widen": 10, "batch": 32, "classes": 100},
        "Wide ResNet WRN-28-10 on 32x32 images (depth 6n+4, widening k)",
    ),
    "deep-transformer": Workload(
        {"layers": 48, "width": 1600, "heads": 25, "inner": 0, "seq": 128, "batch": 1},
        "GPT-2 48 layers, n_embd 1600, 25 heads (the 1.5 B shape), 128 tokens",
    ),
}
_COMMON = {"training": 1, "optimizer": ""}


def parse_workload(spec: str) -> tuple[str, dict[str, Any]]:
    """``zoo:word-rnn:layers=2,seq=4`` -> ``("word-rnn", {...all parameters...})``.

    Examples
    --------
    >>> name, params = parse_workload("zoo:word-rnn:layers=2,seq=4")
    >>> name, params["layers"], params["hidden"], params["training"]
    ('word-rnn', 2, 2048, 1)
    >>> parse_workload("zoo:word-rnn:depth=3")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    dnnpart.errors.FormatError: zoo:word-rnn:depth=3: depth: unknown parameter; word-rnn takes layers, ...
    """
    body = spec[4:] if spec.startswith("zoo:") else spec
    name, _, rest = body.partition(":")
    if name not in WORKLOADS:
        raise FormatError(f"{spec}: unknown workload {name!r}; expected one of {', '.join(WORKLOADS)}")
    params: dict[str, Any] = dict(WORKLOADS[name].defaults) | dict(_COMMON)
    for item in filter(None, (s.strip() for s in rest.split(","))):
        key, eq, value = item.partition("=")
        if not eq:
            raise FormatError(f"{spec}: {item!r}: expected KEY=VALUE")
        if key not in params:
            raise FormatError(f"{spec}: {key}: unknown parameter; {name} takes {', '.join(params)}")
        if key == "optimizer":
            if value not in ("", "sgd", "adam"):
                raise FormatError(f"{spec}: optimizer: expected sgd or adam, got {value!r}")
            params[key] = value
            continue
        try:
            number = int(value)
        except ValueError:
            raise FormatError(f"{spec}: {key}: expected an integer, got {value!r}") from None
        if number < (0 if key in ("training", "inner") else 1):
            raise FormatError(f"{spec}: {key}: expected a positive integer, got {number}")
        low, high, why = PARAMETER_BOUNDS[key]
        params[key] = check_int_range(number, f"{spec}: {key}", low, high, why)
    if name == "wide-resnet" and (params["depth"] - 4) % 6:
        raise FormatError(f"{spec}: depth: a wide ResNet has depth 6n + 4 (10, 16, 22, 28, ...)")
    if "seq" in params and "layers" in params and name != "deep-transformer":
        cells = params["layers"] * params["seq"]  # the LSTM is unrolled: one cell per layer and step
        if cells > MAX_UNROLLED_CELLS:
            raise FormatError(f"{spec}: layers, seq: {cells:,} unrolled LSTM cells (layers x seq), more "
                              f"than the {MAX_UNROLLED_CELLS:,} dnnpart captures (~15 operators each, "
                              "3x with the backward pass)")
    return name, params


_CAPTURE = "capture time and the graph grow with it"
#: ``(low, high, why)`` of every integer parameter: generous beside the papers' sizes, small
#: enough that a capture ends in minutes and its graph stays below a million operators.
PARAMETER_BOUNDS: dict[str, tuple[int, int, str]] = {
    "layers": (1, 256, _CAPTURE),
    "seq": (1, 4096, _CAPTURE),
    "convs": (1, 256, _CAPTURE),
    "depth": (10, 1000, _CAPTURE),
    "hidden": (1, 65536, "tensor sizes multiply it"),
    "width": (1, 65536, "tensor sizes multiply it"),
    "inner": (0, 262144, "tensor sizes multiply it"),
    "channels": (1, 65536, "tensor sizes multiply it"),
    "widen": (1, 64, "tensor sizes multiply it"),
    "heads": (1, 1024, "one operator group per head"),
    "vocab": (1, 1 << 20, "the embedding and classifier multiply it"),
    "classes": (1, 1 << 20, "the classifier multiplies it"),
    "batch": (1, 1 << 16, "tensor sizes multiply it"),
    "training": (0, 1, "a flag"),
}
#: Most LSTM cells (layers x steps) of an unrolled recurrent workload: Word-RNN-2 has 800.
MAX_UNROLLED_CELLS = 20_000


def workload_source(name: str, params: dict[str, Any]) -> ModelSource:
    """Build the torch model of a workload on the meta device, with its example inputs."""
    from dnnpart._optional import require

    torch = require("torch", extra="torch", caller=f"zoo:{name}")
    from dnnpart.frontends.sources import ModelSource

    if name == "deep-transformer":
        from dnnpart.frontends.sources import resolve_model

        spec = (f"hf:gpt2:n_layer={params['layers']},n_embd={params['width']},n_head={params['heads']},"
                f"n_positions={max(1024, params['seq'])}"
                + (f",n_inner={params['inner']}" if params["inner"] else ""))
        return resolve_model(spec, input_shapes=[(params["batch"], params["seq"])])
    with torch.device("meta"):
        if name in ("word-rnn", "word-rnn-2"):
            module = _word_rnn(params)
            x = torch.zeros((params["batch"], params["seq"]), dtype=torch.int64)
        elif name == "char-crn":
            module = _char_crn(params)
            x = torch.zeros((params["batch"], params["seq"]), dtype=torch.int64)
        else:
            module = _wide_resnet(params)
            x = torch.zeros((params["batch"], 3, 32, 32))
    module.eval()
    return ModelSource(spec=f"zoo:{name}", module=module, example_inputs=(x,),
                       input_shapes=[tuple(x.shape)], input_dtype=str(x.dtype).replace("torch.", ""))


def workload_graph(spec: str) -> Graph:
    """Capture a workload's graph (training with autograd unless ``training=0``)."""
    import warnings

    from dnnpart.cost.model import CostModel
    from dnnpart.frontends.sources import capture, import_source

    name, params = parse_workload(spec)
    source = workload_source(name, params)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if params["training"]:
            imported = import_source(source, cost_model=CostModel.from_presets(), training=True,
                                     optimizer=params["optimizer"] or None)
            return imported.graph
        from dnnpart.frontends.build import price_model

        _, ir = capture(source)
        return price_model(ir, CostModel.from_presets()).graph


# -- model definitions ---------------------------------------------------------------------


def _lstm_stack(torch: Any, params: dict[str, Any], input_width: int) -> Any:
    class LSTMCell(torch.nn.Module):  # type: ignore[misc]
        """One LSTM cell: the four gates from one input and one recurrent matrix product."""

        def __init__(self, width_in: int, hidden: int) -> None:
            super().__init__()
            self.ih = torch.nn.Linear(width_in, 4 * hidden)
            self.hh = torch.nn.Linear(hidden, 4 * hidden, bias=False)

        def forward(self, x: Any, h: Any, c: Any) -> tuple[Any, Any]:
            i, f, g, o = (self.ih(x) + self.hh(h)).chunk(4, dim=-1)
            c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
            return torch.sigmoid(o) * torch.tanh(c), c

    hidden = params["hidden"]
    return torch.nn.ModuleList(
        LSTMCell(input_width if i == 0 else hidden, hidden) for i in range(params["layers"])
    )


def _unrolled(torch: Any, cells: Any, steps: list[Any], hidden: int) -> list[Any]:
    batch = steps[0].shape[0]
    hs = [steps[0].new_zeros((batch, hidden)) for _ in cells]
    cs = [steps[0].new_zeros((batch, hidden)) for _ in cells]
    outs = []
    for x in steps:  # unrolled in time, like a static RNN
        for i, cell in enumerate(cells):
            hs[i], cs[i] = cell(x, hs[i], cs[i])
            x = hs[i]
        outs.append(x)
    return outs


def _word_rnn(params: dict[str, Any]) -> Any:
    import torch

    class WordRNN(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = torch.nn.Embedding(params["vocab"], params["hidden"])
            self.cells = _lstm_stack(torch, params, params["hidden"])
            self.head = torch.nn.Linear(params["hidden"], params["vocab"])

        def forward(self, tokens: Any) -> Any:
            emb = self.embed(tokens)
            steps = [emb[:, t] for t in range(tokens.shape[1])]
            outs = _unrolled(torch, self.cells, steps, params["hidden"])
            return torch.stack([self.head(h) for h in outs], dim=1)

    return WordRNN()


def _char_crn(params: dict[str, Any]) -> Any:
    import torch

    class CharCRN(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            ch = params["channels"]
            self.embed = torch.nn.Embedding(params["vocab"], 256)
            self.convs = torch.nn.ModuleList(
                torch.nn.Conv1d(256 if i == 0 else ch, ch, 3, padding=1) for i in range(params["convs"])
            )
            self.cells = _lstm_stack(torch, params, ch)
            self.head = torch.nn.Linear(params["hidden"], params["vocab"])

        def forward(self, chars: Any) -> Any:
            x = self.embed(chars).transpose(1, 2)
            for conv in self.convs:
                x = torch.relu(conv(x))
            steps = [x[:, :, t] for t in range(chars.shape[1])]
            outs = _unrolled(torch, self.cells, steps, params["hidden"])
            return torch.stack([self.head(h) for h in outs], dim=1)

    return CharCRN()


def _wide_resnet(params: dict[str, Any]) -> Any:
    import torch
    from torch import nn

    class Block(nn.Module):
        def __init__(self, cin: int, cout: int, stride: int) -> None:
            super().__init__()
            self.bn1, self.conv1 = nn.BatchNorm2d(cin), nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.bn2, self.conv2 = nn.BatchNorm2d(cout), nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.short = None if cin == cout and stride == 1 else nn.Conv2d(cin, cout, 1, stride, bias=False)

        def forward(self, x: Any) -> Any:
            o = torch.relu(self.bn1(x))
            y = self.conv2(torch.relu(self.bn2(self.conv1(o))))
            return y + (x if self.short is None else self.short(o))

    n, k = (params["depth"] - 4) // 6, params["widen"]
    widths = [16, 16 * k, 32 * k, 64 * k]
    layers: list[nn.Module] = [nn.Conv2d(3, 16, 3, 1, 1, bias=False)]
    for g in range(3):
        for i in range(n):
            layers.append(Block(widths[g] if i == 0 else widths[g + 1], widths[g + 1],
                                (1 if g == 0 else 2) if i == 0 else 1))
    layers += [nn.BatchNorm2d(widths[3]), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
               nn.Linear(widths[3], params["classes"])]
    return nn.Sequential(*layers)
