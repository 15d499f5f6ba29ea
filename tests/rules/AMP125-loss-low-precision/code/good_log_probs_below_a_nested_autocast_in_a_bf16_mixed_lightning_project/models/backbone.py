# The backbone runs its blocks under a nested bf16 autocast and takes log-probabilities after the block. The project's
# Lightning config trains in bf16-mixed: the Trainer runs the step under autocast, which is back on after the nested
# block, so the log-softmax runs in fp32 in training (a note says what holds outside the step).
import torch
from torch import nn


class Backbone(nn.Module):
    def __init__(self, width: int, vocab: int, depth: int):
        super().__init__()
        self.blocks = nn.ModuleList(nn.Linear(width, width) for _ in range(depth))
        self.head = nn.Linear(width, vocab)

    def forward(self, x):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            for block in self.blocks:
                x = block(x)
            output = self.head(x)
        return output.log_softmax(-1)
