"""Real training graphs from autograd: forward + backward (+ optimizer step) at aten level.

The model is first captured with ``torch.export`` (:mod:`dnnpart.frontends.export_import`);
its graph module is then replayed under ``make_fx`` on fake tensors (nothing is allocated, meta
models work) inside a function that computes a loss and ``torch.autograd.grad`` of it with
respect to every parameter. ``preserve_node_meta`` carries each forward node's module path
and autograd sequence number (``seq_nr``) into the joint graph; autograd marks the nodes it
creates while differentiating (``autograd_backward``) with the ``seq_nr`` of the forward op
they differentiate. That is how ``forward_of`` is set: a backward node's forward op is the
last forward node with its ``seq_nr``; a backward node whose ``seq_nr`` no forward node has
(the loss seed) is an **orphan** and listed as such. So is one carrying the loss's own
``seq_nr``: the loss's gradient, and the sums autograd's engine makes of the gradients of a
value read twice (a residual stream), which it makes outside any backward function and tags
with the loss's number -- naming the loss as their forward op would put a block's gradient
sums in the last stage.

The graph (choices, also in ``docs/models.md``):

* one node per **parameter** (memory class ``residual``; ``param_bytes`` = its bytes, 3x with
  Adam: weights + two moments), feeding the operators that read it. Tied parameters are one
  node. Its compute time is 0.
* one node per aten op of the forward and backward passes (``normal``; activations with their
  real sizes as ``output_bytes``).
* with ``optimizer``, one **update op per parameter** (memory class ``reference``, colocated
  with its parameter through a shared colocation class), reading the parameter and its
  gradient: ``sgd`` (``p -= lr g``: 2 FLOPs and 3 tensors moved per element) or ``adam``
  (moments, bias correction, update: 12 FLOPs, 7 tensors per element). Never a fused
  ``_foreach_`` op, so each reference op updates one residual tensor.
* the loss is the mean of the model's (first) output in fp32, a stand-in for a real loss
  that adds a reduction and its gradient and nothing else.
* **attention as a CPU run executes it.** On a meta model ``scaled_dot_product_attention``
  would decompose into two products and a softmax (the backend torch picks for a meta tensor),
  which stash the attention probabilities; a run of the same module on CPU calls the fused
  flash kernel, which stashes its output and log-sum-exp. The replay asks torch's own backend
  choice on CPU stand-ins and calls the fused kernel where a run would (``_replay``), so the
  planned time and memory are the run's (ViT-small's stage memory was over-predicted by 22%).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from dnnpart.cost.model import CostModel
from dnnpart.cost.ops import Work, aten_op_name, operator_work
from dnnpart.errors import FormatError
from dnnpart.frontends.build import UnknownOperatorWarning
from dnnpart.frontends.export_import import aten_spec, module_path_of, tensor_vals
from dnnpart.frontends.ir import layer_key
from dnnpart.graph.core import NO_CLASS, NO_FORWARD, REFERENCE, RESIDUAL, Graph, LayerAttrs, build_graph

if TYPE_CHECKING:
    from torch import fx

OPTIMIZERS = ("sgd", "adam")
#: Per element of a parameter: (FLOPs, tensors moved) of one update op.
UPDATE_WORK = {"sgd": (2.0, 3.0), "adam": (12.0, 7.0)}
#: Residual bytes per parameter byte: the weights, plus Adam's two moments.
RESIDUAL_FACTOR = {None: 1.0, "sgd": 1.0, "adam": 3.0}


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class TrainingGraph:
    """A priced training graph and facts about its capture."""

    graph: Graph
    flops: npt.NDArray[np.float64]
    orphans: tuple[str, ...] = ()
    unknown_ops: dict[str, int] = field(default_factory=dict)
    parameter_bytes: float = 0.0

    @property
    def total_flops(self) -> float:
        return float(self.flops.sum())


def joint_graph(gm: fx.GraphModule, example_inputs: tuple[Any, ...]) -> tuple[fx.GraphModule, list[str]]:
    """Forward + backward of ``gm`` (an exported module) as one fx graph on fake tensors.

    Returns the joint graph module and the parameter names, in placeholder order (tied
    parameters once).
    """
    import torch
    import torch.fx.traceback as fx_traceback
    from torch._functorch._aot_autograd.logging_utils import setup_stacktrace_preservation_hooks
    from torch.fx.experimental.proxy_tensor import make_fx
    from torch.nn.utils.stateless import _reparametrize_module

    named = dict(gm.named_parameters(remove_duplicate=False))
    unique: dict[int, str] = {}
    for name, p in named.items():
        unique.setdefault(id(p), name)
    names = list(unique.values())
    alias = {name: unique[id(p)] for name, p in named.items()}

    buffers = dict(gm.named_buffers(remove_duplicate=False))

    def step(params: dict[str, Any], inputs: tuple[Any, ...], bufs: dict[str, Any]) -> Any:
        full = {name: params[alias[name]] for name in named} | bufs
        with fx_traceback.preserve_node_meta(), _reparametrize_module(gm, full):
            out = _replay(gm, inputs)
            first = out[0] if isinstance(out, (tuple, list)) else out
            loss = first.float().mean()
            # marks the nodes autograd creates (autograd_backward) and keeps their seq_nr
            setup_stacktrace_preservation_hooks([loss.grad_fn])
            grads = torch.autograd.grad(loss, [params[n] for n in names], allow_unused=True)
        return loss, grads

    params = {name: named[name].detach().requires_grad_(True) for name in names}
    try:
        # tensor constants that export lifted into the module (not parameters or buffers) are
        # real tensors: let them in as constants
        joint: fx.GraphModule = make_fx(step, tracing_mode="fake", record_module_stack=True,
                                        _allow_non_fake_inputs=True)(
            params, example_inputs, buffers
        )
    except Exception as exc:  # make_fx raises many types
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise FormatError(f"autograd could not differentiate the captured model ({reason[:300]})") from None
    return joint, names


def _fused_attention_on_meta(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """The fused CPU kernel a real CPU run of ``scaled_dot_product_attention`` picks, or None.

    A meta model's attention would decompose into products and a softmax here (the backend
    choice for a meta tensor is the math one), while the run of the same module on CPU calls
    the fused flash kernel, which stashes only its output and log-sum-exp: a different time
    and much less memory. torch's own choice is asked on CPU stand-ins of the same shapes,
    dtypes and last-dimension strides (what the choice reads), each one row of storage.
    """
    import torch

    names = ("query", "key", "value", "attn_mask", "dropout_p", "is_causal")
    call = dict(zip(names, args, strict=False)) | kwargs
    tensors = [call.get(k) for k in ("query", "key", "value")]
    if not all(isinstance(t, torch.Tensor) and t.device.type == "meta" for t in tensors):
        return None

    def stand_in(t: Any) -> Any:
        if not isinstance(t, torch.Tensor):
            return t
        grad = t.requires_grad and (t.dtype.is_floating_point or t.dtype.is_complex)
        row = torch.zeros(t.shape[-1] if t.dim() else 1, dtype=t.dtype, requires_grad=grad)
        strides = [0] * (t.dim() - 1) + [t.stride()[-1] if t.dim() else 1]
        return row.as_strided(t.shape, strides)

    from torch._subclasses.fake_tensor import unset_fake_temporarily
    from torch.fx.experimental.proxy_tensor import disable_proxy_modes_tracing

    with unset_fake_temporarily(), disable_proxy_modes_tracing():  # a real CPU question
        probe = {k: stand_in(v) for k, v in call.items()}
        choice = int(torch._fused_sdp_choice(**probe))
    if choice != _FLASH_BACKEND:
        return None
    return torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default(
        call["query"], call["key"], call["value"], float(call.get("dropout_p", 0.0)),
        bool(call.get("is_causal", False)), attn_mask=call.get("attn_mask"),
        scale=call.get("scale"))[0]


#: ``torch._fused_sdp_choice``'s number for the flash kernel (``SDPBackend.FLASH_ATTENTION``).
_FLASH_BACKEND = 1


def _replay(gm: Any, inputs: tuple[Any, ...]) -> Any:
    """Runs ``gm`` on ``inputs`` node by node, calling CPU's fused attention where a run would."""
    import torch

    class FusedAttentionInterpreter(torch.fx.Interpreter):
        def call_function(self, target: Any, args: Any, kwargs: Any) -> Any:
            if target is torch.ops.aten.scaled_dot_product_attention.default:
                fused = _fused_attention_on_meta(tuple(args), dict(kwargs))
                if fused is not None:
                    return fused
            return super().call_function(target, args, kwargs)

    return FusedAttentionInterpreter(gm).run(*inputs)


