"""A model given as a live ``torch.nn.Module`` and example inputs (the Python API's
``plan_model(module, example_inputs=...)``), instead of a spec to build it from.

The module is captured as it is (its own weights, its own inputs); its plan names it
``live:CLASS``, which nothing can rebuild from a plan file: run it and apply it from the same
Python process (:meth:`dnnpart.workflow.PlannedModel` keeps the module).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dnnpart.errors import UsageError
from dnnpart.frontends.sources import FRONTENDS, ModelSource

LIVE_PREFIX = "live:"


def live_source(module: Any, example_inputs: Sequence[Any], *, frontend: str = "export") -> ModelSource:
    """The :class:`~dnnpart.frontends.sources.ModelSource` of a live module.

    Examples
    --------
    >>> import torch
    >>> src = live_source(torch.nn.Linear(4, 2), [torch.zeros(3, 4)])
    >>> src.spec, src.input_shapes, src.input_dtype
    ('live:Linear', [(3, 4)], 'float32')
    """
    import torch

    if not isinstance(module, torch.nn.Module):
        raise UsageError(f"model: expected a spec string or a torch.nn.Module, got {type(module).__name__}")
    inputs = tuple(example_inputs)
    if not inputs or not all(isinstance(x, torch.Tensor) for x in inputs):
        raise UsageError("example_inputs: a live module needs a non-empty sequence of tensors "
                         "(what its forward takes, batch of one micro-batch)")
    if frontend not in FRONTENDS:
        raise UsageError(f"frontend {frontend!r}: expected one of {', '.join(FRONTENDS)}")
    module.eval()
    return ModelSource(spec=f"{LIVE_PREFIX}{type(module).__name__}", module=module, example_inputs=inputs,
                       input_shapes=[tuple(int(d) for d in x.shape) for x in inputs],
                       input_dtype=str(inputs[0].dtype).removeprefix("torch."), frontend=frontend)
