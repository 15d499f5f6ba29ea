# A table made as zeros in bf16 and then filled with the angles' cos/sin: the zeros are exact, the values written
# into them are rounded to bf16.
import torch


def rope_table(seq_len, dim, base=10000.0):
    inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim))
    angles = torch.outer(torch.arange(seq_len).float(), inv_freq)
    cos = torch.zeros((seq_len, dim), dtype=torch.bfloat16)  # ampdoctor: expect[AMP002]
    cos[:, 0::2] = angles.cos()
    cos[:, 1::2] = angles.cos()
    return cos
