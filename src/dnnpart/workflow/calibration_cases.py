"""The micro-benchmarks ``dnnpart calibrate`` times: one small function per case and size.

Each case is a torch function of a few tensors -- one operator of its class, forward and (where
it has one) backward through ``torch.autograd.grad`` -- traced with ``make_fx`` into the aten
operators that run, which are then timed one by one (:mod:`dnnpart.workflow.calibrating`).
So backward kernels are measured as the aten operators a training graph has
(``convolution_backward``, ``native_layer_norm_backward``, ``mm`` ...), each priced by its own
formula and class, exactly as a captured training graph prices it.

Element-wise operators are timed one type at a time (``add``, ``tanh``, ``dropout``'s
``bernoulli_``...): their cost per element differs tenfold, so each kind gets a fit of its own
(:mod:`dnnpart.workflow.calibrating`). Sizes span the range of the models the accuracy
benchmark plans (hidden 256-1024, a few thousand tokens, 14-56 pixel feature maps, and a
language model's head: a product 16,384-30,522 wide, whose weight no cache holds and which
runs at 40-60% of a block's FLOP rate on a CPU), and skinny products in each bucket of
:data:`~dnnpart.cost.ops.SMALL_DIM_BUCKETS` (32 or 128 rows; a CNN's last blocks at a few
pixels), strided convolutions (a CNN's downsampling, three in each bucket: they run below
a stride-1 convolution of the same GEMM) and depthwise ones on channels-last tensors (with
their backward's ``@wide`` bucket, whose workspace is a fresh allocation: timed on a heap
whose free pages were released, :attr:`Case.fresh_heap_ops`);
``quick`` keeps the two smallest of each case.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

#: A built case: the function traced, its example tensors, which of them are parameters.
Built = tuple[Callable[..., Any], tuple[Any, ...], tuple[int, ...]]


@dataclass(frozen=True, slots=True)
class Case:
    """One micro-benchmark: ``build(size, device)`` gives what is traced and timed."""

    name: str
    op_class: str
    sizes: tuple[tuple[int, ...], ...]
    build: Callable[[tuple[int, ...], str], Built]
    #: aten operators timed with the heap's free pages released before each pass (a run maps
    #: their large workspace afresh on every call); when given, only they are samples
    fresh_heap_ops: tuple[str, ...] = ()


def _randn(*shape: int, device: str, grad: bool = True) -> Any:
    import torch

    return torch.randn(*shape, device=device).requires_grad_(grad)


def _grads(out: Any, inputs: Sequence[Any]) -> Any:
    import torch

    return torch.autograd.grad(out, tuple(inputs), torch.ones_like(out))


def _linear(size: tuple[int, ...], device: str) -> Built:
    import torch.nn.functional as F

    tokens, k, n = size
    x = _randn(4, tokens // 4, k, device=device)
    w, b = _randn(n, k, device=device), _randn(n, device=device)
    return (lambda x, w, b: _grads(F.linear(x, w, b), (x, w, b))), (x, w, b), (1, 2)


def _bmm(size: tuple[int, ...], device: str) -> Built:
    import torch

    batch, m, k, n = size
    a, b = _randn(batch, m, k, device=device), _randn(batch, k, n, device=device)
    return (lambda a, b: _grads(torch.bmm(a, b), (a, b))), (a, b), ()


def _conv(size: tuple[int, ...], device: str) -> Built:
    import torch.nn.functional as F

    batch, c_in, hw, c_out, k, groups = size
    x = _randn(batch, c_in, hw, hw, device=device)
    w = _randn(c_out, c_in // groups, k, k, device=device)
    b = _randn(c_out, device=device)

    def fn(x: Any, w: Any, b: Any) -> Any:
        return _grads(F.conv2d(x, w, b, padding=k // 2, groups=groups), (x, w, b))

    return fn, (x, w, b), (1, 2)


def _channels_last_conv(size: tuple[int, ...], device: str) -> Built:
    import torch

    fn, (x, w, b), params = _conv(size, device)
    x = x.detach().contiguous(memory_format=torch.channels_last).requires_grad_(True)
    return fn, (x, w, b), params


def _strided_conv(size: tuple[int, ...], device: str) -> Built:
    import torch.nn.functional as F

    batch, c_in, hw, c_out, k, stride = size
    x = _randn(batch, c_in, hw, hw, device=device)
    w, b = _randn(c_out, c_in, k, k, device=device), _randn(c_out, device=device)
    pad = k // 2 if k % 2 else 0  # odd kernels keep the grid (ResNet), even ones tile it (ConvNeXt)

    def fn(x: Any, w: Any, b: Any) -> Any:
        return _grads(F.conv2d(x, w, b, stride=stride, padding=pad), (x, w, b))

    return fn, (x, w, b), (1, 2)


def _attention(size: tuple[int, ...], device: str) -> Built:
    import torch.nn.functional as F

    batch, heads, length, emb = size
    q, k, v = (_randn(batch, heads, length, emb, device=device) for _ in range(3))
    return (lambda q, k, v: _grads(F.scaled_dot_product_attention(q, k, v), (q, k, v))), (q, k, v), ()


def _elementwise(op: str) -> Callable[[tuple[int, ...], str], Built]:
    def build(size: tuple[int, ...], device: str) -> Built:
        import torch
        import torch.nn.functional as F

        rows, cols = size
        x, y = _randn(rows, cols, device=device), _randn(rows, cols, device=device)
        unary: dict[str, Callable[[Any], Any]] = {
            "gelu": F.gelu, "gelu tanh": lambda x: F.gelu(x, approximate="tanh"), "tanh": torch.tanh,
            "sigmoid": torch.sigmoid, "silu": F.silu, "relu": torch.relu, "exp": torch.exp,
            "pow": lambda x: x.pow(2), "rsqrt": lambda x: torch.rsqrt(x.abs() + 1.0),
            "dropout": lambda x: F.dropout(x, 0.1, training=True),
        }
        if op in unary:
            fn1 = unary[op]
            return (lambda x: _grads(fn1(x), (x,))), (x,), ()
        binary: dict[str, Callable[[Any, Any], Any]] = {"add": torch.add, "mul": torch.mul, "div": torch.div,
                  "where": lambda x, y: torch.where(x > 0, x, y)}
        fn = binary[op]
        return (lambda x, y: _grads(fn(x, y), (x, y))), (x, y), ()

    return build


def _layer_norm(size: tuple[int, ...], device: str) -> Built:
    import torch.nn.functional as F

    tokens, hidden = size
    x = _randn(tokens, hidden, device=device)
    w, b = _randn(hidden, device=device), _randn(hidden, device=device)
    return (lambda x, w, b: _grads(F.layer_norm(x, (hidden,), w, b), (x, w, b))), (x, w, b), (1, 2)


def _batch_norm(size: tuple[int, ...], device: str) -> Built:
    import torch
    import torch.nn.functional as F

    batch, channels, hw = size
    x = _randn(batch, channels, hw, hw, device=device)
    w, b = _randn(channels, device=device), _randn(channels, device=device)
    mean, var = torch.zeros(channels, device=device), torch.ones(channels, device=device)

    def fn(x: Any, w: Any, b: Any, mean: Any, var: Any) -> Any:
        return _grads(F.batch_norm(x, mean, var, w, b, training=True), (x, w, b))

    return fn, (x, w, b, mean, var), (1, 2, 3, 4)


def _embedding(size: tuple[int, ...], device: str) -> Built:
    import torch
    import torch.nn.functional as F

    vocab, dim, tokens = size
    w = _randn(vocab, dim, device=device)
    idx = torch.randint(0, vocab, (4, tokens // 4), device=device)
    return (lambda idx, w: _grads(F.embedding(idx, w), (w,))), (idx, w), (1,)


def _reduce(op: str) -> Callable[[tuple[int, ...], str], Built]:
    def build(size: tuple[int, ...], device: str) -> Built:
        import torch

        rows, cols = size
        x = _randn(rows, cols, device=device)
        fns = {"sum": lambda x: _grads(x.sum(-1), (x,)), "mean": lambda x: _grads(x.mean(-1), (x,)),
               "softmax": lambda x: _grads(torch.softmax(x, -1), (x,))}
        return fns[op], (x,), ()

    return build


def _mse_loss(size: tuple[int, ...], device: str) -> Built:
    import torch.nn.functional as F

    rows, cols = size
    x, y = _randn(rows, cols, device=device), _randn(rows, cols, device=device, grad=False)
    return (lambda x, y: _grads(F.mse_loss(x, y), (x,))), (x, y), ()


def _maxpool(size: tuple[int, ...], device: str) -> Built:
    import torch.nn.functional as F

    batch, channels, hw = size
    x = _randn(batch, channels, hw, hw, device=device)
    return (lambda x: _grads(F.max_pool2d(x, 3, 2, 1), (x,))), (x,), ()


def _copy(size: tuple[int, ...], device: str) -> Built:
    import torch

    rows, cols = size
    x, y = _randn(rows, cols, device=device, grad=False), _randn(rows, cols, device=device, grad=False)

    def fn(x: Any, y: Any) -> Any:
        return x.t().contiguous(), torch.cat((x, y)), x.clone()

    return fn, (x, y), ()


def _views(size: tuple[int, ...], device: str) -> Built:
    rows, cols = size
    x = _randn(rows, cols, device=device, grad=False)

    def fn(x: Any) -> Any:
        return x.view(-1), x.t(), x[: rows // 2], x.unsqueeze(0), x.expand(2, rows, cols), x.transpose(0, 1)

    return fn, (x,), ()


def _tiny(size: tuple[int, ...], device: str) -> Built:
    """The smallest operator there is: the per-operator overhead, for uncalibrated classes."""
    import torch

    x, y = _randn(1, device=device, grad=False), _randn(1, device=device, grad=False)
    return (lambda x, y: torch.add(x, y)), (x, y), ()


#: Name of the case whose operator's time is the device's per-operator overhead.
OVERHEAD_CASE = "tiny add"

CASES: tuple[Case, ...] = (
    Case("linear", "matmul", ((64, 256, 256), (256, 512, 512), (512, 768, 768), (1024, 768, 768),
                              (512, 768, 3072), (2048, 512, 2048), (256, 512, 16384), (256, 768, 30522),
                              (512, 512, 32768),
                              # skinny products: 32 and 128 rows (the @32, @128 buckets)
                              (32, 768, 3072), (32, 3072, 768), (32, 384, 1536),
                              (128, 768, 3072), (128, 384, 1536), (128, 2048, 512)), _linear),
    Case("bmm", "matmul", ((8, 64, 64, 64), (16, 128, 64, 128), (16, 256, 64, 256), (8, 256, 256, 256)),
         _bmm),
    Case("conv2d", "conv", ((2, 16, 16, 16, 3, 1), (4, 32, 32, 32, 3, 1), (4, 64, 28, 64, 3, 1),
                            (8, 64, 14, 256, 1, 1), (4, 128, 14, 128, 3, 1), (4, 64, 56, 64, 1, 1),
                            # a CNN's last stages: few output positions, many channels
                            (2, 512, 4, 512, 3, 1), (2, 2048, 4, 512, 1, 1), (2, 512, 4, 2048, 1, 1),
                            (2, 256, 8, 256, 3, 1), (2, 1024, 8, 256, 1, 1), (2, 256, 8, 1024, 1, 1)),
         _conv),
    # downsampling: stride 2 (ResNet's 3x3 and 1x1, ConvNeXt's 2x2 patch merging) and the
    # stems, three in each size bucket of the smallest GEMM dimension (32, 128, larger)
    Case("strided conv2d", "conv",
         ((2, 384, 8, 768, 2, 2), (2, 512, 8, 512, 3, 2), (2, 1024, 8, 2048, 1, 2),
          (2, 192, 16, 384, 2, 2), (2, 256, 16, 256, 3, 2), (2, 512, 16, 1024, 1, 2),
          (2, 3, 128, 64, 7, 2), (2, 3, 128, 96, 4, 4),
          (2, 96, 32, 192, 2, 2), (2, 256, 32, 512, 1, 2), (2, 256, 32, 256, 3, 2)),
         _strided_conv),
    Case("depthwise conv2d", "depthwise_conv", ((2, 32, 16, 32, 7, 32), (4, 96, 32, 96, 7, 96),
                                                (4, 192, 16, 192, 7, 192)), _conv),
    # channels-last (a ConvNeXt's blocks): its gradient arrives channels-last too (``ones_like``)
    Case("depthwise conv2d channels-last", "depthwise_conv",
         ((2, 96, 32, 96, 7, 96), (2, 192, 16, 192, 7, 192), (2, 384, 8, 384, 7, 384),
          # three in each position bucket (@128: 33-128 positions, @32: 32 or fewer, larger)
          (4, 96, 16, 96, 7, 96), (2, 192, 8, 192, 7, 192), (8, 256, 4, 256, 7, 256),
          (1, 512, 4, 512, 7, 512), (2, 256, 4, 256, 7, 256), (2, 384, 4, 384, 7, 384)),
         _channels_last_conv),
    # a backward whose weight-gradient workspace is a fresh allocation (the @wide bucket)
    Case("depthwise conv2d channels-last, wide", "depthwise_conv",
         ((1, 768, 4, 768, 7, 768), (2, 768, 4, 768, 7, 768), (2, 1024, 4, 1024, 7, 1024),
          (2, 768, 8, 768, 7, 768)),
         _channels_last_conv, fresh_heap_ops=("convolution_backward",)),
    Case("attention", "attention", ((1, 2, 32, 32), (2, 4, 64, 64), (2, 8, 128, 64), (4, 8, 256, 64),
                                    (2, 8, 512, 64)), _attention),
    Case("add", "elementwise", ((1, 64), (16, 256), (128, 512), (512, 1024), (2048, 2048)),
         _elementwise("add")),
    Case("mul", "elementwise", ((1, 64), (16, 256), (128, 512), (512, 1024), (2048, 2048)),
         _elementwise("mul")),
    Case("gelu", "elementwise", ((1, 64), (16, 256), (128, 512), (512, 1024), (2048, 2048)),
         _elementwise("gelu")),
    *(Case(op, "elementwise", ((16, 256), (256, 512), (512, 1024), (2048, 2048)), _elementwise(op))
      for op in ("gelu tanh", "tanh", "sigmoid", "silu", "relu", "exp", "pow", "rsqrt", "dropout",
                 "div", "where")),
    Case("layer_norm", "norm", ((16, 256), (256, 512), (1024, 768), (4096, 1024)), _layer_norm),
    Case("batch_norm", "norm", ((2, 16, 16), (4, 64, 28), (16, 64, 56), (16, 256, 14)), _batch_norm),
    Case("embedding", "embedding", ((1000, 128, 64), (8000, 256, 1024), (30000, 512, 2048)), _embedding),
    Case("sum", "reduce", ((4, 64), (256, 512), (1024, 1024), (4096, 2048)), _reduce("sum")),
    Case("mean", "reduce", ((4, 64), (256, 512), (1024, 1024), (4096, 2048)), _reduce("mean")),
    Case("softmax", "reduce", ((4, 64), (256, 512), (1024, 1024), (4096, 2048)), _reduce("softmax")),
    Case("mse_loss", "reduce", ((16, 256), (256, 512), (512, 1024), (2048, 2048)), _mse_loss),
    Case("max_pool2d", "reduce", ((2, 16, 16), (8, 64, 56), (16, 64, 56)), _maxpool),
    Case("copy", "copy", ((8, 64), (256, 512), (1024, 1024), (4096, 2048)), _copy),
    Case("views", "view", ((8, 64), (1024, 1024)), _views),
    Case(OVERHEAD_CASE, "elementwise", ((1,),), _tiny),
)


def case_sizes(case: Case, quick: bool) -> tuple[tuple[int, ...], ...]:
    """The sizes a run measures: all, or the two smallest with ``quick``.

    Examples
    --------
    >>> case_sizes(CASES[0], quick=True)
    ((64, 256, 256), (256, 512, 512))
    """
    return case.sizes[:2] if quick else case.sizes
