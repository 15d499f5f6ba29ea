"""Ops that need more than dtypes in the record, each with a small callback that returns the
record's `extra` field. Only these ops pay for it; every other op is a dict miss (keyed by the
op's id: `OpOverload.__hash__` is Python code)."""

from __future__ import annotations

import functools
import math
import sys
from typing import Any, Callable

import torch
from torch.utils.flop_counter import flop_registry

from ampdoctor.audit.evidence import Tag

_HALF = (torch.bfloat16, torch.float16)
# Largest integer up to which every integer is exact (AMP103: bf16 256, fp16 2048).
EXACT_INT = {torch.bfloat16: 256, torch.float16: 2048}
# From this magnitude a number rounds to inf: the largest finite value plus half an ulp (AMP133).
_INF_AT = {torch.float16: 65520.0, torch.bfloat16: 2.0 ** 128 * (1 - 2.0 ** -9)}
_INTS = (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8)


# The only types of tensor whose values the audit reads (`no_values`): the recording offers a leaf to the value watch
# only when it is of one of them (a fake step's leaves are fake: none is).
HOLD_VALUES = frozenset({torch.Tensor, torch.nn.Parameter})


def no_values(t: torch.Tensor) -> bool:
    """Tensors whose values the audit does not read: fake/meta ones have none, reading a subclass's (a DTensor
    shard) from inside the dispatch mode would run the subclass's own dispatch (sharding propagation) again, and a
    sparse or nested one's have no kernels for the reductions and indexing the audit reads them with."""
    return type(t) not in HOLD_VALUES or t.device.type == "meta" or t.layout is not torch.strided or t.is_nested


def _shapes(a: Any) -> Any:
    """Tensors as their shapes and lists as tuples: all a FLOP formula reads, and hashable. Plain tuples of ints,
    not `torch.Size`: the garbage collector stops tracking them, and a recording holds thousands."""
    if isinstance(a, torch.Tensor):
        return tuple(a.shape)
    if isinstance(a, (list, tuple)):
        return tuple(_shapes(b) for b in a)
    return a


def _matmul(formula: Callable[..., Any]) -> Callable[..., Any]:
    # Only shapes are recorded; `matmul_flops` counts after the step, and only when the count can matter
    # (a formula per op costs more than the rest of the record).
    def watch(r: Any, func: Any, args: tuple, kwargs: dict, out: Any, ins: list) -> Any:
        return (Tag.FLOPS, formula, _shapes(args), _shapes(tuple(kwargs.items())), _shapes(out))

    return watch


@functools.lru_cache(maxsize=4096)
def _count(formula: Callable[..., Any], args: tuple, kwargs: tuple, out: Any) -> int:
    return int(formula(*args, **dict(kwargs), out_val=out))


def matmul_flops(extra: tuple) -> int:
    """The FLOPs of a recorded matmul, from the `("flops", ...)` extra its watch recorded."""
    try:
        return _count(*extra[1:])
    except Exception:  # a shape the formula does not cover: FLOPs are a share, not a verdict
        return 0


def _sdpa_cpu_formula(factor: int, q_arg: int) -> Callable[..., int]:
    def formula(*args: Any, out_val: Any = None, **kwargs: Any) -> int:
        q, k = args[q_arg], args[q_arg + 1]
        if len(q) < 2:
            return 0
        return 4 * math.prod(q[:-2]) * q[-2] * k[-2] * q[-1] * factor

    return formula


def _grouped_mm_formula(*args: Any, out_val: Any = None, **kwargs: Any) -> int:
    """A grouped matmul (MoE experts), which torch's FLOP counter does not know: each output element is a dot product
    over the contracted dim; where both operands are 2-D the groups split that dim (the weight gradient: out is
    (groups, M, N) over K in all)."""
    a, b = args[0], args[1]
    if len(a) == 2 and len(b) == 2:
        return 2 * a[0] * a[1] * b[1]
    return 2 * math.prod(out_val) * a[-1]


def _arange(r: Any, func: Any, args: tuple, kwargs: dict, out: Any, ins: list) -> Any:
    if out.dtype in _HALF and out.numel():
        nums = [a for a in args if isinstance(a, (int, float))]
        top = max(abs(float(n)) for n in nums) if nums else 0.0
        if top > EXACT_INT[out.dtype]:
            return (Tag.POSITIONS, top, "arange")
    return None


