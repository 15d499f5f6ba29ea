# Modalities PR #464 (the loss error equals the bf16 quantum of 0.25 at loss ~36) and google/flax#677: the model is
# cast to bf16 without autocast, and cross-entropy is taken on its bf16 logits.
import torch
import torch.nn.functional as F
from torch import nn


class GPT(nn.Module):
    def __init__(self, vocab=256, dim=64):
        super().__init__()
        self.wte = nn.Embedding(vocab, dim)
        self.lm_head = nn.Linear(dim, vocab, bias=False)

    def forward(self, idx, targets):
        logits = self.lm_head(self.wte(idx))
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))  # ampdoctor: expect[AMP125]
        return logits, loss


model = GPT().to(torch.bfloat16)
