# A fused-RoPE kernel test feeds both implementations the same random cos/sin in bf16: those are arbitrary test
# numbers, not a table computed from positions, so nothing loses angle precision.
import torch


def reference_rope(x, cos, sin):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)


def test_fused_kernel_matches_reference(fused_rope):
    batch, seq, dim = 2, 16, 64
    x = torch.randn(batch, seq, dim, dtype=torch.bfloat16)
    cos = torch.randn(batch, seq, dim // 2, dtype=torch.bfloat16)
    sin = torch.rand(batch, seq, dim // 2, dtype=torch.bfloat16)
    torch.testing.assert_close(fused_rope(x, cos, sin), reference_rope(x, cos, sin))
