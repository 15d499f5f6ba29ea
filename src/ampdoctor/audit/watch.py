"""Ops that need more than dtypes in the record, each with a small callback that returns the
record's `extra` field. Only these ops pay for it; every other op is a dict miss."""

from __future__ import annotations

import sys
from typing import Any, Callable

import torch
from torch.utils.flop_counter import flop_registry

_HALF = (torch.bfloat16, torch.float16)
# Largest integer up to which every integer is exact (B3: bf16 256, fp16 2048).
EXACT_INT = {torch.bfloat16: 256, torch.float16: 2048}
_INTS = (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8)


def _fake(t: torch.Tensor) -> bool:
    return "Fake" in type(t).__name__ or t.device.type == "meta"


def _flops(r: Any, func: Any, args: tuple, kwargs: dict, out: Any, ins: list) -> Any:
    try:
        return ("flops", int(flop_registry[func._overloadpacket](*args, **kwargs, out_val=out)))
    except Exception:  # a shape the formula does not cover: FLOPs are a share, not a verdict
        return None


def _sdpa_cpu_flops(r: Any, func: Any, args: tuple, kwargs: dict, out: Any, ins: list) -> Any:
    q, k = args[0], args[1]
    if q.dim() < 2:
        return None
    b = q.numel() // (q.shape[-2] * q.shape[-1])
    factor = 2 if "backward" in func.__name__ else 1
    return ("flops", 4 * b * q.shape[-2] * k.shape[-2] * q.shape[-1] * factor)


def _arange(r: Any, func: Any, args: tuple, kwargs: dict, out: Any, ins: list) -> Any:
    if out.dtype in _HALF and out.numel():
        nums = [a for a in args if isinstance(a, (int, float))]
        top = max(abs(float(n)) for n in nums) if nums else 0.0
        if top > EXACT_INT[out.dtype]:
            return ("positions", top, "arange")
    return None


def _to_copy(r: Any, func: Any, args: tuple, kwargs: dict, out: Any, ins: list) -> Any:
    if out.dtype not in _HALF or not ins:
        return None
    src = ins[0]
    if _fake(src) or src.numel() == 0:
        return None
    if src.dtype in _INTS:
        top = float(src.detach().abs().max())
        if top > EXACT_INT[out.dtype]:
            return ("positions", top, "cast")
    elif src.dtype in (torch.float32, torch.float64) and src.numel() <= 1 << 16:
        s = src.detach()
        top = float(s.abs().max())
        if top > EXACT_INT[out.dtype] and bool((s == s.round()).all()):
            return ("positions", top, "cast")
    return None


def _ones_like(r: Any, func: Any, args: tuple, kwargs: dict, out: Any, ins: list) -> Any:
    # autograd's _make_grads seeds backward with ones_like(loss): its input is the loss.
    f = sys._getframe(1)
    for _ in range(8):
        if f is None:
            break
        if f.f_code.co_name == "_make_grads":
            return ("loss", r.producer_of(ins[0]) if ins else -1, ins[0].dtype if ins else None)
        f = f.f_back
    return None


def _trig(r: Any, func: Any, args: tuple, kwargs: dict, out: Any, ins: list) -> Any:
    # cos/sin of large angles in half precision (B1/B2): keep the largest angle for the rope check.
    if ins and ins[0].dtype in _HALF and not _fake(ins[0]) and ins[0].numel():
        return ("angle", float(ins[0].detach().abs().max()))
    return None


def _overloads(packet: Any) -> list:
    return [getattr(packet, name) for name in packet.overloads()]


def _build() -> dict[Any, Callable[..., Any]]:
    table: dict[Any, Callable[..., Any]] = {}
    for packet in flop_registry:
        if isinstance(packet, torch._ops.OpOverloadPacket):
            for op in _overloads(packet):
                table[op] = _flops
    aten = torch.ops.aten
    for name in ("_scaled_dot_product_flash_attention_for_cpu", "_scaled_dot_product_flash_attention_for_cpu_backward"):
        if hasattr(aten, name):
            for op in _overloads(getattr(aten, name)):
                table[op] = _sdpa_cpu_flops
    for op in _overloads(aten.arange):
        table[op] = _arange
    table[aten._to_copy.default] = _to_copy
    table[aten.ones_like.default] = _ones_like
    for op in (aten.cos.default, aten.sin.default):
        table[op] = _trig
    return table


WATCHED = _build()
MATMUL_OPS = frozenset(op for op, fn in WATCHED.items() if fn in (_flops, _sdpa_cpu_flops))
