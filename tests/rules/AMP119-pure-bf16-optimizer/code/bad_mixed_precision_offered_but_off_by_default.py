# The script offers accelerate's mixed precision on its command line, but its default is "no": a run that does not
# ask for it casts the whole model to bf16 without autocast, and a plain AdamW updates the bf16 weights in place.
import argparse

import torch
from accelerate import Accelerator
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--mixed_precision", type=str, default="no", choices=["no", "fp16", "bf16"])
args = parser.parse_args()
accelerator = Accelerator(mixed_precision=args.mixed_precision)


class TinyLM(nn.Module):
    def __init__(self, vocab=256, dim=64):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.norm = nn.RMSNorm(dim)
        self.head = nn.Linear(dim, vocab)

    def forward(self, idx):
        return self.head(self.norm(self.embed(idx)))


model = TinyLM().to(torch.bfloat16)
optimizer = torch.optim.AdamW(model.parameters(), lr=3e-5, weight_decay=0.1)  # ampdoctor: expect[AMP119]


def train(loader):
    for idx, targets in loader:
        logits = model(idx)
        loss = nn.functional.cross_entropy(logits.float().view(-1, logits.size(-1)), targets.view(-1))
        accelerator.backward(loss)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
