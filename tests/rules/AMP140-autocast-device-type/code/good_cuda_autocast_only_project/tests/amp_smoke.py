# a smoke check of the model under autocast (not collected by pytest: fixture input); CUDA only
import torch

from pkg.model import LayerNorm


def forward_under_amp():
    norm = LayerNorm(8).cuda()
    with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
        assert norm(torch.randn(2, 8, device="cuda")).shape == (2, 8)
