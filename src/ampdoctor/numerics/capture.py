"""Recording every module's first call in one step: inputs, output, the dtypes it received and the gradient that
flowed into its output. Hooks are removed on exit; `paused` turns recording off for re-runs of single modules."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from ampdoctor.numerics.metrics import float_leaves


def snapshot(value: Any) -> Any:
    """A detached copy of the tensors in `value` (tuples, lists and mappings rebuilt; other objects kept)."""
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, (tuple, list)):
        return type(value)(snapshot(v) for v in value) if type(value) in (tuple, list) else tuple(snapshot(v) for v in value)
    if isinstance(value, dict) or (hasattr(value, "keys") and hasattr(value, "__getitem__")):
        return {k: snapshot(value[k]) for k in value.keys()}
    return value


@dataclass
class Call:
    """One module's first call of the step."""

    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    output: Any
    input_dtypes: tuple[str, ...]
    # Gradient of the loss with respect to each floating output leaf, filled during backward.
    grads: dict[int, torch.Tensor] = field(default_factory=dict)
    calls: int = 1


class Recorder:
    """``with Recorder(model) as rec: ...`` records `rec.calls[name]` for every module that ran."""

    def __init__(self, model: nn.Module) -> None:
        self.model = model
        self.calls: dict[str, Call] = {}
        self._handles: list[Any] = []

    def __enter__(self) -> "Recorder":
        for name, module in self.model.named_modules():
            self._handles.append(module.register_forward_hook(self._hook(name), with_kwargs=True))
        return self

    def __exit__(self, *exc: Any) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles.clear()

    def _hook(self, name: str) -> Any:
        def hook(module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any], output: Any) -> None:
            if name in self.calls:
                self.calls[name].calls += 1
                return
            dtypes = tuple(str(t.dtype).removeprefix("torch.") for t in float_leaves((args, kwargs)))
            call = Call(snapshot(args), snapshot(kwargs), snapshot(output), dtypes)
            self.calls[name] = call
            for index, leaf in enumerate(float_leaves(output)):
                if leaf.requires_grad:
                    leaf.register_hook(_grad_saver(call, index))

        return hook


def _grad_saver(call: Call, index: int) -> Any:
    def save(grad: torch.Tensor) -> None:
        call.grads[index] = grad.detach().clone()

    return save


def output_grad(call: Call) -> torch.Tensor | None:
    """The gradients into the module's output leaves as one float64 vector (leaves with no gradient are skipped)."""
    if not call.grads:
        return None
    return torch.cat([call.grads[i].reshape(-1).to(torch.float64) for i in sorted(call.grads)])


def cast_like(reference: Any, received: Any) -> Any:
    """`reference` (a module's inputs in the reference run) with each floating tensor cast to the dtype of the tensor
    at the same place in `received` (the inputs the module got under the policy)."""
    if isinstance(reference, torch.Tensor):
        if reference.is_floating_point() and isinstance(received, torch.Tensor) and received.is_floating_point():
            return reference.to(received.dtype)
        return reference
    if isinstance(reference, (tuple, list)) and isinstance(received, (tuple, list)) and len(reference) == len(received):
        return type(reference)(cast_like(a, b) for a, b in zip(reference, received))
    if isinstance(reference, dict) and isinstance(received, dict):
        return {k: cast_like(v, received.get(k)) for k, v in reference.items()}
    return reference
