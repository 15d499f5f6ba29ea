"""ampdoctor.fix.rope: finds rotary tables of the common shapes, makes them exact fp32 and cast-immune."""

import copy
import io

import pytest
import torch
from torch import nn
from transformers import LlamaConfig, LlamaForCausalLM

from ampdoctor import fix
from ampdoctor.nn.rope_scaling import Frequencies
from ampdoctor.nn.rotary import build_tables


def tiny_llama(rope_parameters=None):
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                         num_key_value_heads=2, head_dim=16, max_position_embeddings=4096, initializer_range=0.5,
                         rope_parameters=rope_parameters or {"rope_type": "default", "rope_theta": 500000.0})
    # Large init so attention is sharp and depends visibly on position (the default 0.02 makes it uniform).
    return LlamaForCausalLM(config).eval()


def logits(model, start=0):
    ids = torch.randint(0, 128, (1, 32), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        return model(input_ids=ids, position_ids=torch.arange(start, start + 32)[None]).logits


def test_llama_with_bf16_inv_freq_matches_the_fp32_model_after_the_fix():
    reference = tiny_llama()
    broken = copy.deepcopy(reference)
    rotary = broken.model.rotary_emb
    rotary.inv_freq = rotary.inv_freq.to(torch.bfloat16)  # what model.to(bf16) / DeepSpeed do to the buffer
    rotary.original_inv_freq = rotary.original_inv_freq.to(torch.bfloat16)
    expected = logits(reference)
    assert (logits(broken) - expected).abs().max() > 0.1

    fixes = fix.rope(broken)

    # Not bitwise: HF's fp32 inv_freq is itself up to 1 ulp from the exactly rounded value the fix stores.
    assert (logits(broken) - expected).abs().max() <= 1e-4
    assert [(f.module, f.kind, f.tensors, f.dtypes_before) for f in fixes] == [
        ("model.rotary_emb", "hf-inv-freq", ("inv_freq", "original_inv_freq"), (torch.bfloat16, torch.bfloat16))
    ]
    assert fixes[0].was_wrong and fixes[0].max_error > 1e-4
    found = fixes[0].to_finding()
    assert (found.name, found.location.module) == ("rope-cache-low-precision", "model.rotary_emb")


def test_fixed_llama_tables_survive_model_to_bf16_and_load_state_dict():
    model = tiny_llama({"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
                        "high_freq_factor": 4.0, "original_max_position_embeddings": 1024})
    exact = model.model.rotary_emb.inv_freq.clone()
    fix.rope(model)
    model.to(torch.bfloat16)
    rotary = model.model.rotary_emb
    assert model.lm_head.weight.dtype == torch.bfloat16
    assert rotary.inv_freq.dtype == rotary.original_inv_freq.dtype == torch.float32
    assert torch.allclose(rotary.inv_freq, exact, rtol=1e-6, atol=0)
    clone = copy.deepcopy(model).half()
    assert clone.model.rotary_emb.inv_freq.dtype == torch.float32


def test_fp32_llama_is_only_hardened():
    fixes = fix.rope(tiny_llama())
    assert len(fixes) == 1
    assert not fixes[0].was_wrong
    assert fixes[0].max_error < 1e-7


class NeoXRotary(nn.Module):
    """GPT-NeoX's shape: inv_freq buffer, plain-attribute cos/sin caches [seq, 1, 1, dim] cast to the model dtype."""

    def __init__(self, dim, max_seq_len, base=10000, precision=torch.half):
        super().__init__()
        self.dim, self.base = dim, base
        inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim))
        self.register_buffer("inv_freq", inv_freq.to(precision), persistent=False)
        t = torch.arange(max_seq_len).type_as(inv_freq)
        emb = torch.cat((torch.outer(t, inv_freq),) * 2, dim=-1)
        self.cos_cached = emb.cos()[:, None, None, :].to(precision)
        self.sin_cached = emb.sin()[:, None, None, :].to(precision)


def exact_tables(dim, base, length):
    inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim))
    return build_tables(Frequencies(inv_freq, 1.0), length)


def test_neox_style_fp16_caches_become_exact_fp32_and_stay_so_after_half():
    model = nn.Sequential(nn.Linear(4, 4), NeoXRotary(32, 2048))
    fixes = fix.rope(model)
    rotary = model[1]
    cos, sin = exact_tables(32, 10000.0, 2048)
    assert rotary.cos_cached.shape == (2048, 1, 1, 32) and rotary.cos_cached.dtype == torch.float32
    assert torch.equal(rotary.cos_cached[:, 0, 0], torch.cat((cos, cos), -1))
    assert torch.equal(rotary.sin_cached[:, 0, 0], torch.cat((sin, sin), -1))
    assert fixes[0].tensors == ("inv_freq", "cos_cached", "sin_cached")
    assert fixes[0].dtypes_before == (torch.float16,) * 3
    assert fixes[0].max_error > 1e-4  # fp16 storage rounding
    model.half()
    assert model[0].weight.dtype == torch.float16
    assert rotary.cos_cached.dtype == torch.float32
    assert torch.equal(rotary.cos_cached[:, 0, 0], torch.cat((cos, cos), -1))


class InterleavedBuffers(nn.Module):
    """Persistent cos/sin buffers [1, seq, dim] in interleaved order, built in fp32 from base/rotary_dim."""

    def __init__(self, rotary_dim, length, base=10000.0):
        super().__init__()
        self.rotary_dim, self.theta = rotary_dim, base
        inv_freq = 1.0 / (base ** (torch.arange(0, rotary_dim, 2).float() / rotary_dim))
        angles = torch.outer(torch.arange(length).float(), inv_freq).repeat_interleave(2, -1)
        self.register_buffer("cos", angles.cos()[None])
        self.register_buffer("sin", angles.sin()[None])


def test_plain_interleaved_buffers_are_rebuilt_and_a_rounded_checkpoint_cannot_overwrite_them():
    module = InterleavedBuffers(16, 8192)
    checkpoint = {k: v.to(torch.bfloat16).float() for k, v in module.state_dict().items()}
    fixes = fix.rope(module)
    cos, _ = exact_tables(16, 10000.0, 8192)
    assert torch.equal(module.cos[0], cos.repeat_interleave(2, -1))
    assert fixes[0].kind == "cos-sin-cache" and fixes[0].max_error > 1e-4  # the fp32 build's long-position error
    buffer = io.BytesIO()
    torch.save(checkpoint, buffer)
    module.load_state_dict(torch.load(io.BytesIO(buffer.getvalue())))
    assert set(module.state_dict()) == {"cos", "sin"}  # checkpoint keys unchanged
    assert torch.equal(module.cos[0], cos.repeat_interleave(2, -1))


def test_low_precision_inv_freq_without_a_recipe_is_refused():
    module = nn.Module()
    module.register_buffer("inv_freq", torch.rand(8).to(torch.bfloat16))
    with pytest.raises(ValueError, match="rotary module <root> \\(Module\\) has low-precision tables but no way to recompute them"):
        fix.rope(module)


def test_tables_that_disagree_with_their_own_attributes_are_left_alone():
    module = NeoXRotary(32, 64, base=500000, precision=torch.float32)
    module.base = 10000
    with pytest.raises(ValueError, match="inv_freq does not match the RoPE its attributes/config describe"):
        fix.rope(module)
    assert module.inv_freq.dtype == torch.float32 and "_apply" not in module.__dict__


def test_non_module_is_a_type_error():
    with pytest.raises(TypeError, match="fix.rope expects a torch.nn.Module, got dict"):
        fix.rope({})
