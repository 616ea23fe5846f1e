"""Put a stage module on the device its rank runs on.

``module.to(device)`` moves parameters and buffers only. A graph traced on the CPU also holds
tensor constants as plain attributes (``_tensor_constant0``) and tensor factories with the
trace's device baked in (``arange(..., device=cpu)`` for position ids); :func:`move_module`
moves both, :func:`retarget` the factories alone; :func:`to_device` moves values (inputs,
received activations, outputs).
"""

from __future__ import annotations

import copy
from typing import Any


def retarget(module: Any, device: Any) -> None:
    """Point the tensor factories that a trace recorded on the CPU (``arange(...,
    device=cpu)`` for position ids) at ``device``, in every ``fx`` graph of ``module``.

    Examples
    --------
    >>> import torch
    >>> gm = torch.fx.symbolic_trace(lambda x: x + torch.ones(x.shape, device=torch.device("cpu")))
    >>> retarget(gm, torch.device("meta"))
    >>> gm(torch.zeros(2, device="meta")).device.type
    'meta'
    """
    import torch

    if device.type == "cpu":
        return
    for gm in (m for m in module.modules() if isinstance(m, torch.fx.GraphModule)):
        changed = False
        for node in gm.graph.nodes:
            old = node.kwargs.get("device")
            if isinstance(old, torch.device) and old.type == "cpu":
                node.update_kwarg("device", device)
                changed = True
            # positional too: ``x.to(other.device)`` traces as ``aten.to.device(x, cpu, ...)``
            # (Llama's rotary embedding)
            if any(isinstance(a, torch.device) and a.type == "cpu" for a in node.args):
                node.args = tuple(device if isinstance(a, torch.device) and a.type == "cpu" else a
                                  for a in node.args)
                changed = True
        if changed:
            gm.recompile()


def move_module(module: Any, device: Any) -> Any:
    """``module`` with its parameters, buffers, tensor attributes and traced factories on
    ``device`` (in place; returned for chaining).

    Examples
    --------
    >>> import torch
    >>> m = torch.nn.Linear(2, 2)
    >>> m.scale = torch.ones(2)                     # a plain tensor attribute
    >>> move_module(m, torch.device("meta")).scale.device.type
    'meta'
    """
    import torch

    retarget(module, device)
    module.to(device)
    for sub in module.modules():
        for name, value in list(vars(sub).items()):
            if isinstance(value, torch.Tensor) and not isinstance(value, torch.nn.Parameter) \
                    and value.device != device:
                setattr(sub, name, value.to(device))
    return module


def to_device(value: Any, device: Any) -> Any:
    """``value`` (a tensor, or lists, tuples and dicts of them, a model output's dict subclass
    keeping its type) on ``device``; a tensor that requires grad arrives as a leaf that does
    (``PipelineStage``'s example tensors), one already there is returned as it is.

    Examples
    --------
    >>> import torch
    >>> moved = to_device({"x": (torch.ones(2, requires_grad=True),)}, torch.device("meta"))
    >>> moved["x"][0].device.type, moved["x"][0].requires_grad, moved["x"][0].is_leaf
    ('meta', True, True)
    """
    import torch

    if isinstance(value, torch.Tensor):
        if value.device == device:
            return value
        moved = value.detach().to(device)
        return moved.requires_grad_(True) if value.requires_grad else moved
    if isinstance(value, (list, tuple)):
        return type(value)(to_device(v, device) for v in value)
    if isinstance(value, dict):
        out = copy.copy(value)
        for k, v in value.items():
            out[k] = to_device(v, device)
        return out
    return value
