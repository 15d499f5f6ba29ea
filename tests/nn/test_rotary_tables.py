"""RotaryEmbedding tables: exact against float64, cast-immune, out of state_dict, grown on demand."""

import copy

import numpy as np
import pytest
import torch

from ampdoctor.nn import RotaryEmbedding


def reference_cos_sin(positions: np.ndarray, head_dim: int, base: float) -> tuple[np.ndarray, np.ndarray]:
    inv_freq = base ** (-np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    angles = np.multiply.outer(positions.astype(np.float64), inv_freq)
    return np.cos(angles), np.sin(angles)


def test_cos_sin_within_1e7_of_float64_for_every_position_to_131072():
    rope = RotaryEmbedding(128, base=500000.0, max_position=131072)
    positions = torch.arange(131072)
    cos, sin = rope.cos_sin(positions)
    ref_cos, ref_sin = reference_cos_sin(positions.numpy(), 128, 500000.0)
    assert cos.dtype == sin.dtype == torch.float32
    assert cos.shape == (131072, 64)
    assert np.abs(cos.double().numpy() - ref_cos).max() <= 1e-7
    assert np.abs(sin.double().numpy() - ref_sin).max() <= 1e-7
    # The same check fails for the usual fp32 build (HF): its angle error grows with position.
    fp32_angles = positions[-4096:, None].float() * torch.from_numpy(500000.0 ** (-np.arange(0, 128, 2) / 128)).float()
    assert np.abs(fp32_angles.cos().double().numpy() - ref_cos[-4096:]).max() > 1e-4


def test_cos_sin_shape_follows_position_ids():
    rope = RotaryEmbedding(64, rotary_dim=32)
    cos, sin = rope.cos_sin(torch.tensor([[0, 5, 9], [1, 2, 3]]))
    assert cos.shape == sin.shape == (2, 3, 16)
    ref_cos, _ = reference_cos_sin(np.array([5]), 32, 10000.0)
    assert np.abs(cos[0, 1].double().numpy() - ref_cos[0]).max() <= 1e-7


def test_table_grows_past_max_position_and_stays_exact():
    rope = RotaryEmbedding(128, base=500000.0, max_position=16)
    positions = torch.tensor([3, 15, 16, 70001, 123456])
    cos, sin = rope.cos_sin(positions)
    ref_cos, ref_sin = reference_cos_sin(positions.numpy(), 128, 500000.0)
    assert np.abs(cos.double().numpy() - ref_cos).max() <= 1e-7
    assert np.abs(sin.double().numpy() - ref_sin).max() <= 1e-7
    assert rope._tables.length == 131072  # next power of two, so growth rebuilds O(log n) times


@pytest.mark.parametrize("cast", [lambda m: m.to(torch.bfloat16), lambda m: m.half(), lambda m: m.double(),
                                  lambda m: m.to("cpu", torch.float16)])
def test_module_casts_leave_tables_fp32_and_unchanged(cast):
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), RotaryEmbedding(32))
    before = model[1].cos_sin(torch.arange(4096))
    cast(model)
    after = model[1].cos_sin(torch.arange(4096))
    assert model[0].weight.dtype != torch.float32  # the cast did reach the rest of the model
    assert after[0].dtype == after[1].dtype == torch.float32
    assert torch.equal(before[0], after[0]) and torch.equal(before[1], after[1])


def test_tables_and_frequencies_stay_out_of_state_dict():
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), RotaryEmbedding(32))
    assert set(model.state_dict()) == {"0.weight", "0.bias"}
    assert list(model[1].buffers()) == []


def test_inv_freq_is_float64():
    rope = RotaryEmbedding(8, base=10000.0)
    assert rope.inv_freq.dtype == torch.float64
    assert rope.inv_freq.tolist() == pytest.approx([1.0, 0.1, 0.01, 0.001], rel=1e-15)


def test_deepcopy_keeps_exact_tables():
    rope = RotaryEmbedding(16, base=500000.0)
    clone = copy.deepcopy(rope).bfloat16()
    assert torch.equal(clone.cos_sin(torch.arange(64))[0], rope.cos_sin(torch.arange(64))[0])


def test_meta_move_then_to_empty_rebuilds_tables():
    rope = RotaryEmbedding(16).to("meta")
    assert rope.cos_sin(torch.arange(3))[0].device.type == "meta"
    rope.to_empty(device="cpu")
    cos, _ = rope.cos_sin(torch.tensor([2]))
    assert cos.device.type == "cpu"
    assert cos[0, 0].item() == pytest.approx(np.cos(2.0), abs=1e-7)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_float_position_ids_are_rejected(dtype):
    rope = RotaryEmbedding(16)
    with pytest.raises(TypeError, match="position_ids must be an integer tensor"):
        rope.cos_sin(torch.arange(4, dtype=dtype))


def test_negative_position_ids_are_rejected():
    with pytest.raises(ValueError, match="position_ids must be >= 0, got minimum -1"):
        RotaryEmbedding(16).cos_sin(torch.tensor([0, -1]))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"head_dim": 16, "rotary_dim": 7}, "rotary_dim must be even"),
        ({"head_dim": 16, "rotary_dim": 18}, "rotary_dim must be even and <= head_dim"),
        ({"head_dim": 0}, "head_dim must be a positive int"),
        ({"head_dim": 16, "base": 1.0}, "base must be a number > 1"),
        ({"head_dim": 16, "layout": "neox"}, "unknown rotary layout 'neox'"),
        ({"head_dim": 16, "backend": "fused"}, "unknown backend 'fused'"),
        ({"head_dim": 16, "max_position": 1.5}, "max_position must be a positive int"),
        ({"head_dim": 16, "scaling": {"rope_type": "ntk-by-parts"}}, "unknown RoPE scaling 'ntk-by-parts'"),
        ({"head_dim": 16, "scaling": {"rope_type": "linear"}}, "'linear' needs factor"),
        ({"head_dim": 16, "scaling": {"rope_type": "linear", "factor": 0.5}}, "factor must be a number >= 1"),
        ({"head_dim": 16, "scaling": {"rope_type": "linear", "factor": 2.0, "beta_fast": 4}}, "does not take beta_fast"),
        ({"head_dim": 16, "scaling": {"rope_type": "longrope", "short_factor": [1.0], "long_factor": [1.0] * 8}},
         "short_factor has 1 entries, expected rotary_dim // 2 = 8"),
        ({"head_dim": 16, "scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 4.0,
                                      "high_freq_factor": 1.0, "original_max_position_embeddings": 8192}},
         "low_freq_factor \\(4.0\\) must be below high_freq_factor"),
        ({"head_dim": 16, "scaling": {"rope_type": "default", "rope_theta": 500000.0}}, "disagrees with base=10000.0"),
    ],
)
def test_bad_construction_arguments_raise_with_the_reason(kwargs, message):
    with pytest.raises((ValueError, TypeError), match=message):
        RotaryEmbedding(**kwargs)
