# A fused rotary kernel wants one dtype: the fp32 tables are cast to bf16 only where the query is bf16, on the way into
# the kernel, which is `.to(q.dtype)` spelled with a test.
import torch


def fused_rotate(q, cos, sin):
    return q * cos + torch.roll(q, 1, -1) * sin


def rotate(q, cos, sin):
    if q.dtype == torch.bfloat16:
        return fused_rotate(q, cos.unsqueeze(0).to(torch.bfloat16), sin.unsqueeze(0).to(torch.bfloat16))
    return fused_rotate(q, cos.unsqueeze(0), sin.unsqueeze(0))


def rotate_keys(k, cos, sin):
    if k.dtype != torch.bfloat16:
        return fused_rotate(k, cos, sin)
    else:
        return fused_rotate(k, cos.bfloat16(), sin.bfloat16())
