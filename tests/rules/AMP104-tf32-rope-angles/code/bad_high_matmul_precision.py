# huggingface/transformers#48428 (fix PR #48450): with `set_float32_matmul_precision("high")` the fp32 angle matmul
# runs in TF32 (10 mantissa bits), so positions above 2048 are truncated.
import torch

torch.set_float32_matmul_precision("high")


class RotaryEmbedding(torch.nn.Module):
    def __init__(self, dim, base=500000.0):
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim)), persistent=False)

    def forward(self, x, position_ids):
        inv_freq_expanded = self.inv_freq[None, :, None].float().expand(position_ids.shape[0], -1, 1)
        freqs = (inv_freq_expanded @ position_ids[:, None, :].float()).transpose(1, 2)  # ampdoctor: expect[AMP104]
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)