def _to_copy(r: Any, func: Any, args: tuple, kwargs: dict, out: Any, ins: list) -> Any:
    if out.dtype not in _HALF or not ins:
        return None
    src = ins[0]
    if no_values(src) or src.numel() == 0:
        return None
    if src.dtype in _INTS:
        top = float(src.detach().abs().max())
        if top > EXACT_INT[out.dtype]:
            return (Tag.POSITIONS, top, "cast")
    elif src.dtype in (torch.float32, torch.float64) and src.numel() <= 1 << 16:
        s = src.detach()
        finite = s.isfinite()
        whole = bool(finite.all())
        # The largest finite magnitude: a mask may already hold -inf (a causal mask) beside a finite fill.
        top = float(s.abs().max()) if whole else float(s[finite].abs().max()) if bool(finite.any()) else 0.0
        if top >= _INF_AT[out.dtype]:
            big = s[finite & (s.abs() >= _INF_AT[out.dtype])]
            if s.dim() and big.numel() > 1 and bool((big == big[0]).all()):
                # One fill constant (a mask's float32 min): not positions, not overflowing activations. A problem only
                # where the cast leaves a row with nothing but infinities (the fill, beside the -inf a mask already
                # held), which softmax turns into NaN (a causal mask's -inf beside finite scores is harmless).
                lost = (s == big[0]) | (s == math.copysign(math.inf, float(big[0])))
                made = lost.all(dim=-1) & (s == big[0]).any(dim=-1)
                return (Tag.FILL, float(big[0]), out.dtype, "cast") if bool(made.any()) else None
        # Positions are finite: a tensor with infinities in it is a mask.
        if whole and top > EXACT_INT[out.dtype] and bool((s == s.round()).all()) and not _additive_mask(s):
            return (Tag.POSITIONS, top, "cast")
    return None


def _additive_mask(s: torch.Tensor) -> bool:
    """Zeros beside one negative constant (`(1 - keep) * -10000.0`, a key padded with float32's min): a mask added to
    attention scores, whole numbers but no positions."""
    low = s.min()
    return bool(low < 0) and bool(((s == 0) | (s == low)).all())


def _ones_like(r: Any, func: Any, args: tuple, kwargs: dict, out: Any, ins: list) -> Any:
    # autograd's _make_grads seeds backward with ones_like(loss): its input is the loss.
    f = sys._getframe(1)
    for _ in range(8):
        if f is None:
            break
        if f.f_code.co_name == "_make_grads":
            return (Tag.LOSS, r.producer_of(ins[0]) if ins else -1, ins[0].dtype if ins else None)
        f = f.f_back
    return None


def _trig(r: Any, func: Any, args: tuple, kwargs: dict, out: Any, ins: list) -> Any:
    # cos/sin of large angles in half precision (AMP101/AMP002): keep the largest angle for the rope check.
    if ins and ins[0].dtype in _HALF and not no_values(ins[0]) and ins[0].numel():
        return (Tag.ANGLE, float(ins[0].detach().abs().max()))
    return None


# Significant bits (with the implicit one): the spacing of values in [2**(e-1), 2**e) is 2**(e - bits).
_SIGNIFICANT_BITS = {torch.bfloat16: 8, torch.float16: 11}
_AVERAGE_SAMPLE = 1 << 12


