"""Function-level observation for the audit: the calls to `F.scaled_dot_product_attention`, with the dtypes its caller
gave it, through a `TorchFunctionMode` that lets every other call through untouched.

The aten ops one attention call becomes are the kernel's choice, not the caller's: CPU's flash kernel is one op, while
the math path it falls back to (dropout in training, a mask it does not take) upcasts half-precision q/k/v to fp32
and runs fp32 bmm/softmax. The dispatch mode sees only those ops; so what the caller did (the mask's dtype against
the queries', AMP122) is judged at the call (with autocast on, autocast casts them all to one dtype first), and the
ops recorded between its start and end are known to be the kernel's own (not counted as the caller's fp32 matmuls,
AMP203). Like the dispatch mode, the mode is on the stack only while recording, and comes off only where it is the
innermost one (one the script entered above it stays, and ours passes its calls through until the audit exits).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode, _get_current_function_mode_stack

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


class CallWatch(TorchFunctionMode):
    def __init__(self, recorder: Any) -> None:
        super().__init__()
        self.r = recorder

    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        r = self.r
        if func is not _SDPA or not r.active:
            return func(*args, **kwargs)
        records = r.records
        start = len(records)
        try:
            return func(*args, **kwargs)
        finally:
            q, k, v = (args + (None, None, None))[:3]
            mask = args[3] if len(args) > 3 else kwargs.get("attn_mask")
            autocast = torch.get_autocast_dtype(r.device_type) if r.autocast_on else None
            r.attention_calls.append(AttentionCall(start, len(records), _dtype(q), _dtype(k), _dtype(v), _dtype(mask), autocast))


class CallTracking:
    """The function-mode half of `Recorder`; `attention_calls` and `_call_mode` are set up in `Recorder.__init__`."""

    attention_calls: list[AttentionCall]
    _call_mode: CallWatch | None

    def _enter_calls(self) -> None:
        if self._call_mode is None:
            mode = CallWatch(self)
            mode.__enter__()
            self._call_mode = mode

    def _exit_calls(self) -> None:
        mode = self._call_mode
        if mode is not None and _get_current_function_mode_stack()[-1:] == [mode]:
            self._call_mode = None
            mode.__exit__(None, None, None)
