"""`apply_rotary`: rotate x by fp32 cos/sin tables in fp32 arithmetic and return x's dtype.

One kernel serves forward and backward (the backward of a rotation is the rotation by -angle, flash-attn's
``conjugate``). It reads x in any float dtype and fp32 tables, never asserts that their dtypes agree
(flash-attn #823, transformers #38451 / incident 5) and never leaks fp32 into the output (GPT-NeoX #1305).
Large inputs go through a `torch.compile`d copy of the same function, so the upcast, the rotation and the
downcast happen in one pass; if compiling fails the eager function is used instead. On CUDA with triton
installed, `ampdoctor.nn.rope_triton` does the same math in one Triton launch (imported only then).
"""

from __future__ import annotations

import warnings
from typing import Any, Callable, Literal

import torch

Layout = Literal["half", "interleaved"]
LAYOUTS: tuple[str, ...] = ("half", "interleaved")
Backend = Literal["auto", "compile", "eager", "triton"]
BACKENDS: tuple[str, ...] = ("auto", "compile", "eager", "triton")

# Compiling costs seconds once per shape family and pays off only on big tensors; small inputs (decoding,
# tests) stay eager.
COMPILE_MIN_NUMEL = 1 << 20


def _pairs(rotary_dim: int, interleaved: bool) -> tuple[slice, slice]:
    """Channel selections of the two members of each rotated pair."""
    if interleaved:
        return slice(0, None, 2), slice(1, None, 2)
    return slice(0, rotary_dim // 2), slice(rotary_dim // 2, rotary_dim)


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, interleaved: bool, conjugate: bool) -> torch.Tensor:
    """The rotation, eager: math in cos's dtype on the first ``2 * cos.shape[-1]`` channels, the rest copied.

    Written into views of one buffer with mul + addcmul: no cat/stack copies, about half the time of the
    functional form on CPU."""
    rotary_dim = 2 * cos.shape[-1]
    rot = x[..., :rotary_dim].to(cos.dtype)
    out = torch.empty_like(rot)
    first, second = _pairs(rotary_dim, interleaved)
    sign = -1.0 if conjugate else 1.0
    torch.mul(rot[..., first], cos, out=out[..., first])
    out[..., first].addcmul_(rot[..., second], sin, value=-sign)
    torch.mul(rot[..., second], cos, out=out[..., second])
    out[..., second].addcmul_(rot[..., first], sin, value=sign)
    if rotary_dim == x.shape[-1]:
        return out.to(x.dtype)
    result = torch.empty_like(x)
    result[..., :rotary_dim] = out
    result[..., rotary_dim:] = x[..., rotary_dim:]
    return result


def rotate_functional(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, interleaved: bool, conjugate: bool) -> torch.Tensor:
    """The same rotation without out=/in-place ops, the form inductor fuses into one read-compute-write loop
    (it rejects `rotate`'s out= views under dynamic shapes)."""
    rotary_dim = 2 * cos.shape[-1]
    rot = x[..., :rotary_dim].to(cos.dtype)
    first, second = _pairs(rotary_dim, interleaved)
    x1, x2 = rot[..., first], rot[..., second]
    if conjugate:
        sin = -sin
    o1, o2 = x1 * cos - x2 * sin, x2 * cos + x1 * sin
    out = torch.stack((o1, o2), dim=-1).flatten(-2) if interleaved else torch.cat((o1, o2), dim=-1)
    return torch.cat((out.to(x.dtype), x[..., rotary_dim:]), dim=-1)


class _CompiledRotate:
    """`rotate_functional` under torch.compile, built on first use; falls back to eager for good after a failure."""

    def __init__(self) -> None:
        self._fn: Callable[..., torch.Tensor] | None = None
        self.failed: str | None = None

    def __call__(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, interleaved: bool, conjugate: bool,
                 strict: bool) -> torch.Tensor:
        if self.failed is not None and not strict:
            return rotate(x, cos, sin, interleaved, conjugate)
        try:
            if self._fn is None:
                self._fn = torch.compile(rotate_functional, dynamic=True)
            return self._fn(x, cos, sin, interleaved, conjugate)
        except Exception as exc:  # inductor raises many types (no compiler, codegen, backend errors)
            if strict:
                raise
            self.failed = f"{type(exc).__name__}: {exc}".splitlines()[0]
            warnings.warn(
                f"ampdoctor: torch.compile of the rotary kernel failed ({self.failed}); using the eager kernel",
                RuntimeWarning,
                stacklevel=4,
            )
            return rotate(x, cos, sin, interleaved, conjugate)


