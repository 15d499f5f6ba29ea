# A solve of a tensor known to be bf16: no half kernel on any device ("lu_cpu" not implemented for 'BFloat16').
import torch


def whiten(cov):
    cov = cov.to(torch.bfloat16)
    return torch.linalg.solve(cov, torch.eye(cov.shape[0], dtype=cov.dtype))  # ampdoctor: expect[AMP130:error]
