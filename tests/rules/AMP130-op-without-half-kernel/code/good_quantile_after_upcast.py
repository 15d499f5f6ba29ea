# The fixed version: the quantile is taken of the fp32 copy, and the limit goes back to the scores' dtype.
import torch


def clip_outliers(scores, q=0.99):
    scores = scores.to(torch.bfloat16)
    limit = torch.quantile(scores.abs().float(), q).to(scores.dtype)
    return scores.clamp(-limit, limit)