def _sample(t: torch.Tensor, budget: int) -> torch.Tensor:
    return t.detach().reshape(-1)[::max(1, t.numel() // budget)][:budget].float()


def _rounded_away(dst: torch.Tensor, step: torch.Tensor, dtype: Any) -> tuple[int, int]:
    """(steps below half an ulp of the value they move, nonzero steps), over float32 samples of a `dtype` tensor as it
    is now and of the steps added to it: the next step of that size rounds to nothing where ``|step| < ulp(dst) / 2``."""
    _, exponent = torch.frexp(dst)
    half_ulp = torch.ldexp(torch.full_like(dst, 0.5), exponent - _SIGNIFICANT_BITS[dtype])
    moving = (step != 0) & (dst != 0)
    return int(((step.abs() < half_ulp) & moving).sum()), int(moving.sum())


def _lerp_rounded_away(dst: torch.Tensor, end: torch.Tensor, weight: float, budget: int) -> tuple[int, int]:
    """The same for ``dst.lerp_(end, weight)``, whose step is ``weight * (end - dst)``."""
    if no_values(dst) or no_values(end) or dst.numel() == 0 or end.shape != dst.shape:
        return 0, 0
    a = _sample(dst, budget)
    return _rounded_away(a, (_sample(end, budget) - a) * weight, dst.dtype)


def _lerp(r: Any, func: Any, args: tuple, kwargs: dict, out: Any, ins: list) -> Any:
    # AMP138: an EMA kept in half precision moves by (1 - decay) * (param - ema), mostly below half an ulp.
    # Inside optimizer.step a lerp_ is the optimizer's own state (Adam's exp_avg), which other rules judge.
    if r.in_optimizer or len(args) < 3 or not isinstance(args[2], (int, float)):
        return None
    dsts, ends = (args[0], args[1]) if isinstance(args[0], (list, tuple)) else ([args[0]], [args[1]])
    lost = considered = 0
    for dst, end in zip(dsts, ends):
        if isinstance(dst, torch.Tensor) and isinstance(end, torch.Tensor) and dst.dtype in _HALF and considered < _AVERAGE_SAMPLE:
            below, moved = _lerp_rounded_away(dst, end, float(args[2]), _AVERAGE_SAMPLE - considered)
            lost, considered = lost + below, considered + moved
    return (Tag.AVERAGE, lost, considered) if considered else None


# Running sums are small (a loss, a count, a metric per class); larger in-place adds are activations or weights.
_RUNNING_SUM_NUMEL = 1 << 12


def _add_(r: Any, func: Any, args: tuple, kwargs: dict, out: Any, ins: list) -> Any:
    # AMP137: `total += loss` into a small bf16/fp16 tensor outside any module, backward and optimizer step: a running
    # sum of losses or metrics, whose increments stop counting once they are below half its ulp.
    if r.in_optimizer or r.stack or _current_node() is not None or len(args) < 2:
        return None
    dst, inc = args[0], args[1]
    if not isinstance(dst, torch.Tensor) or dst.dtype not in _HALF or dst.numel() > _RUNNING_SUM_NUMEL or no_values(dst):
        return None
    if isinstance(inc, torch.Tensor):
        if no_values(inc) or inc.numel() not in (1, dst.numel()):
            return None
        step = inc.detach().float().expand(dst.shape) if inc.numel() == 1 else inc.detach().float().reshape(dst.shape)
    elif isinstance(inc, (int, float)):
        step = torch.full(dst.shape, float(inc), device=dst.device)
    else:
        return None
    step = step * float(kwargs.get("alpha", args[2] if len(args) > 2 else 1))
    lost, considered = _rounded_away(dst.detach().float(), step, dst.dtype)
    return (Tag.RUNNING_SUM, lost, considered) if considered else None


_current_node = torch._C._current_autograd_node

def _scalar_tensor(r: Any, func: Any, args: tuple, kwargs: dict, out: Any, ins: list) -> Any:
    # `torch.where(mask, -1e9, scores)` wraps the number in the scores' half dtype: no error, an inf fill.
    value = args[0] if args else None
    if out.dtype in _HALF and isinstance(value, (int, float)) and math.isfinite(value) and abs(value) >= _INF_AT[out.dtype]:
        return (Tag.FILL, float(value), out.dtype, "fill")
    return None


def _masked_fill(r: Any, func: Any, args: tuple, kwargs: dict, out: Any, ins: list) -> Any:
    # AMP133: a finite fill of a cast's half result (in place, or a copy the code goes on with) repairs the infinities
    # the cast made, when no row is left with nothing but infinities; a fill elsewhere (another mask's positions)
    # repairs nothing. Larger than the casts judged (`_to_copy`), it cannot be their result: not read.
    value = args[2] if len(args) > 2 else kwargs.get("value")
    if isinstance(value, torch.Tensor) and value.numel() == 1 and not no_values(value):
        value = float(value)
    if not (isinstance(out, torch.Tensor) and out.dtype in _HALF and isinstance(value, (int, float)) and math.isfinite(value)):
        return None
    if no_values(out) or out.numel() > 1 << 16 or (out.dim() and bool(out.isinf().all(dim=-1).any())):
        return None
    return (Tag.REFILL,)


def _overloads(packet: Any) -> list:
    return [getattr(packet, name) for name in packet.overloads()]


def _build() -> tuple[dict[int, Callable[..., Any]], frozenset[int]]:
    table: dict[int, Callable[..., Any]] = {}
    matmuls: set[int] = set()

    def add(op: Any, fn: Callable[..., Any]) -> None:
        _KEEP.append(op)  # ids are keys: keep the ops alive
        table[id(op)] = fn

    for packet in flop_registry:
        if isinstance(packet, torch._ops.OpOverloadPacket):
            watch = _matmul(flop_registry[packet])
            for op in _overloads(packet):
                add(op, watch)
                matmuls.add(id(op))
    aten = torch.ops.aten
    # CPU flash attention has no formula in torch: 4*b*L*S*E forward, twice that backward (whose
    # first argument is grad_out, so query and key come one later). Nor has the grouped matmul of MoE experts.
    for name, watch in (("_scaled_dot_product_flash_attention_for_cpu", _matmul(_sdpa_cpu_formula(1, 0))),
                        ("_scaled_dot_product_flash_attention_for_cpu_backward", _matmul(_sdpa_cpu_formula(2, 1))),
                        ("_grouped_mm", _matmul(_grouped_mm_formula))):
        if hasattr(aten, name):
            for op in _overloads(getattr(aten, name)):
                add(op, watch)
                matmuls.add(id(op))
    for op in _overloads(aten.arange):
        add(op, _arange)
    add(aten._to_copy.default, _to_copy)
    add(aten.ones_like.default, _ones_like)
    add(aten.scalar_tensor.default, _scalar_tensor)
    for op in (aten.masked_fill_.Scalar, aten.masked_fill_.Tensor, aten.masked_fill.Scalar, aten.masked_fill.Tensor):
        add(op, _masked_fill)
    for op in (aten.cos.default, aten.sin.default):
        add(op, _trig)
    for op in (aten.lerp_.Scalar, aten._foreach_lerp_.Scalar):
        add(op, _lerp)
    for op in (aten.add_.Tensor, aten.add_.Scalar):
        add(op, _add_)
    return table, frozenset(matmuls)


_KEEP: list[Any] = []
WATCHED, MATMUL_OPS = _build()
