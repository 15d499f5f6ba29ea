# Positions built in the dtype a parameter defaults to: a caller that leaves `dtype` out gets bf16 positions,
# which cannot tell apart neighbouring positions past 256.
import torch


def rotary_angles(seq_len, inv_freq, dtype=torch.bfloat16):
    t = torch.arange(seq_len, dtype=dtype)  # ampdoctor: expect[AMP103]
    return torch.outer(t, inv_freq)
