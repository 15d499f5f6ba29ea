# The sum of two min-filled masks goes through a helper of the file that writes the dtype's minimum back over the
# -inf in place before attention uses it.
import torch


def finite_(x: torch.Tensor) -> None:
    x.masked_fill_(x == float("-inf"), torch.finfo(x.dtype).min)


def merged_bias(pad: torch.Tensor, n: int) -> torch.Tensor:
    causal = torch.ones(n, n).triu(1)
    causal.masked_fill_(causal == 1, torch.finfo(causal.dtype).min)
    padding = (1.0 - pad.float())[:, None, None, :] * torch.finfo(torch.float32).min
    bias = causal[None, None] + padding
    finite_(bias)
    return bias
