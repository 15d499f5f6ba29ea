"""Incident 5 (QwenLM/Qwen2.5-Omni#205, huggingface/transformers#38451, fix PR #38453).

`apply_rotary_pos_emb_flashatt` runs RoPE in fp32 (`tensor.float()`), but the `.type_as(tensor_)`
on cos/sin was commented out; under bf16 the rotary `inv_freq` buffer (cast with the model), the
`freqs` and so cos/sin are bf16, and flash-attn's kernel wrapper asserts:
"Input and cos/sin must have the same dtype, got torch.float32 and torch.bfloat16".

Run: python examples/incidents/incident5_rotary_dtype.py
"""

import torch
import torch.nn as nn

torch.manual_seed(0)


def apply_rotary_emb(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    # The shape of flash_attn/layers/rotary.py::apply_rotary: a kernel wrapper that checks dtypes.
    assert x.dtype == cos.dtype, f"Input and cos/sin must have the same dtype, got {x.dtype} and {cos.dtype}"
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)


def apply_rotary_pos_emb_flashatt(tensor: torch.Tensor, freqs: torch.Tensor) -> torch.Tensor:
    tensor_ = tensor.float()
    cos = freqs.cos()  # .type_as(tensor_)
    sin = freqs.sin()  # .type_as(tensor_)
    return apply_rotary_emb(tensor_, cos, sin).type_as(tensor)


class VisionRotaryEmbedding(nn.Module):
    def __init__(self, dim: int, theta: float = 10000.0) -> None:
        super().__init__()
        inv_freq = 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.float) / dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def forward(self, seqlen: int) -> torch.Tensor:
        seq = torch.arange(seqlen, device=self.inv_freq.device, dtype=self.inv_freq.dtype)
        return torch.outer(seq, self.inv_freq)


class VisionAttention(nn.Module):
    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, h: torch.Tensor, rotary_pos_emb: torch.Tensor) -> torch.Tensor:
        s, d = h.shape
        q, k, v = self.qkv(h).reshape(s, 3, self.heads, d // self.heads).permute(1, 0, 2, 3).unbind(0)
        q = apply_rotary_pos_emb_flashatt(q, rotary_pos_emb)
        k = apply_rotary_pos_emb_flashatt(k, rotary_pos_emb)
        out = nn.functional.scaled_dot_product_attention(q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1))
        return self.proj(out.transpose(0, 1).reshape(s, d))


class VisionBlock(nn.Module):
    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.attn = VisionAttention(dim, heads)

    def forward(self, h: torch.Tensor, rotary_pos_emb: torch.Tensor) -> torch.Tensor:
        return h + self.attn(self.norm(h), rotary_pos_emb)


class VisionEncoder(nn.Module):
    def __init__(self, dim: int = 64, heads: int = 4, depth: int = 2) -> None:
        super().__init__()
        self.rotary_pos_emb = VisionRotaryEmbedding(dim // heads // 2)
        self.blocks = nn.ModuleList(VisionBlock(dim, heads) for _ in range(depth))

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        freqs = self.rotary_pos_emb(h.shape[0])
        freqs = torch.cat((freqs, freqs), dim=-1)[:, None, :]
        for block in self.blocks:
            h = block(h, freqs)
        return h


def main() -> None:
    model = VisionEncoder().to(torch.bfloat16)  # DeepSpeed ZeRO-3 bf16 casts the module, buffers included
    patches = torch.randn(16, 64, dtype=torch.bfloat16)
    loss = model(patches).float().pow(2).mean()
    loss.backward()


if __name__ == "__main__":
    main()
