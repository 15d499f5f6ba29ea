# The weight reaches the decomposition through two names and a method chain; only `base` is upcast for half models,
# after `merged` was computed from it: the finding is at that upcast, which came too late.
import torch


def decompose(module, delta):
    base = module.get_base_layer().weight.data
    merged = base + delta
    if base.dtype == torch.bfloat16:  # ampdoctor: expect[AMP130:warning]
        base = base.float()
    return torch.linalg.svdvals(merged)


def decompose_unguarded(module, delta):
    base = module.get_base_layer().weight.data
    merged = base + delta
    return torch.linalg.svdvals(merged)  # ampdoctor: expect[AMP130:warning]
