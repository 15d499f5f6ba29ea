# NVIDIA/apex #93: a mask constant of -1e9 next to fp16 attention scores. torch.where turns the number into an
# fp16 tensor without an error: the masked scores are -inf, and a fully masked (padding) row is NaN after softmax.
import torch

torch.manual_seed(0)
scores = torch.randn(2, 4, 4, dtype=torch.float16)
keep = torch.ones(2, 4, 4, dtype=torch.bool).tril()
keep[1] = False  # a padding-only row
scores = torch.where(keep, scores, -1e9)  # ampdoctor: expect[AMP133:warning]
probs = scores.float().softmax(-1)
