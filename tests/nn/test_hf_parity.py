"""RotaryEmbedding reproduces transformers' Llama RoPE (default, linear, llama3, yarn, dynamic, longrope)."""

import pytest
import torch
from transformers import LlamaConfig
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding, apply_rotary_pos_emb

from ampdoctor.nn import RotaryEmbedding

SCALINGS = {
    "default": {"rope_type": "default", "rope_theta": 500000.0},
    "linear": {"rope_type": "linear", "rope_theta": 10000.0, "factor": 4.0},
    "llama3": {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
               "high_freq_factor": 4.0, "original_max_position_embeddings": 1024},
    "yarn": {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 2.0, "original_max_position_embeddings": 1024},
    "dynamic": {"rope_type": "dynamic", "rope_theta": 10000.0, "factor": 2.0},
    "longrope": {"rope_type": "longrope", "rope_theta": 10000.0, "original_max_position_embeddings": 1024,
                 "short_factor": [1.0 + 0.02 * i for i in range(32)], "long_factor": [1.0 + 0.2 * i for i in range(32)]},
}


def hf_and_ours(name):
    config = LlamaConfig(hidden_size=256, num_attention_heads=4, head_dim=64, max_position_embeddings=2048,
                         rope_parameters=dict(SCALINGS[name]))
    return LlamaRotaryEmbedding(config), RotaryEmbedding.from_hf_config(config, backend="eager")


@pytest.mark.parametrize("name", list(SCALINGS))
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_matches_hf_llama_rotary_below_4096(name, dtype):
    torch.manual_seed(0)
    hf, ours = hf_and_ours(name)
    # Up to 4095 also crosses the original length, where dynamic and longrope switch frequencies.
    for high in (1000, 4096):
        positions = torch.sort(torch.randint(0, high, (2, 48))).values
        q, k = torch.randn(2, 4, 48, 64, dtype=dtype), torch.randn(2, 2, 48, 64, dtype=dtype)
        cos, sin = hf(q, positions)
        hf_q, hf_k = apply_rotary_pos_emb(q, k, cos, sin)
        our_q, our_k = ours(q, k, positions)
        assert our_q.dtype == our_k.dtype == dtype
        # bf16: HF rounds cos/sin and every product to bf16, and one bf16 ulp at |x| ~ 4 is 1.6e-2.
        tolerance = 5e-3 if dtype == torch.float32 else 4e-2
        assert (our_q.float() - hf_q.float()).abs().max().item() <= tolerance
        assert (our_k.float() - hf_k.float()).abs().max().item() <= tolerance
    assert ours.attention_scaling == pytest.approx(hf.attention_scaling, rel=1e-12)


@pytest.mark.parametrize("name", ["default", "linear", "llama3", "yarn"])
def test_frequencies_match_hf_inv_freq_to_fp32_rounding(name):
    hf, ours = hf_and_ours(name)
    assert torch.allclose(ours.inv_freq, hf.inv_freq.double(), rtol=1e-6, atol=0)
