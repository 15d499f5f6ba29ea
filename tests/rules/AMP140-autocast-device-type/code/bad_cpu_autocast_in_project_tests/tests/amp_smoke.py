# a smoke check of the model under autocast (not collected by pytest: fixture input)
import torch

from pkg.model import LayerNorm


def forward_under_amp():
    cuda = torch.cuda.is_available()
    norm = LayerNorm(8)
    with torch.autocast(device_type="cuda" if cuda else "cpu", dtype=torch.bfloat16):
        assert norm(torch.randn(2, 8)).shape == (2, 8)
