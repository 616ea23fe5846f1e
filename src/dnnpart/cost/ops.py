"""Work of one operator: floating-point operations and bytes moved through device memory.

Conventions: **FLOPs count the multiply and the add of a multiply-add separately** (a
``k``-term dot product is ``2k`` FLOPs, the way peak rates are quoted); bytes moved are the
operator's activation inputs, parameters and outputs, each read or written once (views move
nothing). Operator types are canonical lower-case names (:data:`CANONICAL`); the spellings
of ONNX (``"Conv"``, ``"BatchNormalization"``), torch modules (``"Conv2d"``) and torch
functions (``"conv2d"``, ``"add"``) are mapped onto them by :func:`canonical_op`.

An operator type the model does not know costs its bytes moved only, and is reported as
unknown (never silently zero): see :func:`operator_work`.

**Operator classes.** Each canonical type belongs to one class of :data:`OP_CLASS` (matmul,
conv, attention, elementwise, norm, embedding, reduce, copy, view, meta; the names of
:data:`dnnpart.devices.specs.OP_CLASSES`), carried by its :class:`Work`: a calibrated device
prices each class with its own measured parameters (:mod:`dnnpart.cost.model`). A backward
kernel belongs to its forward's class (``conv_backward`` to conv) except where it is another
kind of kernel (``threshold_backward`` is element-wise, ``softmax_backward`` a reduction). One
class is told by shape, not type: a convolution (or its backward) whose kernel reads one input
channel per output channel (weights ``(C, 1, k, k)``, depthwise) is ``depthwise_conv``: it is
memory-bound where a dense convolution is compute-bound (on a CPU its backward runs ten times
fewer FLOP/s), so one set of parameters cannot price both. Nor is a matrix product one class
on a CPU: with an operand stored transposed (column-major, a ``t`` view: a linear layer's
``x @ W.T``, a weight gradient's ``x.T @ g``) its kernel runs at another speed than with both
row-major (calibrated with one thread here: 62 GFLOP/s for either transposed, 70 for
neither), so a product whose capture knows its operands' strides has the kind ``nt`` (``B``
transposed), ``tn`` (``A``) or ``nn``. (A language-model head's product is slower still, 42
GFLOP/s at 256 x 512 by 512 x 50,257 in every layout: its weight fits no cache; calibration
includes head-sized products so that the fit sees it.) Likewise
element-wise operators differ by an order of magnitude per element (measured: ``add`` 0.3 ns,
``tanh`` 3.4 ns, ``bernoulli_`` 7.6 ns), which no FLOP count per element captures across
machines. So each :class:`Work` carries a *kind* beside its class (the operator type, or the
layout) and a calibrated device prices ``CLASS:KIND`` with its own fit where calibration
measured that kind, else the class's. A product (and a convolution, a product over its
output positions) whose smallest GEMM dimension is at most 32 or 128 has the kind's bucket
too, ``matmul:tn@32``, ``conv:conv_backward@128`` (:data:`SMALL_DIM_BUCKETS`): their kernels
run 2-8 times below a square product's rate; a product with an operand past a last-level
cache (:data:`CACHE_BEYOND_BYTES`: a language model's head) has ``@big``. A dense convolution
with a stride above 1 (a CNN's downsampling: ResNet's stride-2 convolutions, ConvNeXt's 2x2
patch merging) has the kind ``conv_strided`` / ``conv_backward_strided``: on a CPU its forward
ran 1.1-1.5 times and its backward 1.2-2.8 times as long as a stride-1 convolution of the same
GEMM (one thread, batch 2, 4-16 pixel outputs); a machine file without that kind prices it as
the plain kind (:func:`~dnnpart.devices.specs.cost_key_chain`). A depthwise convolution with an
operand stored channels-last (``conv_cl``, ``conv_backward_cl``: a ConvNeXt block, whose
gradient comes back through a ``permute`` from ``NHWC``) ran its backward 2-3 times as fast as
on ``NCHW`` here (batch 2, 96-384 channels, 7x7). A depthwise convolution over at most 32 or
128 output positions (batch x pixels: a CNN's last stages) has the bucket too
(``depthwise_conv:conv_backward_cl@32``): its kernels run further below the rate of large
maps than one FLOP and byte rate per kind fits across sizes. A
channels-last backward whose weight-gradient
workspace (:func:`depthwise_workspace_bytes`) reaches
:data:`FRESH_ALLOCATION_BYTES` has the bucket ``@wide`` instead (``conv_backward_cl@wide``):
oneDNN's AVX-512 kernels compute that gradient as a grouped convolution with one 16 x 16
block per channel and kernel tap, a scratchpad of ``channels x taps x 1 KiB`` (38.5 MB at
768 channels, 7 x 7: 9,409 page faults per call, 12.25 pages per channel at 672-1,024
channels), which a run's heap maps afresh on every call. One thread, batch 2, 4 x 4 pixels:
4.3 ms at 640 channels (30.6 MiB, below), 18.2 ms at 672, 21.1 ms at 768, 26.8 ms at 1,024,
about as long at 8 x 8 pixels; ConvNeXt-tiny's last stage (768 channels, 7 x 7) spent 65 ms
per micro-batch there against 18 ms priced by the small-position bucket. ``calibrate`` times
that bucket with the heap's free pages released before each pass (a run's state, not that
of a heap left large by other cases, where the same call took 5-6 ms); forward, and the
``NCHW`` backward (3.6 ms at 768), allocate no such block. A machine whose library needs no
such block fits the bucket like its neighbours. The layout is read from the capture's fake
tensors, which know a ``permute``'s strides but not always a CPU convolution's own output
layout (eager keeps channels-last through it, the fake kernel does not). The
classes describe eager torch, which calibration measures: ``transpose``/``slice``/``split``
are views there (copies happen in ``contiguous``/``clone``), so they are in the view class.

**Attention backward.** A fused attention's backward (``_scaled_dot_product_*_backward``,
arguments ``grad_out, q, k, v, ...``) recomputes the scores (``2 L S E``), and computes
``dV = P^T dO`` (``2 L S Ev``), ``dP = dO V^T`` (``2 L S Ev``), ``dQ = dS K`` and ``dK = dS^T
Q`` (``2 L S E`` each), plus the softmax gradient (``5 L S``) per batch-head: our count, as
flash-attention's paper counts it (about 2.5 times the forward).

**Mixture of experts.** A grouped matrix product (``aten._grouped_mm``,
``F.grouped_mm``, and ``transformers``' ``grouped_mm_fallback`` that its MoE layers lower to
under ``torch.export``) multiplies each row of its first operand, one row per (token, chosen
expert) pair, by its expert's matrix: ``2 x rows x k x n`` FLOPs for a ``(rows, k)`` input
and ``(experts, k, n)`` weights, ``k`` the first operand's last dimension. With top-``k``
routing the rows are ``tokens x k``, so each token's FLOPs count the ``k`` experts it is routed
to, not all of them (the routed fraction ``k / experts`` of the expert weights; the ``hf:``
frontend states it in a note). A product whose operands are both 2-D and whose output is
``(groups, m, n)`` (the weight gradient, grouped over the reduction) sums ``2 m n k`` over the
groups' slices of ``k``, i.e. ``2 m n k`` in all. The fallback's backward op computes both
gradients, two such products. Routing itself (``topk``, ``sort``) is priced at ``log2`` of
the sorted length comparisons per element.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

Shape = tuple[int, ...]

#: FLOPs per output element of element-wise and normalisation operators (our estimates:
#: e.g. layer norm = mean, variance, subtract, divide, scale, shift ~ 8 operations).
PER_ELEMENT_FLOPS: dict[str, float] = {
    "relu": 1,
    "leaky_relu": 2,
    "clip": 2,
    "hardtanh": 2,
    "hardswish": 4,
    "hardsigmoid": 3,
    "gelu": 8,
    "sigmoid": 4,
    "tanh": 4,
    "silu": 5,
    "elu": 4,
    "softplus": 4,
    "mish": 8,
    "exp": 1,
    "log": 1,
    "sqrt": 1,
    "rsqrt": 2,
    "erf": 4,
    "neg": 1,
    "abs": 1,
    "reciprocal": 1,
    "pow": 1,
    "cast": 0,
    "where": 1,
    "softmax": 5,
    "log_softmax": 6,
    "batchnorm": 4,
    "layernorm": 8,
    "groupnorm": 8,
    "instancenorm": 8,
    "rmsnorm": 5,
    "add": 1,
    "sub": 1,
    "mul": 1,
    "div": 1,
    "max_elem": 1,
    "min_elem": 1,
    "eq": 1,
    "cross_entropy": 6,
    "nll_loss": 1,
    "mse_loss": 3,
    "l1_loss": 3,
    "bce_loss": 6,
    "sin": 4,
    "cos": 4,
    # a random draw per element (dropout's mask, ``bernoulli_``); its real cost is the
    # generator's, which calibration measures as the kind ``elementwise:bernoulli``
    "bernoulli": 1,
    # backward kernels of training graphs (our estimates, per element of the input gradient):
    # layer norm's gradient recomputes the normalised input and two reductions.
    "layernorm_backward": 12,
    "batchnorm_backward": 10,
    "softmax_backward": 4,
    "log_softmax_backward": 4,
    "tanh_backward": 3,
    "sigmoid_backward": 3,
    "gelu_backward": 12,
    "silu_backward": 6,
    "softplus_backward": 5,
    "threshold_backward": 1,
    "mse_loss_backward": 3,
    "embedding_backward": 1,
    "maxpool_backward": 1,
    "avgpool_backward": 1,
}
#: Operators that only reinterpret a tensor (no data movement in a runtime with views).
VIEW_OPS = frozenset({"reshape", "flatten", "squeeze", "unsqueeze", "identity", "dropout", "expand", "view"})
#: Operators that copy data without arithmetic.
COPY_OPS = frozenset(
    {"transpose", "concat", "split", "slice", "pad", "gather", "embedding", "contiguous", "tile", "chunk"}
)
#: Operators on metadata (shapes, sizes, tuple access, runtime assertions): free.
META_OPS = frozenset({"shape", "size", "getattr", "getitem", "constant", "constant_of_shape", "range"})
#: Operators that write a new tensor without reading one (``arange``, ``zeros``): bytes of the
#: output written, no arithmetic.
FILL_OPS = frozenset({"fill"})
#: Operators deliberately priced by bytes moved only, as known: higher-order wrappers whose
#: body export keeps as a submodule (its operators are not broken out; in the models we
#: capture it wraps a handful of small element-wise ops, e.g. Llama's rotary table).
BYTES_ONLY_OPS = frozenset({"wrap_with_set_grad_enabled", "wrap_with_autocast"})
WEIGHTED_OPS = frozenset({"conv", "conv_transpose", "matmul", "linear", "conv_backward"})
POOL_OPS = frozenset({"maxpool", "avgpool"})
REDUCE_OPS = frozenset({"global_pool", "reduce", "mean", "sum"})
#: Grouped (mixture-of-experts) matrix products and the fallback's fused backward (docstring).
GROUPED_OPS = frozenset({"grouped_mm", "grouped_mm_backward"})
#: Comparison sorts along the last dimension (routing's top-k): log2(length) per element.
SORT_OPS = frozenset({"sort"})
LOSS_OPS = frozenset({"cross_entropy", "nll_loss", "mse_loss", "l1_loss", "bce_loss"})

#: Every canonical operator type the model prices.
CANONICAL = (
    frozenset(PER_ELEMENT_FLOPS) | VIEW_OPS | COPY_OPS | META_OPS | WEIGHTED_OPS | POOL_OPS | REDUCE_OPS
    | FILL_OPS | BYTES_ONLY_OPS | GROUPED_OPS | SORT_OPS | frozenset({"attention", "attention_backward"})
)

_CLASS_MEMBERS: dict[str, frozenset[str]] = {
    "matmul": frozenset({"matmul", "linear"}) | GROUPED_OPS,
    "conv": frozenset({"conv", "conv_transpose", "conv_backward"}),
    "attention": frozenset({"attention", "attention_backward"}),
    "norm": frozenset({"batchnorm", "layernorm", "groupnorm", "instancenorm", "rmsnorm",
                       "layernorm_backward", "batchnorm_backward"}),
    "embedding": frozenset({"embedding", "gather", "embedding_backward"}),
    "reduce": REDUCE_OPS | POOL_OPS | LOSS_OPS | SORT_OPS
    | frozenset({"softmax", "log_softmax", "softmax_backward", "log_softmax_backward",
                 "maxpool_backward", "avgpool_backward"}),
    "copy": frozenset({"concat", "pad", "contiguous", "tile"}),
    "view": VIEW_OPS | frozenset({"transpose", "split", "slice", "chunk"}),
    "meta": META_OPS,
}
#: Operator class of each canonical type (module docstring); element-wise is the rest of the
#: per-element operators and the fills. Bytes-only wrappers have none ("": the roofline).
OP_CLASS: dict[str, str] = {op: cls for cls, ops in _CLASS_MEMBERS.items() for op in ops} | {
    op: "elementwise" for op in (frozenset(PER_ELEMENT_FLOPS) | FILL_OPS)
    if not any(op in ops for ops in _CLASS_MEMBERS.values())
}


def op_class(op_type: str) -> str:
    """Operator class of a canonical type; ``""`` for types of no class (the roofline prices them).

    Examples
    --------
    >>> op_class("conv_backward"), op_class("threshold_backward"), op_class("transpose")
    ('conv', 'elementwise', 'view')
    >>> op_class("mycustomop")
    ''
    """
    return OP_CLASS.get(op_type, "")

# Spellings (lower-cased) of ONNX, torch.nn modules and torch functions -> canonical type.
_SYNONYMS: dict[str, str] = {
    # convolution / matrix products
    "conv1d": "conv",
    "conv2d": "conv",
    "conv3d": "conv",
    "convolution": "conv",
    "convtranspose": "conv_transpose",
    "convtranspose1d": "conv_transpose",
    "convtranspose2d": "conv_transpose",
    "convtranspose3d": "conv_transpose",
    "conv_transpose1d": "conv_transpose",
    "conv_transpose2d": "conv_transpose",
    "conv_transpose3d": "conv_transpose",
    "gemm": "matmul",
    "bmm": "matmul",
    "mm": "matmul",
    "baddbmm": "matmul",
    "addmm": "matmul",
    "einsum": "matmul",
    "scaled_dot_product_attention": "attention",
    "nonDynamicallyQuantizableLinear".lower(): "linear",
    # normalisation
    "batchnormalization": "batchnorm",
    "batchnorm1d": "batchnorm",
    "batchnorm2d": "batchnorm",
    "batchnorm3d": "batchnorm",
    "batch_norm": "batchnorm",
    "layernormalization": "layernorm",
    "layer_norm": "layernorm",
    "groupnormalization": "groupnorm",
    "group_norm": "groupnorm",
    "instancenormalization": "instancenorm",
    "instancenorm2d": "instancenorm",
    "instance_norm": "instancenorm",
    "rms_norm": "rmsnorm",
    "simplifiedlayernormalization": "rmsnorm",
    # activations
    "relu6": "clip",
    "leakyrelu": "leaky_relu",
    "hardswish": "hardswish",
    "hardsigmoid": "hardsigmoid",
    "relu_": "relu",
    "gelu_": "gelu",
    "softmax2d": "softmax",
    "logsoftmax": "log_softmax",
    "selu": "elu",
    "celu": "elu",
    "prelu": "leaky_relu",
    "swish": "silu",
    # pooling and reductions
    "maxpool1d": "maxpool",
    "maxpool2d": "maxpool",
    "maxpool3d": "maxpool",
    "max_pool2d": "maxpool",
    "max_pool1d": "maxpool",
    "max_pool3d": "maxpool",
    "averagepool": "avgpool",
    "avgpool1d": "avgpool",
    "avgpool2d": "avgpool",
    "avgpool3d": "avgpool",
    "avg_pool2d": "avgpool",
    "avg_pool1d": "avgpool",
    "avg_pool3d": "avgpool",
    "globalaveragepool": "global_pool",
    "globalmaxpool": "global_pool",
    "adaptiveavgpool1d": "global_pool",
    "adaptiveavgpool2d": "global_pool",
    "adaptive_avg_pool2d": "global_pool",
    "adaptive_avg_pool1d": "global_pool",
    "adaptivemaxpool2d": "global_pool",
    "adaptive_max_pool2d": "global_pool",
    "reducemean": "mean",
    "reducesum": "sum",
    "reducemax": "reduce",
    "reducemin": "reduce",
    "reduceprod": "reduce",
    "reducel2": "reduce",
    "amax": "reduce",
    "amin": "reduce",
    "max": "reduce",
    "min": "reduce",
    "var": "reduce",
    "std": "reduce",
    "norm": "reduce",
    # element-wise arithmetic
    "iadd": "add",
    "add_": "add",
    "radd": "add",
    "sum_elem": "add",
    "mul_": "mul",
    "imul": "mul",
    "rmul": "mul",
    "truediv": "div",
    "floordiv": "div",
    "rtruediv": "div",
    "div_": "div",
    "rsub": "sub",
    "isub": "sub",
    "matmul_": "matmul",
    "maximum": "max_elem",
    "minimum": "min_elem",
    "equal": "eq",
    "greater": "eq",
    "less": "eq",
    "ne": "eq",
    "gt": "eq",
    "lt": "eq",
    "ge": "eq",
    "le": "eq",
    "not": "eq",
    "and": "eq",
    "or": "eq",
    "masked_fill": "where",
    "to": "cast",
    "float": "cast",
    "type_as": "cast",
    "clamp": "clip",
    "clamp_min": "clip",
    # data movement
    "view": "view",
    "flatten": "flatten",
    "unflatten": "reshape",
    "reshape": "reshape",
    "squeeze": "squeeze",
    "unsqueeze": "unsqueeze",
    "permute": "transpose",
    "transpose": "transpose",
    "t": "transpose",
    "cat": "concat",
    "concatenate": "concat",
    "stack": "concat",
    "narrow": "slice",
    "select": "slice",
    "index_select": "gather",
    "gatherelements": "gather",
    "expand_as": "expand",
    "repeat": "tile",
    "dropout1d": "dropout",
    "dropout2d": "dropout",
    "alpha_dropout": "dropout",
    "feature_alpha_dropout": "dropout",
    "constantofshape": "constant_of_shape",
    "getattr": "getattr",
    "getitem": "getitem",
    "dim": "size",
    "numel": "size",
    # losses
    "crossentropyloss": "cross_entropy",
    "softmaxcrossentropyloss": "cross_entropy",
    "nllloss": "nll_loss",
    "negativeloglikelihoodloss": "nll_loss",
    "mseloss": "mse_loss",
    "l1loss": "l1_loss",
    "bceloss": "bce_loss",
    "bcewithlogitsloss": "bce_loss",
    "binary_cross_entropy": "bce_loss",
    "binary_cross_entropy_with_logits": "bce_loss",
    # aten spellings (torch.export / make_fx graphs) not covered above
    "_assert_tensor_metadata": "constant",
    "_assert_scalar": "constant",
    "sym_size": "size",
    "alias": "view",
    "_unsafe_view": "view",
    "as_strided": "view",
    "detach": "view",
    "detach_": "view",
    "lift_fresh_copy": "contiguous",
    "clone": "contiguous",
    "copy": "contiguous",
    "_to_copy": "cast",
    "roll": "contiguous",
    "index": "gather",
    "index_put": "gather",
    "slice_scatter": "contiguous",
    "select_scatter": "contiguous",
    "new_zeros": "fill",
    "new_ones": "fill",
    "new_empty": "fill",
    "new_full": "fill",
    "zeros": "fill",
    "ones": "fill",
    "empty": "fill",
    "full": "fill",
    "full_like": "fill",
    "zeros_like": "fill",
    "ones_like": "fill",
    "empty_like": "fill",
    "arange": "fill",
    "scalar_tensor": "fill",
    "__and__": "eq",
    "__or__": "eq",
    "bitwise_and": "eq",
    "bitwise_or": "eq",
    "bitwise_not": "eq",
    "logical_not": "eq",
    "logical_and": "eq",
    "diff": "sub",
    "cumsum": "add",
    "_softmax": "softmax",
    "_log_softmax": "log_softmax",
    "_native_batch_norm_legit_no_training": "batchnorm",
    "_native_batch_norm_legit_functional": "batchnorm",
    "native_batch_norm": "batchnorm",
    "cudnn_batch_norm": "batchnorm",  # what F.batch_norm dispatches to on a GPU with cuDNN
    "_batch_norm_with_update": "batchnorm",
    "native_layer_norm": "layernorm",
    "_fused_rms_norm": "rmsnorm",
    "_scaled_dot_product_flash_attention_for_cpu": "attention",
    "_scaled_dot_product_efficient_attention": "attention",
    "_scaled_dot_product_flash_attention": "attention",
    "_scaled_dot_product_flash_attention_for_cpu_backward": "attention_backward",
    "_scaled_dot_product_efficient_attention_backward": "attention_backward",
    "_scaled_dot_product_flash_attention_backward": "attention_backward",
    "max_pool2d_with_indices": "maxpool",
    "_adaptive_avg_pool2d": "global_pool",
    "mean_dim": "mean",
    "square": "mul",
    "sign": "abs",
    "threshold": "relu",
    "addbmm": "matmul",
    "_safe_softmax": "softmax",
    "bernoulli_": "bernoulli",
    "sgn": "abs",
    "constant_pad_nd": "pad",
    "as_strided_": "view",
    "copy_": "contiguous",
    "slice_backward": "pad",
    "select_backward": "pad",
    "narrow_copy": "slice",
    "native_layer_norm_backward": "layernorm_backward",
    "native_batch_norm_backward": "batchnorm_backward",
    "_native_batch_norm_legit_backward": "batchnorm_backward",
    "cudnn_batch_norm_backward": "batchnorm_backward",
    "batch_norm_backward": "batchnorm_backward",
    "_softmax_backward_data": "softmax_backward",
    "_log_softmax_backward_data": "log_softmax_backward",
    "embedding_dense_backward": "embedding_backward",
    "max_pool2d_with_indices_backward": "maxpool_backward",
    "avg_pool2d_backward": "avgpool_backward",
    "_adaptive_avg_pool2d_backward": "avgpool_backward",
    "convolution_backward": "conv_backward",
    # mixture of experts: grouped products, routing
    "_grouped_mm": "grouped_mm",
    "grouped_mm_fallback": "grouped_mm",
    "grouped_mm_fallback_backward": "grouped_mm_backward",
    "topk": "sort",
    "argsort": "sort",
    "histc": "reduce",
    "bincount": "reduce",
    "floor_divide": "div",
    "remainder": "div",
    "fmod": "div",
    "scatter": "gather",
    "scatter_add": "gather",
    "index_put_": "gather",
    "index_add": "gather",
    "repeat_interleave": "tile",
    "split_with_sizes": "split",
}


def canonical_op(name: str) -> str:
    """Canonical operator type of an ONNX / torch spelling; unknown names come back lower-cased.

    Examples
    --------
    >>> canonical_op("BatchNormalization"), canonical_op("Conv2d"), canonical_op("add")
    ('batchnorm', 'conv', 'add')
    >>> canonical_op("MyCustomOp")
    'mycustomop'
    """
    key = name.strip().lower()
    return _SYNONYMS.get(key, key)


@dataclass(frozen=True, slots=True, kw_only=True)
class OpSpec:
    """What the cost model needs to know about one operator.

    Parameters
    ----------
    op_type : canonical type (see :func:`canonical_op`).
    input_shapes : shapes of the activation inputs (not the parameters).
    output_shapes : shapes of the outputs.
    weight_shapes : shapes of the parameters (weights, biases, running statistics).
    itemsize : bytes per element (4 for fp32).
    attrs : extra facts: ``kernel`` (pooling window), ``k`` (reduction length of a matrix
        product when it is not the first input's last dimension).
    """

    op_type: str
    input_shapes: tuple[Shape, ...] = ()
    output_shapes: tuple[Shape, ...] = ()
    weight_shapes: tuple[Shape, ...] = ()
    itemsize: int = 4
    attrs: Mapping[str, Any] = field(default_factory=dict)


#: Outputs of at least this many bytes are, on a CPU, memory the C allocator maps anew for
#: every allocation (glibc's largest mmap threshold on 64-bit, 32 MiB: below it freed blocks
#: are reused), whose pages the operator's first writes fault in: measured by ``calibrate``
#: as the device's ``fresh_bytes_rate`` (about 1.3 GB/s here, against 16 GB/s to write memory
#: already mapped).
FRESH_ALLOCATION_BYTES = 32 * 2**20


#: Size buckets of a product's smallest dimension (rows, reduction or columns of its GEMM) that
#: a calibrated device prices apart: CPU kernels for skinny products (a ResNet's last blocks
#: at 4 x 4 pixels, a ConvNeXt's 32 tokens) run at 10-40 GFLOP/s where square ones run at 75.
SMALL_DIM_BUCKETS = (32, 128)


#: Bytes per channel, kernel tap and byte of element of the scratchpad a depthwise
#: convolution's channels-last weight gradient takes on a CPU (oneDNN's AVX-512 grouped
#: kernel: one 16 x 16 block per channel and tap); from :data:`FRESH_ALLOCATION_BYTES` on it
#: is the bucket ``@wide`` (module docstring).
DEPTHWISE_WORKSPACE_PER_TAP = 16 * 16


def depthwise_workspace_bytes(spec: OpSpec) -> int:
    """Bytes of a depthwise convolution backward's weight-gradient scratchpad on a CPU
    (:data:`DEPTHWISE_WORKSPACE_PER_TAP` per channel and kernel tap); 0 without a 4-D weight.

    Examples
    --------
    >>> depthwise_workspace_bytes(OpSpec(op_type="conv_backward", input_shapes=((2, 768, 4, 4),),
    ...                                  output_shapes=((2, 768, 4, 4),), weight_shapes=((768, 1, 7, 7),)))
    38535168
    """
    if not spec.weight_shapes or len(spec.weight_shapes[0]) != 4:
        return 0
    channels, _, kh, kw = (int(d) for d in spec.weight_shapes[0])
    return channels * kh * kw * DEPTHWISE_WORKSPACE_PER_TAP * spec.itemsize


#: A product with an operand of at least this many bytes streams it from memory no
#: last-level cache holds (a language model's head: 512 x 50,257 weights, 103 MB), and runs
#: at 60-65% of the rate of a block's products of the same FLOPs per byte on a CPU: the size
#: bucket ``@big`` (32 MiB, the L3 of this project's machine and a common server L3).
CACHE_BEYOND_BYTES = 32 * 2**20


def _largest_operand(spec: OpSpec) -> int:
    shapes = (*spec.input_shapes, *spec.weight_shapes, *spec.output_shapes)
    return max((spec.itemsize * numel(s) for s in shapes), default=0)


def gemm_min_dim(spec: OpSpec) -> int:
    """The smallest dimension of the GEMM a matrix product or a convolution runs (``M`` output
    rows -- a convolution's output positions times its batch --, ``K`` the reduction, ``N``
    output columns; a batched product's batch aside); 0 where the shapes do not say.

    Examples
    --------
    >>> gemm_min_dim(OpSpec(op_type="matmul", input_shapes=((32, 768),), output_shapes=((32, 3072),),
    ...                     attrs={"k": 768}))
    32
    >>> gemm_min_dim(OpSpec(op_type="conv", input_shapes=((2, 512, 4, 4),),
    ...                     output_shapes=((2, 512, 4, 4),), weight_shapes=((512, 512, 3, 3),)))
    32
    """
    op = spec.op_type
    if op in ("matmul", "linear"):
        if not spec.output_shapes or len(spec.output_shapes[0]) < 2 or not spec.input_shapes:
            return 0
        out = spec.output_shapes[0]
        k = int(spec.attrs.get("k", 0)) or (spec.input_shapes[0][-1] if spec.input_shapes[0] else 0)
        return min(int(out[-2]), int(out[-1]), int(k))
    if op in ("conv", "conv_backward") and spec.weight_shapes and len(spec.weight_shapes[0]) > 2:
        kernel = spec.weight_shapes[0]
        return min(output_positions(spec), numel(kernel[1:]), int(kernel[0]))
    return 0


def output_positions(spec: OpSpec) -> int:
    """Batch x pixels of a convolution (its gradient's, for a backward); 0 where the shapes do
    not say.

    Examples
    --------
    >>> output_positions(OpSpec(op_type="conv", input_shapes=((2, 768, 4, 4),),
    ...                         output_shapes=((2, 768, 4, 4),), weight_shapes=((768, 1, 7, 7),)))
    32
    """
    grad = spec.input_shapes[0] if spec.op_type == "conv_backward" and spec.input_shapes else (
        spec.output_shapes[0] if spec.output_shapes else ())
    return numel(grad) // int(grad[1]) if len(grad) >= 3 and int(grad[1]) > 0 else 0


@dataclass(frozen=True, slots=True)
class Work:
    """FLOPs and bytes moved of one operator; ``known`` is False for a bytes-only estimate;
    ``op_class`` its class (:func:`op_class`; ``""``: none, the roofline prices it);
    ``op_kind`` a finer key within it (the operator type, or a matrix product's operand
    layout ``nn``/``nt``/``tn``), which a calibrated device may price apart
    (:attr:`cost_key`); ``fresh_bytes`` its outputs of at least
    :data:`FRESH_ALLOCATION_BYTES` each, which a CPU allocates as fresh pages."""

    flops: float
    bytes_moved: float
    known: bool = True
    op_class: str = ""
    op_kind: str = ""
    fresh_bytes: float = 0.0

    @property
    def cost_key(self) -> str:
        """``CLASS:KIND``, or the class alone where there is no kind.

        Examples
        --------
        >>> Work(1.0, 1.0, op_class="elementwise", op_kind="tanh").cost_key
        'elementwise:tanh'
        """
        return f"{self.op_class}:{self.op_kind}" if self.op_class and self.op_kind else self.op_class


def numel(shape: Sequence[int]) -> int:
    """Number of elements of a shape (1 for a scalar).

    Examples
    --------
    >>> numel((2, 3, 4)), numel(())
    (24, 1)
    """
    return math.prod(int(s) for s in shape)


def operator_work(spec: OpSpec) -> Work:
    """FLOPs and bytes moved by one operator.

    Examples
    --------
    A 3x3 convolution, 64 -> 64 channels, on a 56x56 map (batch 1):

    >>> w = operator_work(OpSpec(op_type="conv", input_shapes=((1, 64, 56, 56),),
    ...                          output_shapes=((1, 64, 56, 56),),
    ...                          weight_shapes=((64, 64, 3, 3),)))
    >>> w.flops / 1e6   # 2 x 56*56*64 outputs x 64*3*3 multiply-adds each
    231.211008
    >>> w.op_class
    'conv'
    >>> operator_work(OpSpec(op_type="mystery", input_shapes=((10,),),
    ...                      output_shapes=((10,),))).known
    False
    """
    work = _work(spec)
    cls = op_class(spec.op_type)
    if spec.op_type in ("conv", "conv_backward") and spec.weight_shapes \
            and len(spec.weight_shapes[0]) > 2 and spec.weight_shapes[0][1] == 1:
        cls = "depthwise_conv"
    kind = str(spec.attrs.get("layout") or "") if cls == "matmul" else spec.op_type if cls else ""
    if cls == "conv" and any(int(s) > 1 for s in spec.attrs.get("stride") or ()):
        kind += "_strided"
    if cls == "depthwise_conv" and spec.attrs.get("memory_format") == "channels_last":
        kind += "_cl"
    if kind and cls in ("matmul", "conv", "depthwise_conv"):
        # a depthwise convolution's GEMM has a kernel-sized reduction: its positions decide
        small = output_positions(spec) if cls == "depthwise_conv" else gemm_min_dim(spec)
        bucket = next((b for b in SMALL_DIM_BUCKETS if 0 < small <= b), 0)
        if kind == "conv_backward_cl" and depthwise_workspace_bytes(spec) >= FRESH_ALLOCATION_BYTES:
            kind += "@wide"
        elif bucket:
            kind += f"@{bucket}"
        elif cls == "matmul" and _largest_operand(spec) >= CACHE_BEYOND_BYTES:
            kind += "@big"
    fresh = 0.0
    if cls not in ("view", "meta", ""):
        sizes = [spec.itemsize * numel(o) for o in spec.output_shapes]
        fresh = float(sum(x for x in sizes if x >= FRESH_ALLOCATION_BYTES))
    return Work(work.flops, work.bytes_moved, work.known, cls, kind, fresh)


def _work(spec: OpSpec) -> Work:
    op = spec.op_type
    in_el = [numel(s) for s in spec.input_shapes]
    out_el = [numel(s) for s in spec.output_shapes]
    w_el = [numel(s) for s in spec.weight_shapes]
    total_in, total_out, total_w = sum(in_el), sum(out_el), sum(w_el)
    moved = float(spec.itemsize * (total_in + total_out + total_w))
    out0 = out_el[0] if out_el else 0

    if op in META_OPS:
        return Work(0.0, 0.0)
    if op in FILL_OPS:
        return Work(0.0, float(spec.itemsize * total_out))
    if op in BYTES_ONLY_OPS:
        return Work(0.0, moved)
    if op in VIEW_OPS:
        return Work(0.0, 0.0)
    if op in COPY_OPS:
        if op in ("gather", "embedding"):  # reads the rows it gathers, not the whole table
            return Work(0.0, float(spec.itemsize * 2 * total_out + 8 * sum(in_el[1:] or [0])))
        return Work(0.0, float(spec.itemsize * 2 * total_out))
    if op == "conv_backward":  # gradients w.r.t. input and weights: two convolutions' worth
        if not spec.weight_shapes or not in_el:
            return Work(0.0, moved, known=False)
        return Work(4.0 * in_el[0] * numel(spec.weight_shapes[0][1:]), moved)
    if op in ("conv", "conv_transpose"):
        if not spec.weight_shapes:
            return Work(0.0, moved, known=False)
        kernel = spec.weight_shapes[0]
        per = numel(kernel[1:])
        base = out0 if op == "conv" else (in_el[0] if in_el else 0)
        flops = 2.0 * base * per
        if len(spec.weight_shapes) > 1:  # bias
            flops += out0
        return Work(flops, moved)
    if op in ("matmul", "linear"):
        if not spec.input_shapes or not spec.output_shapes:
            return Work(0.0, moved, known=False)
        k = int(spec.attrs.get("k", 0)) or (spec.input_shapes[0][-1] if spec.input_shapes[0] else 1)
        flops = 2.0 * out0 * k
        if op == "linear" and len(spec.weight_shapes) > 1:
            flops += out0
        elif op == "matmul" and spec.attrs.get("bias"):
            flops += out0
        return Work(flops, moved)
    if op == "attention":  # fused SDPA: q (.., L, E), k (.., S, E), v (.., S, Ev)
        if len(spec.input_shapes) < 3:
            return Work(0.0, moved, known=False)
        q, kk, v = spec.input_shapes[:3]
        batch = numel(q[:-2])
        length, emb, src, ev = q[-2], q[-1], kk[-2], v[-1]
        flops = 2.0 * batch * length * src * (emb + ev) + 5.0 * batch * length * src
        return Work(flops, moved)
    if op == "attention_backward":  # (grad_out, q, k, v, ...): module docstring
        if len(spec.input_shapes) < 4:
            return Work(0.0, moved, known=False)
        q, kk, v = spec.input_shapes[1:4]
        batch = numel(q[:-2])
        length, emb, src, ev = q[-2], q[-1], kk[-2], v[-1]
        flops = 2.0 * batch * length * src * (3 * emb + 2 * ev) + 5.0 * batch * length * src
        return Work(flops, moved)
    if op in GROUPED_OPS:
        return _grouped_work(spec, moved)
    if op in SORT_OPS:
        length = spec.input_shapes[0][-1] if spec.input_shapes and spec.input_shapes[0] else 1
        return Work(float(in_el[0] if in_el else 0) * max(1.0, math.log2(max(length, 1))), moved)
    if op in POOL_OPS:
        pool_kernel = spec.attrs.get("kernel")
        window = (
            numel(pool_kernel) if pool_kernel else max(1, round((in_el[0] if in_el else 0) / max(out0, 1)))
        )
        return Work(float(out0 * window), moved)
    if op in REDUCE_OPS:
        return Work(float(total_in), moved)
    if op in PER_ELEMENT_FLOPS:
        per_elem = PER_ELEMENT_FLOPS[op]
        if op in LOSS_OPS:
            return Work(per_elem * float(in_el[0] if in_el else 0), moved)
        if op in ("add", "sub", "mul", "div", "max_elem", "min_elem", "eq", "where"):
            per_elem *= max(1, len(spec.input_shapes) - 1)
        return Work(per_elem * float(out0), moved)
    return Work(0.0, moved, known=False)


def _grouped_work(spec: OpSpec, moved: float) -> Work:
    """A grouped matrix product or the fallback's backward (module docstring).

    The first activation input is the ``(rows, k)`` operand (the hidden states, or a gradient):
    in the captured graphs the expert weights are the second operand.
    """
    if not spec.input_shapes or not spec.input_shapes[0] or not spec.output_shapes:
        return Work(0.0, moved, known=False)
    out = spec.output_shapes
    if spec.op_type == "grouped_mm_backward":  # (grad_input (rows, k), grad_weight (experts, k, n))
        if len(out) < 2 or not out[1]:
            return Work(0.0, moved, known=False)
        return Work(4.0 * numel(out[0]) * out[1][-1], moved)
    k = int(spec.attrs.get("k", 0)) or spec.input_shapes[0][-1]
    flops = 2.0 * numel(out[0]) * k
    operands = [s for s in (*spec.input_shapes, *spec.weight_shapes) if len(s) > 1]
    if len(out[0]) == 3 and operands and all(len(s) == 2 for s in operands):
        flops /= max(1, out[0][0])  # 2-D x 2-D grouped over k: the groups split k
    return Work(flops, moved)


def aten_op_name(target: Any) -> str:
    """The op name of a ``torch.ops.aten`` overload (``aten.addmm.default`` -> ``addmm``).

    Python callables (``operator.getitem``) give their ``__name__``.

    Examples
    --------
    >>> import operator
    >>> aten_op_name(operator.getitem)
    'getitem'
    """
    schema = getattr(target, "_schema", None)
    if schema is not None:
        return str(schema.name).split("::")[-1]
    return str(getattr(target, "__name__", target))
