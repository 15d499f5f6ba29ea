# The base model is frozen and cast to bf16, and then adapters are added to it in the dtype of the layer they adapt
# (as PEFT does): the optimizer, given the model's trainable parameters, updates bf16 adapter weights in place.
import torch
from torch import nn


class Base(nn.Module):
    def __init__(self, dim=64):
        super().__init__()
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        out = self.proj(x)
        return out + self.lora(x) if hasattr(self, "lora") else out


def add_lora(layer, rank=8):
    like = {"device": layer.weight.device, "dtype": layer.weight.dtype}
    return nn.Sequential(nn.Linear(layer.in_features, rank, bias=False, **like), nn.Linear(rank, layer.out_features, bias=False, **like))


model = Base()
model.requires_grad_(False)
model.to("cuda", dtype=torch.bfloat16)
model.lora = add_lora(model.proj)
trainable = [p for p in model.parameters() if p.requires_grad]
optimizer = torch.optim.AdamW(trainable, lr=1e-4)  # ampdoctor: expect[AMP119]


def train(loader):
    for x in loader:
        loss = model(x.cuda().bfloat16()).float().pow(2).mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
