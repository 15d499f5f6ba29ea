import pytest
import torch

from pkg.model import LayerNorm


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_forward_under_amp():
    norm = LayerNorm(8).cuda()
    with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
        assert norm(torch.randn(2, 8, device="cuda")).shape == (2, 8)
