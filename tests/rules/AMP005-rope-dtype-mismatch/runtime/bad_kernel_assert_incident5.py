# QwenLM/Qwen2.5-Omni#205 / huggingface/transformers#38451 (incident 5): RoPE runs on `tensor.float()` but cos/sin
# come from the bf16 `freqs` of a model cast to bf16; a kernel wrapper that checks dtypes (flash-attn's
# apply_rotary) fails. The audit names the failing call and walks back to where the table became bf16.
import torch
from torch import nn


def apply_rotary_emb(x, cos, sin):
    assert x.dtype == cos.dtype, f"Input and cos/sin must have the same dtype, got {x.dtype} and {cos.dtype}"  # ampdoctor: expect[AMP005]
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)


def apply_rotary_pos_emb_flashatt(tensor, freqs):
    tensor_ = tensor.float()
    cos = freqs.cos()  # .type_as(tensor_)
    sin = freqs.sin()  # .type_as(tensor_)
    return apply_rotary_emb(tensor_, cos, sin).type_as(tensor)


class VisionRotaryEmbedding(nn.Module):
    def __init__(self, dim, theta=10000.0):
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.float) / dim)), persistent=False)

    def forward(self, seqlen):
        seq = torch.arange(seqlen, dtype=self.inv_freq.dtype)
        return torch.outer(seq, self.inv_freq)


class VisionAttention(nn.Module):
    def __init__(self, dim=16):
        super().__init__()
        self.rotary_pos_emb = VisionRotaryEmbedding(dim // 2)
        self.q = nn.Linear(dim, dim)

    def forward(self, h):
        freqs = self.rotary_pos_emb(h.shape[0])
        freqs = torch.cat((freqs, freqs), dim=-1)
        return apply_rotary_pos_emb_flashatt(self.q(h), freqs)


model = VisionAttention().to(torch.bfloat16)  # DeepSpeed ZeRO-3 bf16 casts the module, buffers included
model(torch.randn(8, 16, dtype=torch.bfloat16)).float().pow(2).mean().backward()
