# A local kernel wrapper that asserts one dtype (as flash-attn's apply_rotary does, transformers #38451): the input
# is upcast but the tables are bf16.
import torch


def fused_rotary(x, cos, sin):
    assert x.dtype == cos.dtype, "Input and cos/sin must have the same dtype"
    return x * cos


def forward(q, freqs):
    cos = freqs.cos().bfloat16()
    sin = freqs.sin().bfloat16()
    return fused_rotary(q.float(), cos, sin)  # ampdoctor: expect[AMP005:error]
