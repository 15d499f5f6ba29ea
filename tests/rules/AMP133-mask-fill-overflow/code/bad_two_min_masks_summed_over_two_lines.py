# The causal bias already holds the minimum above the diagonal; the padding term written over two lines adds another
# minimum where a padded key is also in the future: that sum overflows to -inf.
import torch


def merged_bias(pad: torch.Tensor, n: int, dtype: torch.dtype) -> torch.Tensor:
    causal = torch.full((n, n), torch.finfo(dtype).min, dtype=dtype).triu(1)
    bias = (
        causal[None, None]  # ampdoctor: expect[AMP133]
        + (1.0 - pad.to(dtype))[:, None, None, :] * torch.finfo(dtype).min
    )
    return bias
