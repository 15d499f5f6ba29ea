# The helper the sum is handed to only logs it: nothing brings the -inf back into range.
import torch


def log_range(x: torch.Tensor) -> None:
    print(x.amin().item(), x.amax().item())


def merged_bias(pad: torch.Tensor, n: int) -> torch.Tensor:
    causal = torch.ones(n, n).triu(1)
    causal.masked_fill_(causal == 1, torch.finfo(causal.dtype).min)
    padding = (1.0 - pad.float())[:, None, None, :] * torch.finfo(torch.float32).min
    bias = causal[None, None] + padding  # ampdoctor: expect[AMP133]
    log_range(bias)
    return bias
