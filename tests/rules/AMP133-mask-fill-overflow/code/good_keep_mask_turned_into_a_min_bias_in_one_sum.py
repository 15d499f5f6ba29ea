# A 0/1 keep-mask becomes an additive bias in one expression written over two lines: `mask` holds 1 where a key is
# kept, so only one of the two terms holds the minimum at any position; the result is rebound to the same name.
import torch


def attention_bias(lengths: torch.Tensor, n: int, dtype: torch.dtype) -> torch.Tensor:
    idx = torch.arange(n, device=lengths.device)
    valid = idx[None, :] < lengths[:, None]
    mask = (valid[:, None, :, None] & valid[:, None, None, :]).to(dtype)
    mask = (
        mask + (1.0 - mask) * torch.finfo(dtype).min
    )
    return mask
