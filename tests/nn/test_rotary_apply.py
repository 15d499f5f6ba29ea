"""apply_rotary / RotaryEmbedding.forward: fp32 math, input dtype out, exact relative positions."""

import warnings

import pytest
import torch

from ampdoctor.nn import RotaryEmbedding, apply_rotary, rotary_math


def complex_reference(x: torch.Tensor, positions: torch.Tensor, inv_freq: torch.Tensor, layout: str, rotary_dim: int) -> torch.Tensor:
    """Rotation as a complex multiply in float64, the textbook definition of RoPE."""
    x = x.double()
    rot, rest = x[..., :rotary_dim], x[..., rotary_dim:]
    half = rotary_dim // 2
    if layout == "interleaved":
        z = torch.complex(rot[..., 0::2], rot[..., 1::2])
    else:
        z = torch.complex(rot[..., :half], rot[..., half:])
    z = z * torch.polar(torch.ones(()).double(), positions.double()[:, None] * inv_freq[None, :])
    out = torch.stack((z.real, z.imag), -1).flatten(-2) if layout == "interleaved" else torch.cat((z.real, z.imag), -1)
    return torch.cat((out, rest), -1)


@pytest.mark.parametrize("layout", ["half", "interleaved"])
@pytest.mark.parametrize("rotary_dim", [32, 20])
def test_rotation_matches_complex_reference(layout, rotary_dim):
    rope = RotaryEmbedding(32, rotary_dim=rotary_dim, layout=layout, backend="eager")
    q, k = torch.randn(2, 3, 7, 32, dtype=torch.float64), torch.randn(2, 1, 7, 32, dtype=torch.float64)
    positions = torch.tensor([0, 1, 2, 100, 5000, 9, 77])
    q_out, k_out = rope(q, k, positions)
    assert torch.allclose(q_out, complex_reference(q, positions, rope.inv_freq, layout, rotary_dim), atol=1e-6)
    assert torch.allclose(k_out, complex_reference(k, positions, rope.inv_freq, layout, rotary_dim), atol=1e-6)


def test_partial_rotary_passes_the_rest_through_bit_for_bit():
    rope = RotaryEmbedding(64, rotary_dim=16, backend="eager")
    q = torch.randn(1, 2, 5, 64, dtype=torch.bfloat16)
    q_out, _ = rope(q, q)
    assert torch.equal(q_out[..., 16:], q[..., 16:])
    assert not torch.equal(q_out[..., :16], q[..., :16])


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_output_and_gradient_keep_the_input_dtype(dtype):
    rope = RotaryEmbedding(16, backend="eager")
    q = torch.randn(1, 2, 4, 16, dtype=dtype, requires_grad=True)
    k = torch.randn(1, 2, 4, 16, dtype=dtype, requires_grad=True)
    q_out, k_out = rope(q, k)
    assert q_out.dtype == k_out.dtype == dtype
    (q_out.float().sum() + k_out.float().square().sum()).backward()
    assert q.grad.dtype == k.grad.dtype == dtype


def test_output_keeps_bf16_under_autocast_with_fp32_tables():
    rope = RotaryEmbedding(16)
    q = torch.randn(1, 2, 4, 16, dtype=torch.bfloat16)
    cos, sin = rope.cos_sin(torch.arange(4))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = apply_rotary(q, cos, sin)
        q_out, _ = rope(q, q)
    assert cos.dtype == torch.float32
    assert out.dtype == q_out.dtype == torch.bfloat16


def test_bf16_output_is_the_rounded_fp32_result():
    # REC in ROPE.md: fp32 math, one rounding at the end; bf16-table/bf16-math (E2E-BF) rounds several times.
    rope = RotaryEmbedding(128, base=500000.0, backend="eager")
    q = torch.randn(2, 4, 64, 128, dtype=torch.bfloat16)
    positions = torch.randint(0, 4096, (64,))
    exact, _ = rope(q.float(), q.float(), positions)
    q_out, _ = rope(q, q, positions)
    assert torch.equal(q_out, exact.to(torch.bfloat16))


def test_gradients_are_the_adjoint_rotation_in_fp64():
    rope = RotaryEmbedding(12, rotary_dim=8, layout="interleaved", backend="eager")
    cos, sin = rope.cos_sin(torch.tensor([[3, 900, 17]]))
    x = torch.randn(1, 2, 3, 12, dtype=torch.float64, requires_grad=True)
    fn = lambda t: apply_rotary(t, cos, sin, "interleaved")  # noqa: E731
    assert torch.autograd.gradcheck(fn, (x,))
    assert torch.autograd.gradgradcheck(fn, (x,))


