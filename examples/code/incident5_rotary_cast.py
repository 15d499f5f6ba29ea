"""Incident 5 (transformers#38451, Qwen2.5-Omni): the rotary input is upcast with `.float()` but cos/sin are not,
so flash-attn's `apply_rotary` asserts "Input and cos/sin must have the same dtype, got torch.float32 and
torch.bfloat16". `ampdoctor lint` reports rope-dtype-mismatch on line 13."""

import torch
from flash_attn.layers.rotary import apply_rotary_emb


def apply_rotary_pos_emb_vision(tensor: torch.Tensor, freqs: torch.Tensor) -> torch.Tensor:
    tensor_ = tensor.float()
    cos = freqs.cos()  # .type_as(tensor_)
    sin = freqs.sin()  # .type_as(tensor_)
    output = apply_rotary_emb(tensor_, cos, sin).type_as(tensor)
    return output
