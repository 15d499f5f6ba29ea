"""The Triton rotary kernel against a float64 rotation: natively on a GPU, under Triton's interpreter on CPU.

On a CPU-only machine the module fixture imports `ampdoctor.nn.rope_triton` with ``TRITON_INTERPRET=1`` (triton
decides at decoration time) and puts the environment, ``sys.modules`` and ampdoctor's cached module back
afterwards, so no other test sees the interpreter. Sizes are small: the interpreter runs each program in NumPy.
"""

import importlib
import os
import sys

import pytest
import torch

from ampdoctor.nn import RotaryEmbedding, apply_rotary, rotary_math

pytest.importorskip("triton")

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
MODULE = "ampdoctor.nn.rope_triton"


@pytest.fixture(scope="module", autouse=True)
def kernel():
    if DEVICE == "cuda":
        yield importlib.import_module(MODULE)
        return
    saved_env, saved_module, saved_cache = os.environ.get("TRITON_INTERPRET"), sys.modules.pop(MODULE, None), rotary_math._triton_module
    package = sys.modules["ampdoctor.nn"]
    saved_attribute = package.__dict__.get("rope_triton")
    os.environ["TRITON_INTERPRET"] = "1"
    try:
        module = importlib.import_module(MODULE)
        rotary_math._triton_module = module
        yield module
    finally:
        if saved_env is None:
            os.environ.pop("TRITON_INTERPRET", None)
        else:
            os.environ["TRITON_INTERPRET"] = saved_env
        sys.modules.pop(MODULE, None)
        if saved_module is not None:
            sys.modules[MODULE] = saved_module
        if saved_attribute is None:
            package.__dict__.pop("rope_triton", None)
        else:
            package.rope_triton = saved_attribute
        rotary_math._triton_module = saved_cache


@pytest.fixture(autouse=True)
def seeded():
    # Data is drawn on the CPU and moved, so a GPU run checks the same numbers.
    torch.manual_seed(0)


def exact_rotation(x, positions, rope, conjugate=False):
    """float64 rotation of ``x`` [b, h, s, d] by angles ``positions [b or 1, s] * inv_freq`` (times the
    attention factor), computed from the float64 frequencies: no table involved."""
    x = x.double().cpu()
    r, half = rope.rotary_dim, rope.rotary_dim // 2
    angles = positions.double().cpu()[:, None, :, None] * rope.inv_freq.double()[None, None, None, :]
    cos, sin = angles.cos() * rope.attention_scaling, angles.sin() * rope.attention_scaling
    if conjugate:
        sin = -sin
    if rope.layout == "interleaved":
        x1, x2 = x[..., 0:r:2], x[..., 1:r:2]
    else:
        x1, x2 = x[..., :half], x[..., half:r]
    o1, o2 = x1 * cos - x2 * sin, x2 * cos + x1 * sin
    out = torch.stack((o1, o2), -1).flatten(-2) if rope.layout == "interleaved" else torch.cat((o1, o2), -1)
    return torch.cat((out, x[..., r:]), -1)


def assert_within_rounding_floor(out, exact):
    """The issue's bar: max |out - exact| <= max |round(exact) - exact| in out's dtype, same data."""
    floor = (exact.to(out.dtype).double() - exact).abs().max()
    error = (out.double().cpu() - exact).abs().max()
    assert error <= floor, f"max abs error {error:.3e} above the {out.dtype} rounding floor {floor:.3e}"


def tables(rope, device=DEVICE):
    return rope._tables.cos.to(device), rope._tables.sin.to(device)


