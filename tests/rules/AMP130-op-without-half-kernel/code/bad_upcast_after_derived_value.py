# huggingface/peft PR #3410: the base weight was upcast for half models only after the merged weight had been
# computed from it, so the SVD of the merged weight still ran in bf16/fp16 ("linalg_svd_cpu" not implemented).
import torch


def principal_directions(layer, delta, k):
    base = layer.weight.detach()
    combined = base + delta
    needs_fp32 = base.dtype in (torch.float16, torch.bfloat16)  # ampdoctor: expect[AMP130:warning]
    if needs_fp32:
        base = base.float()
    u_base = torch.linalg.svd(base, full_matrices=False)[0]
    u_all = torch.linalg.svd(combined, full_matrices=False)[0]
    return (u_all[:, :k].T @ u_base[:, :k]).abs()
