# A cos/sin cache allocated in bf16 and filled later holds bf16 values whatever precision its angles had.
import torch


class Rotary(torch.nn.Module):
    def __init__(self, dim, max_len=8192):
        super().__init__()
        self.register_buffer("cos_cached", torch.empty(max_len, dim, dtype=torch.bfloat16))  # ampdoctor: expect[AMP002]
        inv_freq = 1.0 / (10000 ** (torch.arange(0, dim, 2).float() / dim))
        angles = torch.outer(torch.arange(max_len).float(), inv_freq)
        self.cos_cached.copy_(torch.cat((angles, angles), dim=-1).cos())
