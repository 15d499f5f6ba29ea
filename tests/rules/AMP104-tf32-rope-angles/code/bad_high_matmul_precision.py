# huggingface/transformers#48428 (fix PR #48450): with `set_float32_matmul_precision("high")` the fp32 angle matmul
# runs in TF32 (10 mantissa bits), so positions above 2048 are truncated.
import torch

torch.set_float32_matmul_precision("high")


class AngleRotary(torch.nn.Module):
    def __init__(self, head_dim, theta=500000.0):
        super().__init__()
        self.register_buffer("inv_freq", theta ** -(torch.arange(0, head_dim, 2).float() / head_dim), persistent=False)

    def forward(self, hidden, positions):
        freq_col = self.inv_freq[None, :, None].float().expand(positions.shape[0], -1, 1)
        angles = (freq_col @ positions[:, None, :].float()).transpose(1, 2)  # ampdoctor: expect[AMP104]
        angles = torch.cat((angles, angles), dim=-1)
        return angles.cos().to(hidden.dtype), angles.sin().to(hidden.dtype)
