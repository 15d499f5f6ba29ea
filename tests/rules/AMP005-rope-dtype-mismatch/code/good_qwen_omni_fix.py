# The fix of huggingface/transformers PR #38453: cos/sin are cast like the fp32 input before the strict kernel;
# or all three stay in the activations' dtype.
import torch
from flash_attn.layers.rotary import apply_rotary_emb


def rotate_vision_tokens(x: torch.Tensor, angles: torch.Tensor) -> torch.Tensor:
    x32 = x.float()
    cos = angles.cos().type_as(x32)
    sin = angles.sin().type_as(x32)
    return apply_rotary_emb(x32, cos, sin).type_as(x)


def rotate_in_activation_dtype(q: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    return apply_rotary_emb(q, cos.to(q.dtype), sin.to(q.dtype))
