# A strict rotary kernel given an input upcast to fp32 and cos/sin tables whose dtype this code does not decide (the
# caller's angles), with no sign of a half model: flash-attn's kernel fails where the tables are bf16/fp16 and runs
# where they are fp32, so this is a warning that says the condition.
from flash_attn.layers.rotary import apply_rotary_emb


def rotate(x, angles):
    cos, sin = angles.cos(), angles.sin()
    return apply_rotary_emb(x.float(), cos, sin)  # ampdoctor: expect[AMP005:warning]
