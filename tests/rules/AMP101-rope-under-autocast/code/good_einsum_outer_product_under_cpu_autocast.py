# The same outer-product einsum under the CPU's autocast: there einsum is not on the lower-precision list, torch
# decomposes an einsum that contracts no index into an elementwise multiply, and that stays fp32.
import torch


def rope(pos, dim, theta=10000.0):
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim)).float()
    angles = torch.einsum("...n,d->...nd", pos.float(), freqs)
    return torch.cos(angles), torch.sin(angles)


def train_step(model, batch, optimizer):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = model(**batch).loss
    loss.backward()
    optimizer.step()