def training_graph(
    gm: fx.GraphModule,
    example_inputs: tuple[Any, ...],
    cost_model: CostModel,
    *,
    optimizer: str | None = None,
    strip_prefix: str = "",
) -> TrainingGraph:
    """The priced training graph of an exported module (see the module docstring)."""
    if optimizer is not None and optimizer not in OPTIMIZERS:
        raise FormatError(f"--optimizer {optimizer!r}: expected one of {', '.join(OPTIMIZERS)}")
    joint, param_names = joint_graph(gm, example_inputs)
    nodes = list(joint.graph.nodes)
    placeholders = [n for n in nodes if n.op == "placeholder"]
    # make_fx flattens (params dict, inputs tuple): the parameters come first
    param_nodes = placeholders[: len(param_names)]
    factor = RESIDUAL_FACTOR[optimizer]

    names: list[str] = []
    op_types: list[str] = []
    kinds: list[str] = []
    works: list[Work] = []
    paths: list[str] = []
    mclass: list[int] = []
    pbytes: list[float] = []
    obytes: list[float] = []
    backward: list[bool] = []
    fwd_of: list[int] = []
    color: list[int] = []
    shapes: list[tuple[int, ...]] = []
    kernel: list[tuple[int, ...]] = []
    stride: list[tuple[int, ...]] = []
    padding: list[tuple[int, ...]] = []
    index: dict[str, int] = {}

    def add(name: str, op_type: str, kind: str, work: Work, **kw: Any) -> int:
        index[name] = len(names)
        names.append(name)
        op_types.append(op_type)
        kinds.append(kind)
        works.append(work)
        paths.append(kw.get("path", ""))
        mclass.append(kw.get("mclass", 0))
        pbytes.append(kw.get("pbytes", 0.0))
        obytes.append(kw.get("obytes", 0.0))
        backward.append(kw.get("backward", False))
        fwd_of.append(kw.get("forward_of", NO_FORWARD))
        color.append(kw.get("color", NO_CLASS))
        shapes.append(kw.get("shape", ()))
        kernel.append(kw.get("kernel", ()))
        stride.append(kw.get("stride", ()))
        padding.append(kw.get("padding", ()))
        return index[name]

    param_size: dict[str, float] = {}
    for cls, (pname, node) in enumerate(zip(param_names, param_nodes, strict=True)):
        vals = tensor_vals(node)
        size = float(sum(math.prod(v.shape) * v.element_size() for v in vals))
        param_size[node.name] = size
        path = _strip(pname.rpartition(".")[0], strip_prefix)
        # no kernel runs for a parameter: a calibrated device prices it as its meta class
        add(node.name, "parameter", "parameter", Work(0.0, 0.0, op_class="meta"), path=path, mclass=RESIDUAL,
            pbytes=size * factor, obytes=size, color=cls if optimizer else NO_CLASS,
            shape=tuple(vals[0].shape) if vals else ())

    seq_forward: dict[int, int] = {}
    orphans: list[str] = []
    const_shape = {
        n.name: tuple(int(d) for d in tensor_vals(n)[0].shape) for n in param_nodes if tensor_vals(n)
    }
    edges: list[tuple[str, str, float]] = []
    unknown: dict[str, int] = {}
    value_bytes: dict[str, float] = {n.name: param_size[n.name] for n in param_nodes}
    # the loss's sequence number: the last forward one before the backward pass; autograd's
    # engine tags with it the sums it makes of the gradients of a value read twice (a residual
    # stream), outside any backward function, so nodes carrying it are orphans, not the loss's
    loss_seq: int | None = None
    backward_started = False
    for node in nodes:
        if node.op != "call_function":
            continue
        source_type = aten_op_name(node.target)
        vals = tensor_vals(node)
        spec = aten_spec(node, source_type, vals, const_shape)
        work = operator_work(spec)
        if not work.known:
            unknown[source_type] = unknown.get(source_type, 0) + 1
        out_bytes = float(sum(math.prod(v.shape) * v.element_size() for v in vals))
        value_bytes[node.name] = out_bytes if vals else 8.0
        is_bw = bool(node.meta.get("autograd_backward", False))
        seq = node.meta.get("seq_nr")
        forward = NO_FORWARD
        path = module_path_of(node, strip_prefix)
        if is_bw:
            backward_started = True
            partner = seq_forward.get(int(seq)) if seq is not None and seq != loss_seq else None
            if partner is None:
                orphans.append(node.name)
            else:
                forward = partner
                path = paths[partner]
        attrs = spec.attrs
        v = add(node.name, spec.op_type, source_type, work, path=path, obytes=out_bytes,
                backward=is_bw, forward_of=forward,
                shape=spec.output_shapes[0] if spec.output_shapes else (),
                # a convolution's backward has a stride (its kind) but no window of its own
                kernel=tuple(attrs.get("kernel", ())),
                stride=tuple(attrs.get("stride", ())) if attrs.get("kernel") else (),
                padding=tuple(attrs.get("padding", ())))
        if not is_bw and seq is not None:
            seq_forward[int(seq)] = v
            if not backward_started:
                loss_seq = int(seq)
        for a in dict.fromkeys(node.all_input_nodes):
            if a.name in index:
                edges.append((a.name, node.name, value_bytes.get(a.name, 0.0)))

    if optimizer is not None:
        output = next(n for n in nodes if n.op == "output")
        grads = list(output.args[0])[1:]  # flattened (loss, *grads)
        flops_per, tensors = UPDATE_WORK[optimizer]
        for cls, (pnode, grad) in enumerate(zip(param_nodes, grads, strict=True)):
            size = param_size[pnode.name]
            itemsize = tensor_vals(pnode)[0].element_size() if tensor_vals(pnode) else 4
            elements = size / itemsize
            name = f"{optimizer}_update_{pnode.name}"
            add(name, f"{optimizer}_update", f"{optimizer}_update",
                Work(flops_per * elements, tensors * size, op_class="elementwise"),
                path=paths[index[pnode.name]],
                mclass=REFERENCE, backward=True, color=cls, shape=shapes[index[pnode.name]])
            edges.append((pnode.name, name, size))
            if grad is not None and grad.name in index:
                edges.append((grad.name, name, value_bytes.get(grad.name, size)))

    n = len(names)
    times = cost_model.compute_times_ms(works)
    ids = np.arange(n)
    src = [index[a] for a, _, _ in edges]
    dst = [index[b] for _, b, _ in edges]
    nbytes = [b for _, _, b in edges]
    layer_names: dict[str, int] = {}
    layers = [layer_names.setdefault(layer_key(p), len(layer_names)) if p else -1 for p in paths]
    scale = cost_model.bytes_factor  # fp32 capture -> tensors at the model's precision
    param_arr = np.asarray(pbytes, dtype=np.float64) * scale
    out_arr = np.asarray(obytes, dtype=np.float64) * scale
    memory = param_arr + out_arr
    graph = build_graph(
        ids, src, dst,
        compute_time=times,
        edge_cost=cost_model.edge_costs_ms(nbytes) if nbytes else np.zeros(0),
        edge_bytes=np.asarray(nbytes, dtype=np.float64) * scale,
        memory_bytes=memory,
        is_backward=backward,
        color_class=color,
        layer_id=layers,
        names=names,
        op_types=op_types,
        duplicate_edges="sum",
        memory_class=mclass,
        param_bytes=param_arr,
        output_bytes=out_arr,
        forward_of=fwd_of,
        module_paths=paths,
        layer_attrs=LayerAttrs(kind=tuple(kinds), output_shape=tuple(shapes), kernel=tuple(kernel),
                               stride=tuple(stride), padding=tuple(padding)),
    )
    if unknown:
        listing = ", ".join(f"{t} (x{c})" for t, c in sorted(unknown.items()))
        warnings.warn(f"no cost formula for operator type(s) {listing}; they are priced by the bytes "
                      "they move only", UnknownOperatorWarning, stacklevel=2)
    flops = np.array([w.flops for w in works])[graph.original_ids]
    return TrainingGraph(graph=graph, flops=flops, orphans=tuple(orphans), unknown_ops=unknown,
                         parameter_bytes=float(sum(param_size.values())) * scale)


def _strip(path: str, prefix: str) -> str:
    if prefix and (path == prefix or path.startswith(prefix + ".")):
        return path[len(prefix) + 1 :]
    return path