@pytest.mark.parametrize("layout", ["half", "interleaved"])
@pytest.mark.parametrize("rotary_dim", [32, 20])
def test_gqa_rotation_is_the_bf16_rounding_of_the_exact_one_up_to_position_131072(kernel, layout, rotary_dim):
    rope = RotaryEmbedding(32, base=500000.0, max_position=131073, rotary_dim=rotary_dim, layout=layout)
    gen = torch.Generator().manual_seed(1)
    q = torch.randn(2, 4, 7, 32, generator=gen).to(DEVICE, torch.bfloat16)
    k = torch.randn(2, 2, 7, 32, generator=gen).to(DEVICE, torch.bfloat16)
    positions = torch.tensor([[0, 1, 255, 4097, 65537, 131071, 131072], [9, 3, 2, 1, 8, 100000, 77]])
    q_out, k_out = kernel.rotary_qk(q, k, *tables(rope), positions.to(DEVICE), layout=layout)
    assert q_out.dtype == k_out.dtype == torch.bfloat16
    assert_within_rounding_floor(q_out, exact_rotation(q, positions, rope))
    assert_within_rounding_floor(k_out, exact_rotation(k, positions, rope))
    assert torch.equal(q_out[..., rotary_dim:], q[..., rotary_dim:])


def test_fp16_rounds_once_and_fp32_keeps_fp32_accuracy(kernel):
    rope = RotaryEmbedding(16, base=10000.0)
    q = torch.randn(1, 3, 5, 16)
    positions = torch.tensor([[4095, 7, 1000, 0, 2048]])
    exact = exact_rotation(q, positions, rope)
    half_out, _ = kernel.rotary_qk(q.to(DEVICE, torch.float16), q[:, :1].to(DEVICE, torch.float16), *tables(rope),
                                   positions.to(DEVICE))
    assert half_out.dtype == torch.float16
    assert_within_rounding_floor(half_out, exact)
    # fp32 out: the fp32 table and fp32 products cost a few fp32 ulps (2^-24 ~ 6e-8 relative), no more.
    single_out, _ = kernel.rotary_qk(q.to(DEVICE), q[:, :1].to(DEVICE), *tables(rope), positions.to(DEVICE))
    assert single_out.dtype == torch.float32
    assert (single_out.double().cpu() - exact).abs().max() <= 8 * 2**-24 * exact.abs().max()


def test_bshd_and_strided_views_need_no_copy(kernel):
    # q and k sliced out of one fused [b, s, heads, d] projection: neither is contiguous.
    rope = RotaryEmbedding(16, layout="interleaved")
    qkv = torch.randn(2, 5, 6, 16).to(DEVICE, torch.bfloat16)
    q, k = qkv[:, :, :4], qkv[:, :, 4:]
    positions = torch.tensor([[3, 1, 4, 1, 5], [9, 2, 6, 5, 3]])
    q_out, k_out = kernel.rotary_qk(q, k, *tables(rope), positions.to(DEVICE), layout="interleaved", qk_format="bshd")
    assert not q.is_contiguous() and q_out.shape == q.shape
    assert_within_rounding_floor(q_out, exact_rotation(q.transpose(1, 2), positions, rope).transpose(1, 2))
    assert_within_rounding_floor(k_out, exact_rotation(k.transpose(1, 2), positions, rope).transpose(1, 2))
    # The same data as a [b, h, s, d] view (transposed strides) gives the same result.
    q_view, k_view = kernel.rotary_qk(q.transpose(1, 2), k.transpose(1, 2), *tables(rope), positions.to(DEVICE),
                                      layout="interleaved")
    assert torch.equal(q_view, q_out.transpose(1, 2)) and torch.equal(k_view, k_out.transpose(1, 2))


def test_in_place_writes_into_q_and_k_and_leaves_the_tail(kernel):
    rope = RotaryEmbedding(24, rotary_dim=16)
    q, k = torch.randn(1, 2, 6, 24).to(DEVICE, torch.bfloat16), torch.randn(1, 1, 6, 24).to(DEVICE, torch.bfloat16)
    expected_q, expected_k = kernel.rotary_qk(q, k, *tables(rope))
    q_in, k_in = q.clone(), k.clone()
    q_out, k_out = kernel.rotary_qk(q_in, k_in, *tables(rope), inplace=True)
    assert q_out.data_ptr() == q_in.data_ptr() and k_out.data_ptr() == k_in.data_ptr()
    assert torch.equal(q_in, expected_q) and torch.equal(k_in, expected_k)
    assert torch.equal(q_in[..., 16:], q[..., 16:])


