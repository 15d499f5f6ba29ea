# The sum of two min-filled masks is clamped back to the dtype's minimum before attention; a mask added to
# scores that are not a min-filled mask is ordinary.
import torch
import torch.nn.functional as F


def combined_bias(mask: torch.Tensor, n: int, dtype: torch.dtype) -> torch.Tensor:
    causal = torch.ones(n, n, dtype=torch.bool).triu(1).to(dtype)
    causal.masked_fill_(causal == 1, torch.finfo(dtype).min)
    padding = (1.0 - mask.to(dtype))[:, None, None, :] * torch.finfo(dtype).min
    bias = causal[None, None, :, :] + padding
    bias = bias.clamp(min=torch.finfo(dtype).min)
    return bias


def inline(causal, padding, dtype):
    return torch.max(causal + padding, torch.tensor(torch.finfo(dtype).min))


def attend(q, k, v, mask):
    bias = (1.0 - mask) * torch.finfo(q.dtype).min
    scores = q @ k.transpose(-2, -1) + bias
    return F.softmax(scores, dim=-1) @ v
