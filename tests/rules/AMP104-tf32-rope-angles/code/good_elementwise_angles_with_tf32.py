# The fix of huggingface/transformers PR #48450: TF32 stays on for the model's matmuls, but the angles are an
# elementwise product, which TF32 does not touch.
import torch

torch.set_float32_matmul_precision("high")


class AngleRotary(torch.nn.Module):
    def __init__(self, head_dim, theta=500000.0):
        super().__init__()
        self.register_buffer("inv_freq", theta ** -(torch.arange(0, head_dim, 2).float() / head_dim), persistent=False)

    def forward(self, hidden, positions):
        angles = positions[:, :, None].float() * self.inv_freq[None, None, :].float()
        angles = torch.cat((angles, angles), dim=-1)
        return angles.cos().to(hidden.dtype), angles.sin().to(hidden.dtype)
