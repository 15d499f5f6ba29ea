# Modalities PR #464 (the loss error equals the bf16 quantum of 0.25 at loss ~36) and google/flax#677: the model is
# cast to bf16 without autocast, and cross-entropy is taken on its bf16 logits.
import torch
import torch.nn.functional as F
from torch import nn


class TinyDecoder(nn.Module):
    def __init__(self, vocab=256, width=64):
        super().__init__()
        self.tok = nn.Embedding(vocab, width)
        self.unembed = nn.Linear(width, vocab, bias=False)

    def forward(self, tokens, labels):
        scores = self.unembed(self.tok(tokens))
        loss = F.cross_entropy(scores.flatten(0, 1), labels.flatten())  # ampdoctor: expect[AMP125]
        return scores, loss


net = TinyDecoder().to(torch.bfloat16)
