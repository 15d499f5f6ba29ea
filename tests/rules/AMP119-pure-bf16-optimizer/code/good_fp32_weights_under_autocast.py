# The fix the catalog gives for pytorch/ao PR #1124: fp32 master weights, bf16 compute through autocast.
import torch
from torch import nn


class TinyLM(nn.Module):
    def __init__(self, vocab=256, dim=64):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.norm = nn.RMSNorm(dim)
        self.head = nn.Linear(dim, vocab)

    def forward(self, idx):
        return self.head(self.norm(self.embed(idx)))


model = TinyLM()
optimizer = torch.optim.AdamW(model.parameters(), lr=3e-5, weight_decay=0.1)


def train(loader):
    for idx, targets in loader:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(idx)
        loss = nn.functional.cross_entropy(logits.float().view(-1, logits.size(-1)), targets.view(-1))
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
