# The fix of huggingface/transformers PR #38453: cos/sin are cast like the fp32 input before the strict kernel.
import torch
from flash_attn.layers.rotary import apply_rotary_emb


def apply_rotary_pos_emb_flashatt(tensor: torch.Tensor, freqs: torch.Tensor) -> torch.Tensor:
    tensor_ = tensor.float()
    cos = freqs.cos().type_as(tensor_)
    sin = freqs.sin().type_as(tensor_)
    output = apply_rotary_emb(tensor_, cos, sin).type_as(tensor)
    return output


def apply_rotary_pos_emb_bf16(q: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    # all three in the activations' dtype: one dtype, as the kernel asks
    return apply_rotary_emb(q, cos.to(q.dtype), sin.to(q.dtype))
