"""Function-level observation for the audit: the calls to `F.scaled_dot_product_attention`, with the dtypes its caller
gave it.

The aten ops one attention call becomes are the kernel's choice, not the caller's: CPU's flash kernel is one op, while
the math path it falls back to (dropout in training, a mask it does not take) upcasts half-precision q/k/v to fp32
and runs fp32 bmm/softmax. The dispatch mode sees only those ops; so what the caller did (the mask's dtype against
the queries', AMP122) is judged at the call (with autocast on, autocast casts them all to one dtype first), and the
ops recorded between its start and end are known to be the kernel's own (not counted as the caller's fp32 matmuls,
AMP203).

The calls are seen by a wrapper the audit puts in `torch.nn.functional` while it records, not by a
`TorchFunctionMode`: under any function mode torch adds about 2 us to every torch call and tensor attribute read of
the step (a tenth of a fake 70B audit's overhead), for the one function watched. What the wrapper cannot see is a
call through a name bound before the audit (`from torch.nn.functional import scaled_dot_product_attention` at
import, or another patch's saved reference): such a call that reaches a fused kernel (`FUSED`: CPU's flash kernel,
CUDA's flash, efficient and cuDNN kernels, ...) is still seen, from that kernel's record, with the dtypes the kernel
got (after autocast's casts and a boolean mask's conversion to an additive one) and the kernel's op alone as its
ops; one that takes the math path (the kernel decomposed into bmm/softmax before the dispatch mode sees it), or
that raises before its kernel runs, stays unseen.

The wrapper is installed only over torch's own function (or over a wrapper of an earlier audit that code restored
after that audit ended, which only calls through); it is removed when the recording stops or pauses and when the
audit exits, also on an exception, and only where it is still the attribute's value: a patch that code made over
it while the audit ran stays, and the wrapper underneath only calls through from then on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import torch
import torch.nn.functional as F

_NAME = "scaled_dot_product_attention"
_SDPA = F.scaled_dot_product_attention


@dataclass(frozen=True)
class AttentionCall:
    """One call to `F.scaled_dot_product_attention`: the records its ops got, and its operands' dtypes."""

    start: int  # the first record made inside the call
    end: int  # one past the last
    query: Any
    key: Any
    value: Any
    mask: Any  # the attn_mask's dtype, None without one
    # The autocast dtype when autocast was on at the call (None when off): autocast casts every float operand of the
    # attention to it before the kernel runs, so the kernel computes in it whatever the caller gave.
    autocast: Any = None

    @property
    def compute(self) -> Any:
        """The dtype the kernel was given q/k/v in."""
        return self.autocast if self.autocast is not None else self.query


def _dtype(t: Any) -> Any:
    return t.dtype if isinstance(t, torch.Tensor) else None


def _note(r: Any, start: int, end: int, args: tuple, mask: Any) -> None:
    """Append the call whose ops are records `start` to `end` (excluded), with q/k/v first in `args`."""
    q, k, v = (args + (None, None, None))[:3]
    autocast = torch.get_autocast_dtype(r.device_type) if r.autocast_on else None
    r.attention_calls.append(AttentionCall(start, end, _dtype(q), _dtype(k), _dtype(v), _dtype(mask), autocast))


def _fused_ops() -> dict[int, tuple[Any, int, str | None]]:
    """The forward fused attention kernels of this torch build, by id: (the op, the position of its mask argument
    (-1 when keyword-only or absent), the mask argument's name (None without one))."""
    found: dict[int, tuple[Any, int, str | None]] = {}
    for name in ("_scaled_dot_product_flash_attention_for_cpu", "_scaled_dot_product_flash_attention",
                 "_scaled_dot_product_efficient_attention", "_scaled_dot_product_cudnn_attention",
                 "_scaled_dot_product_fused_attention_overrideable", "_scaled_dot_product_attention_math_for_mps"):
        packet = getattr(torch.ops.aten, name, None)
        for overload in packet.overloads() if packet is not None else ():
            op = getattr(packet, overload)
            position, mask = -1, None
            for i, arg in enumerate(op._schema.arguments):
                if arg.name in ("attn_mask", "attn_bias"):
                    position, mask = (-1 if arg.kwarg_only else i), arg.name
            found[id(op)] = (op, position, mask)
    return found


FUSED = _fused_ops()


def unseen_call(r: Any, func: Any, args: tuple, kwargs: dict) -> None:
    """A fused attention kernel ran (its record is about to be appended): outside a call the wrapper saw, it is the
    evidence of a call through a name bound before the audit, noted as a call of this one op."""
    if r.in_attention_call:
        return
    _, position, name = FUSED[id(func)]
    mask = args[position] if 0 <= position < len(args) else kwargs.get(name) if name is not None else None
    seq = len(r.records)
    _note(r, seq, seq + 1, args, mask)


def _wrapper(r: Any, inner: Callable[..., Any]) -> Callable[..., Any]:
    def scaled_dot_product_attention(*args: Any, **kwargs: Any) -> Any:
        if r.in_attention_call or not r.active or not r.here():
            return inner(*args, **kwargs)
        start = len(r.records)
        r.in_attention_call = True
        try:
            return inner(*args, **kwargs)
        finally:
            r.in_attention_call = False
            _note(r, start, len(r.records), args, args[3] if len(args) > 3 else kwargs.get("attn_mask"))

    scaled_dot_product_attention.__doc__ = _SDPA.__doc__
    scaled_dot_product_attention.__wrapped__ = inner  # type: ignore[attr-defined]
    scaled_dot_product_attention._ampdoctor_calls = True  # type: ignore[attr-defined]
    return scaled_dot_product_attention


class CallTracking:
    """The call-watching half of `Recorder`; `attention_calls`, `in_attention_call` and `_call_wrapper` are set up in
    `Recorder.__init__`."""

    attention_calls: list[AttentionCall]
    in_attention_call: bool
    _call_wrapper: Callable[..., Any] | None

    def _enter_calls(self) -> None:
        if self._call_wrapper is not None:
            return
        there = F.__dict__.get(_NAME)
        if there is _SDPA or getattr(there, "_ampdoctor_calls", False):
            self._call_wrapper = _wrapper(self, there)
            setattr(F, _NAME, self._call_wrapper)

    def _exit_calls(self) -> None:
        wrapper = self._call_wrapper
        if wrapper is None:
            return
        # Forgotten here whatever happens: the wrapper holds the recorder, which would otherwise hold it in a cycle.
        self._call_wrapper = None
        if F.__dict__.get(_NAME) is wrapper:
            setattr(F, _NAME, wrapper.__wrapped__)  # type: ignore[attr-defined]
