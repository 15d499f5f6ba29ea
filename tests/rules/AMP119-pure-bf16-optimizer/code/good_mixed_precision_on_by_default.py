# The same script with bf16 mixed precision as its command line's default: a run that names no option trains
# under accelerate's autocast, which is outside this rule's reading (a model cast to bf16 and trained without
# autocast); the offered-but-off case is bad_mixed_precision_offered_but_off_by_default.py.
import argparse

import torch
from accelerate import Accelerator
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--mixed_precision", type=str, default="bf16", choices=["no", "fp16", "bf16"])
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
optimizer = torch.optim.AdamW(model.parameters(), lr=3e-5, weight_decay=0.1)


def train(loader):
    for idx, targets in loader:
        logits = model(idx)
        loss = nn.functional.cross_entropy(logits.float().view(-1, logits.size(-1)), targets.view(-1))
        accelerator.backward(loss)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