compiled_rotate = _CompiledRotate()

_triton_module: Any = None  # None: not tried yet; False: triton is not importable


def triton_rotary(required: bool = False) -> Any:
    """`ampdoctor.nn.rope_triton`, or None where triton cannot be imported (imported on first use only);
    ``required``: raise instead of returning None."""
    global _triton_module
    if _triton_module is None:
        try:
            from ampdoctor.nn import rope_triton
        except ImportError:
            _triton_module = False
        else:
            _triton_module = rope_triton
    if required and not _triton_module:
        raise RuntimeError("ampdoctor: the triton rotary backend needs the triton package (pip install triton)")
    return _triton_module or None


def use_triton(x: torch.Tensor, backend: str) -> bool:
    """The Triton kernel: asked for by name, or ``auto`` on a CUDA tensor of a dtype it handles, triton importable,
    and not inside an outer torch.compile (which fuses the functional form with its neighbours instead)."""
    if backend == "triton":
        return True
    return (backend == "auto" and x.is_cuda and x.dtype in (torch.float16, torch.bfloat16, torch.float32)
            and not torch.compiler.is_compiling() and triton_rotary() is not None)


def _run(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, interleaved: bool, conjugate: bool,
         backend: str) -> torch.Tensor:
    if torch.compiler.is_compiling():
        # Inside an outer torch.compile: traced and fused with its neighbours.
        return rotate_functional(x, cos, sin, interleaved, conjugate)
    # "triton" reaches here only for shapes the kernel does not take: it then behaves as "auto".
    if backend == "eager" or (backend in ("auto", "triton") and x.numel() < COMPILE_MIN_NUMEL):
        return rotate(x, cos, sin, interleaved, conjugate)
    return compiled_rotate(x, cos, sin, interleaved, conjugate, strict=backend == "compile")


class _Rotary(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, cos, sin, interleaved, conjugate, backend):  # type: ignore[override]
        ctx.save_for_backward(cos, sin)
        ctx.config = (interleaved, conjugate, backend)
        # An ambient autocast must not decide the dtype of this math (it is fp32 by design).
        with torch.autocast(x.device.type, enabled=False):
            return _run(x, cos, sin, interleaved, conjugate, backend)

    @staticmethod
    def backward(ctx, grad):  # type: ignore[override]
        cos, sin = ctx.saved_tensors
        interleaved, conjugate, backend = ctx.config
        # The adjoint of a rotation is the opposite rotation; going through apply again keeps it differentiable.
        return _Rotary.apply(grad, cos, sin, interleaved, not conjugate, backend), None, None, None, None, None


def check_layout(layout: str) -> bool:
    """Validate a layout name; True for interleaved."""
    if layout not in LAYOUTS:
        raise ValueError(f"unknown rotary layout {layout!r}: expected 'half' (NeoX/HF rotate_half) or 'interleaved' (GPT-J/Meta)")
    return layout == "interleaved"


def _triton_tables(x: torch.Tensor, cos: torch.Tensor) -> bool:
    """Tables the kernel reads as they are: 4-D x with cos ``[seq, r/2]`` or ``[batch or 1, 1, seq, r/2]``."""
    seq = x.shape[-2]
    if x.dim() != 4 or cos.dim() not in (2, 4) or cos.shape[-2] != seq:
        return False
    return cos.dim() == 2 or (cos.shape[1] == 1 and cos.shape[0] in (1, x.shape[0]))


def _apply_triton(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, layout: str) -> torch.Tensor:
    """`apply_rotary` through the Triton kernel: the given rows are the table, each token reads its own row."""
    if x.dtype not in (torch.float16, torch.bfloat16, torch.float32):
        raise TypeError(f"apply_rotary: the triton backend takes fp16/bf16/fp32 x, got {x.dtype}")
    kernel = triton_rotary(required=True)
    if cos.dim() == 4:
        cos, sin = cos[:, 0], sin[:, 0]
    cos, sin = cos.float().contiguous(), sin.float().contiguous()
    out, _ = kernel.rotary_qk(x, x[:, :0], cos, sin, layout=layout)
    return out