def test_positions_default_to_the_token_index_and_may_be_shared_across_the_batch(kernel):
    rope = RotaryEmbedding(16)
    q = torch.randn(2, 2, 5, 16).to(DEVICE, torch.bfloat16)
    none, _ = kernel.rotary_qk(q, q, *tables(rope))
    shared, _ = kernel.rotary_qk(q, q, *tables(rope), torch.arange(5, dtype=torch.int32, device=DEVICE))
    per_row, _ = kernel.rotary_qk(q, q, *tables(rope), torch.arange(5, device=DEVICE).expand(2, 5))
    assert torch.equal(none, shared) and torch.equal(none, per_row)
    assert_within_rounding_floor(none, exact_rotation(q, torch.arange(5)[None], rope))


def test_a_position_outside_the_table_gives_nan_rows_without_a_host_check(kernel):
    rope = RotaryEmbedding(16, max_position=64)
    q = torch.randn(1, 2, 4, 16).to(DEVICE, torch.bfloat16)
    positions = torch.tensor([[3, 64, -1, 63]], device=DEVICE)
    q_out, _ = kernel.rotary_qk(q, q, *tables(rope), positions)
    assert q_out[:, :, [1, 2]].isnan().all()
    assert not q_out[:, :, [0, 3]].isnan().any()


def test_gradients_are_the_float64_conjugate_rotation(kernel):
    rope = RotaryEmbedding(12, rotary_dim=8, layout="interleaved")
    positions = torch.tensor([[3, 900, 17], [0, 4095, 2]])
    q = torch.randn(2, 3, 3, 12).to(DEVICE).requires_grad_()
    k = torch.randn(2, 1, 3, 12).to(DEVICE).requires_grad_()
    grad_q, grad_k = torch.randn_like(q), torch.randn_like(k)
    q_out, k_out = kernel.rotary_qk(q, k, *tables(rope), positions.to(DEVICE), layout="interleaved")
    torch.autograd.backward((q_out, k_out), (grad_q, grad_k))
    # gradcheck-style: the float64 reference's own autograd gradient, and the conjugate rotation, agree with ours.
    q64, k64 = q.detach().double().cpu().requires_grad_(), k.detach().double().cpu().requires_grad_()
    torch.autograd.backward((exact_rotation(q64, positions, rope), exact_rotation(k64, positions, rope)),
                            (grad_q.double().cpu(), grad_k.double().cpu()))
    assert torch.allclose(q.grad.double().cpu(), q64.grad, atol=1e-6, rtol=1e-6)
    assert torch.allclose(k.grad.double().cpu(), k64.grad, atol=1e-6, rtol=1e-6)
    assert torch.allclose(q64.grad, exact_rotation(grad_q, positions, rope, conjugate=True), atol=1e-12)


def test_bf16_gradients_keep_the_dtype_and_the_rounding_floor(kernel):
    rope = RotaryEmbedding(16)
    q = torch.randn(1, 2, 4, 16).to(DEVICE, torch.bfloat16).requires_grad_()
    grad = torch.randn(1, 2, 4, 16).to(DEVICE, torch.bfloat16)
    positions = torch.tensor([[5, 6, 7, 4000]])
    q_out, _ = kernel.rotary_qk(q, q[:, :1].detach(), *tables(rope), positions.to(DEVICE))
    q_out.backward(grad)
    assert q.grad.dtype == torch.bfloat16
    assert_within_rounding_floor(q.grad, exact_rotation(grad, positions, rope, conjugate=True))


