import torch
from util import checkpoint as grad_checkpoint
from util import count_params


class Block(torch.nn.Module):
    def __init__(self, width):
        super().__init__()
        self.lin = torch.nn.Linear(width, width)

    def forward(self, x):
        return grad_checkpoint(self.lin, (x,), self.training)


def report(model):
    print(count_params(model))
