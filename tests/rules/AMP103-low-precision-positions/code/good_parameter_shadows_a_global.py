# A module-level bf16 `dtype` is shadowed by a parameter that defaults to fp32: the positions are fp32.
import torch

dtype = torch.bfloat16


def rotary_angles(seq_len, inv_freq, dtype=torch.float32):
    t = torch.arange(seq_len, dtype=dtype)
    return torch.outer(t, inv_freq)
