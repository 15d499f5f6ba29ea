# The fix: the smallest value of the scores' own dtype stays finite, so a fully masked row stays a number.
import torch

torch.manual_seed(0)
scores = torch.randn(2, 4, 4, dtype=torch.float16)
keep = torch.ones(2, 4, 4, dtype=torch.bool).tril()
keep[1] = False
scores = torch.where(keep, scores, torch.finfo(scores.dtype).min)
probs = scores.float().softmax(-1)
bias = torch.where(keep, 0.0, -1e9)  # fp32: -1e9 is finite there