def _check_tensors(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> None:
    for name, t in (("x", x), ("cos", cos), ("sin", sin)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"apply_rotary: {name} must be a torch.Tensor, got {type(t).__name__}")
        if not t.is_floating_point():
            raise TypeError(f"apply_rotary: {name} must be a floating tensor, got {t.dtype}")
    if cos.shape != sin.shape:
        raise ValueError(f"apply_rotary: cos and sin shapes differ: {tuple(cos.shape)} vs {tuple(sin.shape)}")
    if x.dim() < 2 or cos.dim() < 1:
        raise ValueError(f"apply_rotary: x must be [..., seq, head_dim], got shape {tuple(x.shape)}")


def _checked_tables(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """cos/sin validated against x and shaped to broadcast against it (a [batch, seq, r/2] table gains the heads axis)."""
    _check_tensors(x, cos, sin)
    rotary_dim = 2 * cos.shape[-1]
    if rotary_dim == 0 or rotary_dim > x.shape[-1]:
        raise ValueError(
            f"apply_rotary: cos/sin cover rotary_dim = 2 * {cos.shape[-1]} = {rotary_dim} channels, "
            f"but x has head_dim {x.shape[-1]}"
        )
    if cos.dim() == 3 and x.dim() == 4:
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
    target = (*x.shape[:-1], rotary_dim // 2)
    try:
        fits = torch.broadcast_shapes(cos.shape, target) == target
    except RuntimeError:
        fits = False
    if not fits:
        raise ValueError(f"apply_rotary: cos/sin of shape {tuple(cos.shape)} do not broadcast to x[..., :rotary_dim // 2] of shape {target}")
    if cos.dtype not in (torch.float32, torch.float64) or sin.dtype != cos.dtype:
        # A half-precision table has already lost the angle (incident 2, modded-nanogpt #39): refuse it.
        raise TypeError(
            f"apply_rotary: cos/sin must be fp32 (or fp64) tables, got {cos.dtype}/{sin.dtype}; "
            "build them with RotaryEmbedding.cos_sin or keep them fp32"
        )
    return cos, sin


def apply_rotary(
    x: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    layout: Layout = "half",
    *,
    backend: Backend = "auto",
) -> torch.Tensor:
    """Rotate ``x`` (``[..., seq, head_dim]``, any float dtype) by ``cos``/``sin`` of shape ``[..., seq, rotary_dim // 2]``.

    The tables are what `RotaryEmbedding.cos_sin` returns: ``[seq, r/2]`` or ``[batch, seq, r/2]`` (for 4-D
    ``x = [batch, heads, seq, head_dim]`` the heads axis is broadcast), or any shape that broadcasts against
    ``x[..., :r/2]``. ``rotary_dim = 2 * cos.shape[-1]`` channels are rotated, the rest pass through. Math runs
    in fp32 (fp64 for fp64 x); the result has x's dtype, also under autocast, and so does x's gradient.
    """
    interleaved = check_layout(layout)
    if backend not in BACKENDS:
        raise ValueError(f"unknown rotary backend {backend!r}: expected one of {', '.join(BACKENDS)}")
    cos, sin = _checked_tables(x, cos, sin)
    # fp32 math for every input dtype except fp64, which keeps fp64 (gradcheck, references).
    compute = torch.float64 if x.dtype == torch.float64 else torch.float32
    cos, sin = cos.to(compute), sin.to(compute)
    if use_triton(x, backend) and _triton_tables(x, cos) and not (cos.requires_grad or sin.requires_grad):
        return _apply_triton(x, cos, sin, layout)
    if cos.requires_grad or sin.requires_grad:
        # Learned tables need their own gradient: plain autograd through the functional form.
        return rotate_functional(x, cos, sin, interleaved, False)
    return _Rotary.apply(x, cos, sin, interleaved, False, backend)
