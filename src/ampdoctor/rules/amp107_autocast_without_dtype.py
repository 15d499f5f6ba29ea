"""AMP107 autocast-without-dtype: `autocast` is entered without `dtype=`, so CUDA defaults to fp16 whatever the config says.

Every detector of this rule; its documentation is the catalog entry (`ampdoctor rules AMP107`)."""

from __future__ import annotations

import ast
from typing import Iterator

from ampdoctor.core.registry import code_check
from ampdoctor.lint.python.context import CodeHit, Context, calls_named
from ampdoctor.lint.python.dataflow import autocast_argument
from ampdoctor.lint.python.facts import AUTOCASTS
from ampdoctor.lint.python.resolve import has_star_kwargs


@code_check("AMP107", triggers=("autocast",))
def autocast_without_dtype(ctx: Context) -> Iterator[CodeHit]:
    for call, name in calls_named(ctx, AUTOCASTS - {"torch.cpu.amp.autocast"}):
        if has_star_kwargs(call) or autocast_argument(call, name, "dtype") is not None:
            continue
        enabled = autocast_argument(call, name, "enabled")
        if isinstance(enabled, ast.Constant) and enabled.value is False:
            continue  # disabling autocast needs no dtype
        if name == "torch.autocast":
            device = autocast_argument(call, name, "device_type")
            values = [device.body, device.orelse] if isinstance(device, ast.IfExp) else [device]
            if all(isinstance(v, ast.Constant) and v.value != "cuda" for v in values):
                continue  # CPU/XPU autocast defaults to bf16
        yield call, "autocast without `dtype=` runs in float16 on CUDA, whatever precision the run is configured for"

