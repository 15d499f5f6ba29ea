# A causal bias and a padding mask, each filled with the dtype's minimum, added together: where both mask a
# position, min + min is -inf, and a row of -inf gives NaN in attention.
import torch
import torch.nn.functional as F


def combined_bias(mask: torch.Tensor, n: int, dtype: torch.dtype) -> torch.Tensor:
    causal = torch.ones(n, n, dtype=torch.bool).triu(1).to(dtype)
    causal.masked_fill_(causal == 1, torch.finfo(dtype).min)
    padding = (1.0 - mask.to(dtype))[:, None, None, :] * torch.finfo(dtype).min
    bias = causal[None, None, :, :] + padding  # ampdoctor: expect[AMP133:warning]
    return bias


def attend(q, k, v, mask):
    bias = (1.0 - mask) * torch.finfo(q.dtype).min
    bias += (1.0 - mask.transpose(-2, -1)) * torch.finfo(q.dtype).min  # ampdoctor: expect[AMP133:warning]
    return F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
