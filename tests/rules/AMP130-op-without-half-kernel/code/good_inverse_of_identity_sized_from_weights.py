# A closed-form edit of projection weights (a model that may be fp16 or bf16): the matrix inverted starts as an
# identity of default dtype, sized and placed from the weight (its shape and device say nothing of its dtype), and
# the half terms are added in place, which keeps it fp32.
import torch


def edit(projection, keys, lamb=0.1, dtype=torch.float16):
    mat = lamb * torch.eye(projection.weight.shape[1], device=projection.weight.device)
    for k in keys:
        mat += (k.unsqueeze(-1) @ k.unsqueeze(-2)).sum(dim=0)
    return torch.inverse(mat)
