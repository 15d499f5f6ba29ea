# The idiom of huggingface/transformers PR #29285: angles and cos/sin in fp32 with autocast off, cast to the
# activations' dtype (possibly bf16) only on the way out. Returning bf16 views of fp32 tables is not a bf16 cache.
import torch


class RotaryTables(torch.nn.Module):
    def __init__(self, head_dim, theta=10000.0):
        super().__init__()
        exponents = torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim
        self.register_buffer("inv_freq", theta ** -exponents, persistent=False)

    @torch.no_grad()
    def forward(self, hidden, positions):
        with torch.autocast(device_type=hidden.device.type, enabled=False):
            angles = positions[:, :, None].float() * self.inv_freq[None, None, :].float()
            angles = torch.cat((angles, angles), dim=-1)
            cos_table, sin_table = angles.cos(), angles.sin()
        return cos_table.to(dtype=hidden.dtype), sin_table.to(dtype=hidden.dtype)


hidden_states = torch.randn(1, 8, 64).to(torch.bfloat16)
