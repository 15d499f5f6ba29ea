import torch

from nn import checkpoint


class ResBlock(torch.nn.Module):
    """A residual block.

    :param use_checkpoint: if True, recompute the block in the backward pass.
    """

    def __init__(self, width, use_checkpoint=False):
        super().__init__()
        self.lin = torch.nn.Linear(width, width)
        self.use_checkpoint = use_checkpoint

    def forward(self, x):
        return checkpoint(self._forward, (x,), self.parameters(), self.use_checkpoint)

    def _forward(self, x):
        return x + self.lin(x)


class UNet(torch.nn.Module):
    def __init__(self, width, depth=2, use_checkpoint=False):
        super().__init__()
        self.blocks = torch.nn.ModuleList(ResBlock(width, use_checkpoint=use_checkpoint) for _ in range(depth))

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return x
