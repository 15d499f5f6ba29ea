# A softmax in a half model whose input comes from no matmul written here: a router's gate logits, `w = self.gate(h)`.
# The same short name as bad_scores_named_w.py, but no attention scores feed it: not this rule.
import torch
import torch.nn.functional as F
from torch import nn


class Router(nn.Module):
    def __init__(self, width=64, experts=8):
        super().__init__()
        self.gate = nn.Linear(width, experts)

    def forward(self, h):
        w = self.gate(h)
        w = w - w.amax(dim=-1, keepdim=True)
        return F.softmax(w, dim=-1)


net = Router().to(torch.bfloat16)
