# The cast module is not frozen and a wrapper built around it is what the optimizer is given: the wrapper's
# parameters include the bf16 weights of the encoder, which the plain AdamW then updates in place.
import torch
from torch import nn


class Encoder(nn.Module):
    def __init__(self, dim=64):
        super().__init__()
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        return self.proj(x)


class Wrapper(nn.Module):
    def __init__(self, encoder, dim=64):
        super().__init__()
        self.encoder = encoder
        self.head = nn.Linear(dim, dim)

    def forward(self, x):
        return self.head(self.encoder(x).float())


text_encoder = Encoder()
text_encoder.to("cuda", dtype=torch.bfloat16)
wrapper = Wrapper(text_encoder).cuda()
optimizer = torch.optim.AdamW(wrapper.parameters(), lr=1e-5)  # ampdoctor: expect[AMP119]


def train(loader):
    for x in loader:
        loss = wrapper(x.cuda().bfloat16()).pow(2).mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
