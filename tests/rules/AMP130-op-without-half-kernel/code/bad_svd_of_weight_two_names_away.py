# The weight reaches the decomposition through two names and a method chain; only `base` is upcast for half models.
import torch


def decompose(module, delta):
    base = module.get_base_layer().weight.data
    merged = base + delta
    if base.dtype == torch.bfloat16:
        base = base.float()
    return torch.linalg.svdvals(merged)  # ampdoctor: expect[AMP130:warning]
