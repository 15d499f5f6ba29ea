"""Fake tensors as strict as the kernels, not stricter, for the fake audit of a model config.

A fake run computes each op's result from its meta function, and a few meta functions check more than the CPU and
CUDA kernels they stand for. The grouped matmul of mixture-of-experts layers is the one that matters: its meta
function accepts bf16 operands only, while both kernels run fp32 (and CPU's fp16) as well. Under bf16 autocast with
fp32 weights that is exactly what a real step gives it (the op is on none of autocast's lists, so the experts
compute in fp32), and a fake audit of such a model stopped at the first expert layer where the real step runs on.

`FaithfulFakeTensorMode` asks the meta function for the result's shape with bf16 operands and gives the result back
in the operands' own dtype, as the kernels do. The recording sees the op as the model called it (fp32 operands and
all); the two casts happen while the fake mode dispatches it, where nothing is recorded. The rule is one entry in the
fake modes' table of op implementations, there only while a `FaithfulFakeTensorMode` is entered (so no other op pays
for it) and answering for no other fake mode. Operands of two different dtypes still fail, as in the kernels.
"""

from __future__ import annotations

import threading
from typing import Any

import torch
from torch._subclasses import fake_impls
from torch._subclasses.fake_tensor import FakeTensorMode

_GROUPED_MM = torch.ops.aten._grouped_mm.default
_lock = threading.Lock()
_entered = 0  # FaithfulFakeTensorModes entered (nested or in threads): the table entry stays while any is


def _grouped_mm(mode: FakeTensorMode, func: Any, *args: Any, **kwargs: Any) -> Any:
    a, b = args[0], args[1]
    if type(mode) is not FaithfulFakeTensorMode or kwargs.get("out_dtype") is not None \
            or a.dtype != b.dtype or not a.dtype.is_floating_point or a.dtype == torch.bfloat16:
        return NotImplemented  # the meta function decides

    def bf16(x: Any) -> Any:
        return x.to(torch.bfloat16) if isinstance(x, torch.Tensor) and x.is_floating_point() else x

    return func(*map(bf16, args), **{k: bf16(v) for k, v in kwargs.items()}).to(a.dtype)


class FaithfulFakeTensorMode(FakeTensorMode):
    def __enter__(self) -> Any:
        global _entered
        with _lock:
            if _entered == 0 and _GROUPED_MM not in fake_impls.op_implementations_dict:
                fake_impls.op_implementations_dict[_GROUPED_MM] = _grouped_mm
            _entered += 1
        return super().__enter__()

    def __exit__(self, *exc: Any) -> Any:
        global _entered
        try:
            return super().__exit__(*exc)
        finally:
            with _lock:
                _entered -= 1
                if _entered == 0 and fake_impls.op_implementations_dict.get(_GROUPED_MM) is _grouped_mm:
                    del fake_impls.op_implementations_dict[_GROUPED_MM]
