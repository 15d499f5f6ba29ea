# A model file alone: nothing says which half dtype runs it, so the linear attention context is a note.
import torch
from torch import nn


class EfficientAttention(nn.Module):
    def forward(self, q, keys, values):
        context = torch.matmul(keys.transpose(-2, -1), values)  # ampdoctor: expect[AMP212:info]
        return torch.matmul(q, context)
