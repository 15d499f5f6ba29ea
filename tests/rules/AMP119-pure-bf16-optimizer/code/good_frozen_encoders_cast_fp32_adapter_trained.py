# An adapter trainer: the frozen encoders are cast to bf16 to save memory, and the optimizer is given only the
# parameters of the fp32 adapter modules beside them, so no bf16 weight is ever updated.
import itertools

import torch
from torch import nn


class Encoder(nn.Module):
    def __init__(self, dim=64):
        super().__init__()
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        return self.proj(x)


class Adapter(nn.Module):
    def __init__(self, dim=64):
        super().__init__()
        self.down = nn.Linear(dim, 8)
        self.up = nn.Linear(8, dim)

    def forward(self, h):
        return self.up(self.down(h))


text_encoder = Encoder()
image_encoder = Encoder()
text_encoder.requires_grad_(False)
image_encoder.requires_grad_(False)
text_encoder.to("cuda", dtype=torch.bfloat16)
image_encoder.to("cuda", dtype=torch.bfloat16)
adapter = Adapter().cuda()
proj = nn.Linear(64, 64).cuda()

params_to_opt = itertools.chain(adapter.parameters(), filter(lambda p: p.requires_grad, proj.parameters()))
optimizer = torch.optim.AdamW(params_to_opt, lr=1e-4)


def train(loader):
    for text, image in loader:
        h = text_encoder(text.cuda().bfloat16()).float() + image_encoder(image.cuda().bfloat16()).float()
        loss = (adapter(h) + proj(h)).pow(2).mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