def test_bf16_relative_position_violation_at_most_1_5e3_up_to_120k():
    torch.manual_seed(0)
    rope = RotaryEmbedding(128, base=500000.0, max_position=131072)
    pairs = 512
    q = torch.nn.functional.normalize(torch.randn(pairs, 128, dtype=torch.float64), dim=-1).to(torch.bfloat16)
    k = torch.nn.functional.normalize(torch.randn(pairs, 128, dtype=torch.float64), dim=-1).to(torch.bfloat16)
    m = torch.randint(0, 4000, (pairs,))
    n = m - torch.randint(0, 4000, (pairs,)).clamp(max=m)

    def logits(shift: int) -> torch.Tensor:
        cos_m, sin_m = rope.cos_sin(m + shift)
        cos_n, sin_n = rope.cos_sin(n + shift)
        q_rot = apply_rotary(q[None, None], cos_m[None], sin_m[None])[0, 0]
        k_rot = apply_rotary(k[None, None], cos_n[None], sin_n[None])[0, 0]
        return (q_rot.double() * k_rot.double()).sum(-1)

    base = logits(0)
    worst = max((logits(d) - base).abs().max().item() for d in (1, 17, 1000, 16000, 64000, 116000))
    assert worst <= 1.5e-3


def test_half_precision_tables_are_rejected():
    x = torch.randn(1, 1, 4, 8)
    table = torch.ones(4, 4, dtype=torch.bfloat16)
    with pytest.raises(TypeError, match="cos/sin must be fp32 \\(or fp64\\) tables, got torch.bfloat16"):
        apply_rotary(x, table, table)


@pytest.mark.parametrize(
    ("x_shape", "table_shape", "message"),
    [
        ((1, 1, 4, 8), (4, 5), "rotary_dim = 2 \\* 5 = 10 channels, but x has head_dim 8"),
        ((1, 1, 4, 8), (3, 4), "do not broadcast"),
        ((2, 1, 4, 8), (3, 4, 4), "do not broadcast"),
    ],
)
def test_mismatched_shapes_are_rejected(x_shape, table_shape, message):
    with pytest.raises(ValueError, match=message):
        apply_rotary(torch.randn(x_shape), torch.ones(table_shape), torch.ones(table_shape))


def test_forward_rejects_wrong_q_shape_and_position_shape():
    rope = RotaryEmbedding(8)
    with pytest.raises(ValueError, match="q must be \\[batch, heads, seq, 8\\], got \\(1, 4, 8\\)"):
        rope(torch.randn(1, 4, 8), torch.randn(1, 1, 4, 8))
    with pytest.raises(ValueError, match="position_ids must be \\[seq\\] or \\[batch, seq\\] with seq=4"):
        rope(torch.randn(1, 1, 4, 8), torch.randn(1, 1, 4, 8), torch.arange(5))


def test_compiled_kernel_matches_eager():
    x = torch.randn(2, 4, 32, 64, dtype=torch.bfloat16)
    cos, sin = RotaryEmbedding(64).cos_sin(torch.arange(32))
    compiled = apply_rotary(x, cos, sin, backend="compile")
    eager = apply_rotary(x, cos, sin, backend="eager")
    assert compiled.dtype == torch.bfloat16
    assert (compiled.float() - eager.float()).abs().max().item() <= 2 ** -7  # at most one bf16 ulp apart


def test_compile_failure_falls_back_to_eager_with_a_warning(monkeypatch):
    def broken_compile(*args, **kwargs):
        raise RuntimeError("no C++ compiler")

    monkeypatch.setattr(torch, "compile", broken_compile)
    monkeypatch.setattr(rotary_math, "compiled_rotate", rotary_math._CompiledRotate())
    monkeypatch.setattr(rotary_math, "COMPILE_MIN_NUMEL", 0)
    x = torch.randn(1, 2, 4, 8, dtype=torch.bfloat16)
    cos, sin = RotaryEmbedding(8).cos_sin(torch.arange(4))
    with pytest.warns(RuntimeWarning, match="torch.compile of the rotary kernel failed \\(RuntimeError: no C\\+\\+ compiler\\)"):
        out = apply_rotary(x, cos, sin)
    assert torch.equal(out, apply_rotary(x, cos, sin, backend="eager"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # warned once; later calls go straight to eager
        apply_rotary(x, cos, sin)
    with pytest.raises(RuntimeError, match="no C\\+\\+ compiler"):
        apply_rotary(x, cos, sin, backend="compile")


def test_tables_that_require_grad_get_gradients():
    x = torch.randn(1, 1, 3, 8, dtype=torch.float64)
    cos, sin = RotaryEmbedding(8).cos_sin(torch.arange(3))
    cos, sin = cos.double().requires_grad_(), sin.double().requires_grad_()
    assert torch.autograd.gradcheck(lambda c, s: apply_rotary(x, c, s, "interleaved"), (cos, sin))


def test_inside_an_outer_compile_the_functional_form_is_traced(monkeypatch):
    x = torch.randn(1, 2, 4, 12, dtype=torch.bfloat16)
    cos, sin = RotaryEmbedding(12, rotary_dim=8).cos_sin(torch.arange(4))
    eager = apply_rotary(x, cos, sin, "interleaved", backend="eager")
    monkeypatch.setattr(torch.compiler, "is_compiling", lambda: True)
    monkeypatch.setattr(rotary_math, "rotate", None)  # the out= form cannot be traced with dynamic shapes
    traced = apply_rotary(x, cos, sin, "interleaved", backend="eager")
    assert torch.equal(traced[..., 8:], x[..., 8:])
    assert (traced.float() - eager.float()).abs().max() <= 2**-6
