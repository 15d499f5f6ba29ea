# Angles as an elementwise outer product (`pos[:, None] * inv_freq`, `torch.outer`) are not on autocast's
# lower-precision list and stay fp32 under bf16 autocast: the near miss of huggingface/transformers PR #29285.
import torch


def rope(pos, dim, theta=10000.0):
    inv_freq = 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim)).float()
    angles = pos.float()[..., None] * inv_freq
    outer = torch.outer(pos[0].float(), inv_freq)
    return torch.cos(angles), torch.sin(outer)


def train_step(model, batch):
    with torch.autocast("cuda", dtype=torch.bfloat16):
        return model(**batch).loss
