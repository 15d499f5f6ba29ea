# apex's amp.initialize at opt_level O1 patches torch's functions to run matmuls in fp16, as fp16 autocast does: the
# attention scores are fp16 and masked_fill of -1e9 raises.
import torch
from apex import amp
from torch import nn


class Attention(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.qkv = nn.Linear(dim, 3 * dim)

    def forward(self, x, mask):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        scores = q @ k.transpose(-2, -1)
        scores = scores.masked_fill(mask, -1e9)  # ampdoctor: expect[AMP133]
        return scores.softmax(-1) @ v


def train(loader, opt_level="O1"):
    model = Attention(64).cuda()
    opt = torch.optim.AdamW(model.parameters())
    model, opt = amp.initialize(model, opt, opt_level=opt_level)
    for x, mask, y in loader:
        loss = (model(x, mask) - y).pow(2).mean()
        with amp.scale_loss(loss, opt) as scaled:
            scaled.backward()
        opt.step()
        opt.zero_grad()
