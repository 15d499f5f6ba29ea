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


class AttentionBlock(torch.nn.Module):
    def __init__(self, width):
        super().__init__()
        self.qkv = torch.nn.Linear(width, 3 * width)

    def forward(self, x):
        return checkpoint(self._forward, (x,), self.parameters(), True)

    def _forward(self, x):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        return x + torch.softmax(q @ k.transpose(-1, -2), dim=-1) @ v


class UNet(torch.nn.Module):
    def __init__(self, width, depth=2, use_checkpoint=False):
        super().__init__()
        self.blocks = torch.nn.ModuleList(ResBlock(width, use_checkpoint=use_checkpoint) for _ in range(depth))
        self.attention = AttentionBlock(width)

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return self.attention(x)
