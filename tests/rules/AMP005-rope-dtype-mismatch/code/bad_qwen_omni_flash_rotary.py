# huggingface/transformers#38451 / QwenLM/Qwen2.5-Omni#205 (incident 5): RoPE is run in fp32 but the cast of cos/sin
# to the upcast input was commented out; under bf16 the tables are bf16 and flash-attn's kernel asserts
# "Input and cos/sin must have the same dtype".
import torch
from flash_attn.layers.rotary import apply_rotary_emb


def rotate_vision_tokens(x: torch.Tensor, angles: torch.Tensor) -> torch.Tensor:
    x32 = x.float()
    cos = angles.cos()  # .type_as(x32)
    sin = angles.sin()  # .type_as(x32)
    return apply_rotary_emb(x32, cos, sin).type_as(x)  # ampdoctor: expect[AMP005:error]
