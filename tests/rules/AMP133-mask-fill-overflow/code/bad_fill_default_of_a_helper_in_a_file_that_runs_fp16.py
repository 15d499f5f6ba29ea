# A helper fills with its parameter's default, -1e7, which is the value of every call that leaves it out; the
# tensor's dtype is the caller's, and this file runs its model in fp16, where masked_fill raises on -1e7.
import torch


def masked_max(vector, mask, dim, fill=-1e7):
    return vector.masked_fill(~mask, fill).max(dim=dim)[0]  # ampdoctor: expect[AMP133:info]


def load(path):
    return torch.load(path).to(torch.float16)
