# fp32-only test code next to a rotary helper: `.float()` beside a table is no mismatch. The helper is a plain
# torch rotation (it promotes rather than asserting), and nothing here is half precision.
import torch


def apply_rotary_emb(x, cos, sin):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)


def test_rotation_preserves_norm():
    x = torch.randn(2, 8, 16)
    freqs = torch.randn(8, 8)
    cos, sin = freqs.cos(), freqs.sin()
    out = apply_rotary_emb(x.float(), cos, sin)
    assert torch.allclose(out.norm(dim=-1), x.norm(dim=-1), atol=1e-4)
