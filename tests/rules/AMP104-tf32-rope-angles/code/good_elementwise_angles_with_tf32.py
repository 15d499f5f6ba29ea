# The fix of huggingface/transformers PR #48450: TF32 stays on for the model's matmuls, but the angles are an
# elementwise product, which TF32 does not touch.
import torch

torch.set_float32_matmul_precision("high")


class RotaryEmbedding(torch.nn.Module):
    def __init__(self, dim, base=500000.0):
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim)), persistent=False)

    def forward(self, x, position_ids):
        freqs = position_ids[:, :, None].float() * self.inv_freq[None, None, :].float()
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)