def test_packed_sequences_count_positions_from_each_start(kernel):
    rope = RotaryEmbedding(16)
    lengths = [3, 5, 2]
    q = torch.randn(sum(lengths), 3, 16).to(DEVICE, torch.bfloat16)
    k = torch.randn(sum(lengths), 1, 16).to(DEVICE, torch.bfloat16)
    cu_seqlens = torch.tensor([0, 3, 8, 10], dtype=torch.int32, device=DEVICE)
    q_out, k_out = kernel.rotary_qk(q, k, *tables(rope), cu_seqlens=cu_seqlens, max_seqlen=5)
    positions = torch.cat([torch.arange(n) for n in lengths])
    as_bhsd = lambda t: t.transpose(0, 1)[None]  # noqa: E731
    assert_within_rounding_floor(as_bhsd(q_out), exact_rotation(as_bhsd(q), positions[None], rope))
    assert_within_rounding_floor(as_bhsd(k_out), exact_rotation(as_bhsd(k), positions[None], rope))
    # Explicit per-token positions override the offsets.
    shifted, _ = kernel.rotary_qk(q, k, *tables(rope), (positions + 100).to(DEVICE), cu_seqlens=cu_seqlens)
    assert_within_rounding_floor(as_bhsd(shifted), exact_rotation(as_bhsd(q), positions[None] + 100, rope))


SCALINGS = {
    "linear": {"rope_type": "linear", "factor": 4.0},
    "llama3": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
               "original_max_position_embeddings": 1024},
    "yarn": {"rope_type": "yarn", "factor": 2.0, "original_max_position_embeddings": 1024},
    "dynamic": {"rope_type": "dynamic", "factor": 2.0},
}


@pytest.mark.parametrize("name", list(SCALINGS))
def test_rotary_embedding_triton_backend_for_every_scaling(name):
    rope = RotaryEmbedding(16, max_position=2048, scaling=SCALINGS[name], backend="triton")
    eager = RotaryEmbedding(16, max_position=2048, scaling=SCALINGS[name], backend="eager")
    q, k = torch.randn(2, 2, 4, 16).to(DEVICE, torch.bfloat16), torch.randn(2, 1, 4, 16).to(DEVICE, torch.bfloat16)
    positions = torch.tensor([[0, 5, 1500, 2047], [3000, 2, 1, 0]])
    q_out, k_out = rope.to(DEVICE)(q, k, positions.to(DEVICE), max_position_id=3000)
    eager_q, _ = eager(q.cpu(), k.cpu(), positions)  # grows its table (and dynamic frequencies) to 3001 too
    assert torch.equal(rope.inv_freq, eager.inv_freq) and rope.attention_scaling == eager.attention_scaling
    assert_within_rounding_floor(q_out, exact_rotation(q, positions, rope))
    assert_within_rounding_floor(k_out, exact_rotation(k, positions, rope))
    assert_within_rounding_floor(eager_q, exact_rotation(q, positions, eager))


def test_apply_rotary_triton_backend_reads_per_token_rows():
    rope = RotaryEmbedding(16, rotary_dim=12)
    positions = torch.tensor([[7, 1, 4000], [2, 2, 9]])
    cos, sin = rope.cos_sin(positions)
    x = torch.randn(2, 3, 3, 16).to(DEVICE, torch.bfloat16)
    out = apply_rotary(x, cos.to(DEVICE), sin.to(DEVICE), backend="triton")
    assert out.dtype == torch.bfloat16
    assert_within_rounding_floor(out, exact_rotation(x, positions, rope))


def test_half_precision_tables_are_refused(kernel):
    rope = RotaryEmbedding(16)
    q = torch.randn(1, 1, 2, 16).to(DEVICE)
    cos, sin = tables(rope)
    with pytest.raises(TypeError, match="tables must be fp32"):
        kernel.rotary_qk(q, q, cos.bfloat16(), sin.bfloat16())


def test_auto_keeps_cpu_tensors_off_the_triton_path():
    assert not rotary_math.use_triton(torch.zeros(1, 1, 2, 4), "auto")
    assert rotary_math.use_triton(torch.zeros(1, 1, 2, 4), "triton")


def test_an_empty_batch_launches_nothing(kernel):
    rope = RotaryEmbedding(16)
    q = torch.randn(0, 2, 4, 16).to(DEVICE, torch.bfloat16)
    q_out, k_out = kernel.rotary_qk(q, q[:, :1], *tables(rope))
    assert q_out.shape == q.shape and k_out.shape == (0, 1, 4, 16)
