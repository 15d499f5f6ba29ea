# An fp32 additive mask handed to an encoder under autocast, which casts the mask with the queries.
import torch
from torch import nn


class Autocast(nn.Module):
    def __init__(self, encoder):
        super().__init__()
        self.encoder = encoder

    def forward(self, hidden, keep):
        bias = (1.0 - keep.float()) * -10000.0
        with torch.autocast("cuda", dtype=torch.bfloat16):
            return self.encoder(hidden, attention_mask=bias)  # autocast casts the mask with the queries
