"""rope-cache-low-precision, low-precision-positions, rope-dtype-mismatch, tf32-rope-angles."""

from pylint_helpers import hits


def test_bf16_cos_sin_cache_incident_2():
    code = """
    import torch

    class Rotary(torch.nn.Module):
        def forward(self, x):
            t = torch.arange(x.shape[1], device=x.device).type_as(self.inv_freq)
            freqs = torch.outer(t, self.inv_freq)
            self.cos_cached = freqs.cos().bfloat16()
            self.sin_cached = freqs.sin().bfloat16()
            return self.cos_cached, self.sin_cached
    """
    rule = "rope-cache-low-precision"
    assert hits(code, rule) == [(rule, 7), (rule, 8)]


def test_rope_buffer_cast_through_known_half_dtype_variable():
    code = """
    import torch
    DTYPE = torch.bfloat16

    class RotaryEmbedding(torch.nn.Module):
        def __init__(self, dim):
            super().__init__()
            inv_freq = 1.0 / (10000 ** (torch.arange(0, dim, 2).float() / dim))
            self.register_buffer("inv_freq", inv_freq.to(DTYPE), persistent=False)
            emb = torch.cat((freqs, freqs), dim=-1)
            cos, sin = emb.cos().half(), emb.sin().to(dtype=DTYPE)
    """
    rule = "rope-cache-low-precision"
    assert hits(code, rule) == [(rule, 8), (rule, 10), (rule, 10)]


def test_rope_tables_cast_to_activation_dtype_or_fp32_are_fine():
    code = """
    import torch

    class LlamaRotaryEmbedding(torch.nn.Module):
        def forward(self, x, position_ids):
            with torch.autocast(device_type=x.device.type, enabled=False):
                freqs = (self.inv_freq[None, :, None].float() @ position_ids[:, None, :].float()).transpose(1, 2)
                emb = torch.cat((freqs, freqs), dim=-1)
                cos = emb.cos() * self.attention_scaling
                sin = emb.sin() * self.attention_scaling
            return cos.to(dtype=x.dtype), sin.to(dtype=x.dtype)

        def _set_cos_sin_cache(self, seq_len, device, dtype):
            self.register_buffer("cos_cached", self.emb.cos().to(dtype), persistent=False)
            self.cos_sim = torch.nn.functional.cosine_similarity(a, b).half()
            hidden = hidden_states.to(torch.bfloat16)
    """
    assert hits(code, "rope-cache-low-precision") == []


def test_half_positions_and_timesteps():
    code = """
    import torch
    dtype = torch.bfloat16
    pos = torch.arange(seq_len, dtype=torch.bfloat16)
    grid = torch.linspace(0, 4096, steps=4097, dtype=dtype)
    position_ids = position_ids.to(torch.float16)
    timesteps = timesteps.half()
    t = torch.arange(n, device=device).to(dtype)
    """
    rule = "low-precision-positions"
    assert hits(code, rule) == [(rule, 3), (rule, 4), (rule, 5), (rule, 6), (rule, 7)]


def test_exact_small_ranges_and_embeddings_are_not_positions():
    code = """
    import torch
    heads = torch.arange(8, dtype=torch.bfloat16)
    pos = torch.arange(seq_len, dtype=torch.long)
    position_embeddings = position_embeddings.to(torch.bfloat16)
    timesteps = timesteps.to(dtype=sample.dtype)
    """
    assert hits(code, "low-precision-positions") == []


def test_rotary_input_upcast_without_tables_incident_5():
    code = """
    import torch
    from flash_attn.layers.rotary import apply_rotary_emb

    def apply_rotary_pos_emb_vision(tensor, freqs):
        orig_dtype = tensor.dtype
        tensor_ = tensor.float()
        cos = freqs.cos()
        sin = freqs.sin()
        output = apply_rotary_emb(tensor_, cos, sin).type_as(tensor)
        return output

    def mixed(q, cos, sin):
        return apply_rotary_emb(q.float(), cos.bfloat16(), sin.bfloat16())
    """
    rule = "rope-dtype-mismatch"
    assert hits(code, rule) == [(rule, 9), (rule, 13)]


def test_rotary_tables_cast_like_the_input_are_fine():
    code = """
    import torch
    from flash_attn.layers.rotary import apply_rotary_emb

    def apply_rotary_pos_emb_vision(tensor, freqs):
        tensor_ = tensor.float()
        cos = freqs.cos().type_as(tensor_)
        sin = freqs.sin().type_as(tensor_)
        return apply_rotary_emb(tensor_, cos, sin).type_as(tensor)

    def flash(q, cos, sin):
        return apply_rotary_emb(q.float(), cos.float(), sin.float()).type_as(q)

    def plain(q, k, cos, sin):
        return apply_rotary_pos_emb(q, k, cos, sin)
    """
    assert hits(code, "rope-dtype-mismatch") == []


def test_tf32_with_matmul_rope_angles():
    code = """
    import torch
    torch.set_float32_matmul_precision("high")

    def rope(inv_freq, position_ids):
        freqs = (inv_freq[None, :, None].float() @ position_ids[:, None, :].float()).transpose(1, 2)
        outer = position_ids[:, :, None].float() * inv_freq[None, None, :]
        return freqs, outer
    """
    rule = "tf32-rope-angles"
    assert hits(code, rule) == [(rule, 5)]


def test_matmul_rope_angles_without_tf32_are_fine():
    code = """
    import torch
    torch.set_float32_matmul_precision("highest")

    def rope(inv_freq, position_ids):
        return inv_freq[None, :, None].float() @ position_ids[:, None, :].float()
    """
    assert hits(code, "tf32-rope-angles") == []


def test_an_identifier_names_rotary_in_snake_camel_and_the_papers_spelling():
    from ampdoctor.lint.python.resolve import names_rotary

    for name in ("RotaryEmbedding", "build_rope", "apply_rotary_pos_emb", "LlamaRoPE", "RoPEScaling", "NTKRoPE", "ROPE",
                 "Rope3D", "RoPE2D", "rotary1d", "GPTNeoXRotaryEmbedding"):
        assert names_rotary(name), name
    for name in ("SinusoidalEmbedding", "europe_map", "tropes", "rotate", "PosEncoder", "Europe2D"):
        assert not names_rotary(name), name


def test_amp101_asks_to_drop_a_cast_of_the_angles_that_follows():
    """The angles cast to the activations' dtype straight away: computing the product in fp32 alone changes nothing
    where that dtype is half, so the finding names the cast too; a move to a device or a cast to fp32 is no such
    cast."""
    from pathlib import Path

    from ampdoctor.lint.python import lint_source

    case = Path(__file__).parents[1] / "rules/AMP101-rope-under-autocast/code/bad_angles_cast_to_the_activation_dtype_right_after.py"
    text = case.read_text()
    (found,) = [f for f in lint_source(text, "rope.py")[0] if f.rule_id == "AMP101"]
    assert "drop the cast that follows" in found.message and ".to(dtype)" in found.message
    for harmless in (".to(device)", ".float()", ".to(torch.float32)"):
        (found,) = [f for f in lint_source(text.replace(".to(dtype)", harmless), "rope.py")[0] if f.rule_id == "AMP101"]
        assert "drop the cast" not in found.message
