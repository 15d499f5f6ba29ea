# huggingface/transformers#38451 / QwenLM/Qwen2.5-Omni#205 (incident 5): RoPE is run in fp32 but the `.type_as`
# on cos/sin was commented out; under bf16 the tables are bf16 and flash-attn's kernel asserts
# "Input and cos/sin must have the same dtype".
import torch
from flash_attn.layers.rotary import apply_rotary_emb


def apply_rotary_pos_emb_flashatt(tensor: torch.Tensor, freqs: torch.Tensor) -> torch.Tensor:
    tensor_ = tensor.float()
    cos = freqs.cos()  # .type_as(tensor_)
    sin = freqs.sin()  # .type_as(tensor_)
    output = apply_rotary_emb(tensor_, cos, sin).type_as(tensor)  # ampdoctor: expect[AMP005]
    return output
