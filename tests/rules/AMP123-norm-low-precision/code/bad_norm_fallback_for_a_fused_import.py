# A hand-written LayerNorm that stands in for a fused one when its import fails runs only where that import fails:
# a note, with what it stands in for. The same norm defined unconditionally runs in every fp16 run: a warning.
import torch
from torch import nn

try:
    from fusedlib.normalization import FusedLayerNorm as BlockNorm
except ImportError:

    class BlockNorm(nn.Module):
        def __init__(self, size, eps=1e-12):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(size))
            self.eps = eps

        def forward(self, x):
            u = x.mean(-1, keepdim=True)
            s = (x - u).pow(2).mean(-1, keepdim=True)  # ampdoctor: expect[AMP123:info]
            return self.weight * (x - u) / torch.sqrt(s + self.eps)


class HeadNorm(nn.Module):
    def __init__(self, size, eps=1e-12):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(size))
        self.eps = eps

    def forward(self, x):
        u = x.mean(-1, keepdim=True)
        s = (x - u).pow(2).mean(-1, keepdim=True)  # ampdoctor: expect[AMP123:warning]
        return self.weight * (x - u) / torch.sqrt(s + self.eps)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)
        self.norm = BlockNorm(16)
        self.head_norm = HeadNorm(16)

    def forward(self, x):
        return self.head_norm(self.norm(self.fc(x)))


model = Net().cuda().half()
