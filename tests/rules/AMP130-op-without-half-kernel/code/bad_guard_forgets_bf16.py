# huggingface/peft PR #3364: of several copies of a CPU merge guard, two still named float16 alone after the others
# had been extended to bfloat16, so a bf16 adapter merged on CPU took the unprotected path.
import torch


def delta_linear(a, b, scale):
    up = a.device.type == "cpu" and a.dtype in (torch.float16, torch.bfloat16)
    if up:
        b = b.float()
        a = a.float()
    return (b @ a) * scale


def delta_conv(a, b, scale):
    dtype = a.dtype
    up = a.device.type == "cpu" and dtype == torch.float16  # ampdoctor: expect[AMP130:warning]
    if up:
        a = a.float()
        b = b.float()
    return (b.flatten(1) @ a.flatten(1)) * scale
