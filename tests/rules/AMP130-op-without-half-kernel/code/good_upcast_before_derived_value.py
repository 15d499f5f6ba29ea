# The fixed order of huggingface/peft PR #3410: upcast first, then derive; or upcast the derived value as well.
import torch


def principal_directions(layer, delta, k):
    base = layer.weight.detach()
    needs_fp32 = base.dtype in (torch.float16, torch.bfloat16)
    if needs_fp32:
        base = base.float()
    combined = base + delta
    u_base = torch.linalg.svd(base, full_matrices=False)[0]
    u_all = torch.linalg.svd(combined, full_matrices=False)[0]
    return (u_all[:, :k].T @ u_base[:, :k]).abs()


def principal_directions_both(layer, delta, k):
    base = layer.weight.detach()
    combined = base + delta
    if base.dtype in (torch.float16, torch.bfloat16):
        base = base.float()
        combined = combined.float()
    return torch.linalg.svd(combined)[0][:, :k].T @ torch.linalg.svd(base)[0][:, :k]
