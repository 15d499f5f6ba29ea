# A fallback for a library helper that may be missing: its autocast has no dtype, but its `enabled` is the caller's,
# and the one caller turns it off to keep the rotary angles in fp32. The module trains in bf16 elsewhere.
import torch

try:
    from some_library.utils import maybe_autocast
except ImportError:
    from contextlib import contextmanager

    @contextmanager
    def maybe_autocast(device_type=None, enabled=True):
        with torch.autocast(device_type=device_type, enabled=enabled):
            yield


class Rotary(torch.nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / 10000 ** (torch.arange(0, dim, 2).float() / dim), persistent=False)

    def forward(self, x, position_ids):
        with maybe_autocast(device_type=x.device.type, enabled=False):
            freqs = (self.inv_freq[None, :, None] @ position_ids[:, None, :].float()).transpose(1, 2)
            emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(torch.bfloat16), emb.sin().to(torch.bfloat16)
