# A boolean mask times 1.0 is a tensor of the default dtype, fp32, whatever the model runs in: -1e9 fits, and the
# fp16 cast after the fill rounds it to -inf, a value fp16 has.
import torch


def additive_mask(attention_mask):
    return (attention_mask * 1.0).masked_fill(attention_mask, -1e9).to(torch.float16)
